package confpos

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
)

// Placed is err, a refusal of a value that parses ("devices[1].kg: ... must
// be ..."), at the line and column of the value its leading path names in
// the JSON(C) src; fix, if not "", is its fix. A path not in the file (a
// key that is missing) is placed at the nearest value on it the file has
// (the device a missing id belongs to, a null in its place); none but the
// top level leaves err as "file: err".
func Placed(file string, src []byte, err error, fix string) error {
	path, _, ok := strings.Cut(err.Error(), ": ")
	for ok && path != "" {
		if off, found := Locate(src, path); found {
			e := At(file, src, off, err.Error(), fix)
			e.Err = err
			return e
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
	if fix != "" {
		return fmt.Errorf("%s: %w (fix: %s)", file, err, fix)
	}
	return fmt.Errorf("%s: %w", file, err)
}

// Locate is the offset of the value at path (name, .name, [index] and
// ["key"] steps, as errors write them) in the JSON(C) src; of a key named
// twice, the last (the one encoding/json keeps).
func Locate(src []byte, path string) (int, bool) {
	v, err := hujson.Parse(src)
	if err != nil || path == "" {
		return 0, false
	}
	cur := &v
	for path != "" {
		var key string
		index := -1
		switch {
		case path[0] == '.':
			path = path[1:]
			continue
		case strings.HasPrefix(path, `["`):
			q, err := strconv.QuotedPrefix(path[1:])
			if err != nil || !strings.HasPrefix(path[1+len(q):], "]") {
				return 0, false
			}
			key, _ = strconv.Unquote(q)
			path = path[2+len(q):]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			n, err := strconv.Atoi(path[1:max(end, 1)])
			if end < 0 || err != nil {
				return 0, false
			}
			index, path = n, path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			key, path = path[:end], path[end:]
			if key == "" || strings.ContainsAny(key, " ,") {
				return 0, false // not a path: "a, b: ..." or words
			}
		}
		var next *hujson.Value
		switch x := cur.Value.(type) {
		case *hujson.Object:
			for i := range x.Members {
				if index < 0 && x.Members[i].Name.Value.(hujson.Literal).String() == key {
					next = &x.Members[i].Value
				}
			}
		case *hujson.Array:
			if index >= 0 && index < len(x.Elements) {
				next = &x.Elements[index]
			}
		}
		if next == nil {
			return 0, false
		}
		cur = next
	}
	return cur.StartOffset, true
}
