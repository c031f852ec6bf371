package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
	"github.com/tidwall/gjson"
)

// Unused is why a harness would not use its MemPalace entry, and the fix.
type Unused struct{ Message, Fix string }

func (u Unused) String() string { return fmt.Sprintf("%s (fix: %s)", u.Message, u.Fix) }

// Ignored is why rec's harness would not use the MemPalace entry the
// config at path holds, in rung m, one each (none: no file, no entry, or
// nothing in the way). doctor reports it; render warns with the same
// words at every start (ignored).
func Ignored(rec harness.Record, home, path string, m ladder.Mode) []Unused {
	f, err := load(OS{}, rec, path)
	if err != nil || f.data == nil {
		return nil
	}
	entry, err := f.doc.Get(rec.Pointer()...)
	if err != nil {
		return nil
	}
	return ignored(OS{}, home, rec, path, f.doc, entry, m)
}

// ignored is the one evaluator of a record's Ignores and MergedFrom for
// the entry (nil: none, nothing to say) of file, parsed as doc.
func ignored(sys System, home string, rec harness.Record, file string, doc document, entry []byte, m ladder.Mode) []Unused {
	if entry == nil {
		return nil
	}
	var out []Unused
	w := walker{doc: doc, objs: map[string]map[string]json.RawMessage{}}
	for _, ig := range rec.Ignores {
		if ig.Remote && m == ladder.Solitary {
			continue
		}
		for _, h := range w.walk(ig.Path, 0, "") {
			if !holds(ig, h.value) {
				continue
			}
			r := strings.NewReplacer("{key}", h.key)
			out = append(out, Unused{fmt.Sprintf("%s: %s %s; the MemPalace entry is there but unused", file, h.path, r.Replace(ig.Why)), r.Replace(ig.Fix)})
		}
	}
	if u, ok := mergedFrom(sys, home, rec, file, entry); ok {
		out = append(out, u)
	}
	return out
}

// hit is a value at an Ignore's path: where ("*" filled in), the key "*"
// matched, the value as standard JSON.
type hit struct {
	path, key string
	value     []byte
}

// walker reads the values at Ignore paths in one document, each object
// on the way decoded once however many paths run through it (Claude
// Code's projects: one Get and one decode of each project for all of its
// Ignores, not one per project and Ignore).
type walker struct {
	doc  document
	objs map[string]map[string]json.RawMessage // by the path to them
}

// walk is every value at path, "*" standing for each key at its level, in
// key order (key: the last "*"'s, filled into path from its i'th key on).
func (w *walker) walk(path []string, i int, key string) []hit {
	star := slices.Index(path[i:], "*")
	if star < 0 {
		last := len(path) - 1
		if v, ok := w.obj(path[:last])[path[last]]; ok {
			return []hit{{path: dotted(path, key), key: key, value: v}}
		}
		return nil
	}
	at := path[:i+star]
	var out []hit
	for _, k := range slices.Sorted(maps.Keys(w.obj(at))) {
		p := slices.Clone(path)
		p[i+star] = k
		out = append(out, w.walk(p, i+star+1, k)...)
	}
	return out
}

// obj is the object at path, decoded once from its parent's (nil: none,
// or not an object); a top-level one is read from the document.
func (w *walker) obj(path []string) map[string]json.RawMessage {
	id := strings.Join(path, "\x00")
	if m, ok := w.objs[id]; ok {
		return m
	}
	var b []byte
	if len(path) <= 1 {
		b = w.top(path)
	} else {
		b = w.obj(path[:len(path)-1])[path[len(path)-1]]
	}
	w.objs[id] = members(b)
	return w.objs[id]
}

// members is the object b's members by key, a key written twice read
// last as JSON.parse reads it (nil: not an object). b is valid JSON: the
// file was checked whole before (gjson scans it; encoding/json took 4x
// as long on a large ~/.claude.json's projects).
func members(b []byte) map[string]json.RawMessage {
	r := gjson.ParseBytes(b)
	if !r.IsObject() {
		return nil
	}
	m := map[string]json.RawMessage{}
	r.ForEach(func(k, v gjson.Result) bool {
		m[k.String()] = json.RawMessage(v.Raw)
		return true
	})
	return m
}

// top is the top-level value at path (its one key): as written when a
// large document's skeleton left it out and it is strict JSON, which
// spares the whole document's parse (a 9.7 MB ~/.claude.json's dry run:
// 0.27 -> 0.10 s with members, BENCHMARKS.md); else through Get.
func (w *walker) top(path []string) []byte {
	if s, ok := w.doc.(interface{ Skipped(string) ([]byte, bool) }); ok && len(path) == 1 {
		if b, ok := s.Skipped(path[0]); ok {
			return b
		}
	}
	b, _ := w.doc.Get(path...) // an error: nothing there to judge
	return b
}

// dotted is a key path for people, a key with a dot, a slash or a space
// quoted ("projects./home/me/proj" would read as more keys).
func dotted(path []string, quoted string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = p
		if p == quoted && quoted != "" || strings.ContainsAny(p, "./ ") {
			parts[i] = fmt.Sprintf("[%q]", p)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "."), ".[", "[")
}

// holds reports whether value meets ig's condition.
func holds(ig harness.Ignore, value []byte) bool {
	if ig.When == harness.Present {
		return true
	}
	var list []any
	if json.Unmarshal(value, &list) != nil {
		return false // not a list: the harness reads no list there either
	}
	named := slices.ContainsFunc(list, func(v any) bool {
		s, ok := v.(string)
		if ig.Fold {
			s = strings.ToLower(strings.TrimSpace(s))
		}
		return ok && s == harness.Server
	})
	return named == (ig.When == harness.Lists)
}

// mergedFrom warns about the fields of rec.MergedFrom's entry that the
// harness would merge into entry (false: none, or no such file or entry).
func mergedFrom(sys System, home string, rec harness.Record, file string, entry []byte) (Unused, bool) {
	if rec.MergedFrom == "" {
		return Unused{}, false
	}
	other := filepath.Join(home, rec.MergedFrom)
	_, data, _, err := readFile(sys, other)
	if err != nil || data == nil {
		return Unused{}, false
	}
	doc, err := merge.ParseDoc(data)
	if err != nil {
		return Unused{}, false // the harness reads nothing from it either
	}
	theirs, err := doc.Get(rec.Pointer()...)
	var t, ours map[string]json.RawMessage
	if err != nil || json.Unmarshal(theirs, &t) != nil || json.Unmarshal(entry, &ours) != nil {
		return Unused{}, false
	}
	for k := range ours {
		delete(t, k)
		for _, d := range rec.MergeDrops[k] {
			delete(t, d)
		}
	}
	if len(t) == 0 {
		return Unused{}, false
	}
	// names only: a value there may be a secret
	fields := strings.Join(slices.Sorted(maps.Keys(t)), ", ")
	key := strings.Join(rec.Pointer(), ".")
	return Unused{fmt.Sprintf("%s: %s also defines %s; %s merges it field by field under this file's, so its %s end up in the entry", file, other, key, rec.Title, fields),
		fmt.Sprintf("delete %s from %s, or those fields from it", key, other)}, true
}
