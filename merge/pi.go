package merge

import (
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// FillMissing is pi-devbox's settings merge (`jq -s '.[0] * .[1]'` with the
// template first and the live file second), done as edits of the live
// document: the user's values always win, only keys missing from the live
// file are added, objects merge recursively and arrays are leaves (a model
// the user deliberately removed is not added back).
//
// It returns the dotted paths it added; none means the live file already
// holds everything and must not be rewritten.
func FillMissing(live *Doc, template []byte) ([]string, error) {
	tv, err := hujson.Parse(template)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	tv.Standardize()
	tobj, ok := tv.Value.(*hujson.Object)
	if !ok {
		return nil, fmt.Errorf("template: top-level value is not an object")
	}
	var added []string
	var walk func(obj *hujson.Object, path []string) error
	walk = func(obj *hujson.Object, path []string) error {
		for _, m := range obj.Members {
			p := append(path[:len(path):len(path)], memberName(m))
			cur, err := live.Get(p...)
			if err != nil {
				return err
			}
			if cur == nil {
				val := m.Value.Clone()
				val.BeforeExtra, val.AfterExtra = nil, nil
				val.Minimize()
				if err := live.Append(val.Pack(), p...); err != nil {
					return err
				}
				added = append(added, strings.Join(p, "."))
				continue
			}
			sub, isObj := m.Value.Value.(*hujson.Object)
			if isObj && len(cur) > 0 && cur[0] == '{' {
				if err := walk(sub, p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(tobj, nil); err != nil {
		return nil, err
	}
	return added, nil
}
