package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/joakimp/devbox-config/confpos"
)

// TOMLDoc is a TOML file (Codex's config.toml) in which one table, such as
// [mcp_servers.mempalace], can be read as JSON and replaced, inserted or
// removed while every byte outside it stays as it was: comments, ordering,
// blank lines, CRLF. Only the table form is edited; an entry written as an
// inline table or with dotted keys elsewhere is reported, not rewritten.
//
// Positions come from go-toml's unstable parser, the one library that
// exposes byte ranges for every key/value; values are decoded with the same
// library, so what the splice reads is what a TOML reader reads.
type TOMLDoc struct {
	src  []byte
	tree map[string]any
	// bom: the input began with a UTF-8 byte order mark (Codex loads such
	// a file), which src does not hold; Bytes gives it back.
	bom bool
}

// ParseTOML parses src. Empty input is an empty document. Errors name the
// line and column.
func ParseTOML(src []byte) (*TOMLDoc, error) {
	src, bom := bytes.CutPrefix(src, utf8BOM)
	d := &TOMLDoc{src: bytes.Clone(src), tree: map[string]any{}, bom: bom}
	if len(bytes.TrimSpace(src)) == 0 {
		return d, nil
	}
	if err := toml.Unmarshal(src, &d.tree); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position() // go-toml counts the column in bytes
			line, col = confpos.LineCol(src, confpos.Offset(src, line, col))
			return nil, &confpos.Error{Line: line, Col: col, What: tomlWhat(de.Error()), Err: err}
		}
		return nil, err
	}
	return d, nil
}

// tomlWhat is go-toml's message with the key it names twice ("toml: key
// NAME is already defined", "toml: table NAME already exists...") as
// confpos.Key repeats one.
func tomlWhat(msg string) string {
	for _, p := range []string{"toml: key ", "toml: table "} {
		rest, _ := strings.CutPrefix(msg, p)
		for _, t := range []string{" is already defined", " already exists"} {
			if i := strings.Index(rest, t); i > 0 && len(rest) < len(msg) {
				return p + confpos.Key(rest[:i]) + rest[i:]
			}
		}
	}
	return msg
}

// Bytes returns the document's current text.
func (d *TOMLDoc) Bytes() []byte {
	if d.bom {
		return concat(utf8BOM, d.src)
	}
	return bytes.Clone(d.src)
}

// Get returns the value at path as standard JSON, or nil if it is absent.
func (d *TOMLDoc) Get(path ...string) ([]byte, error) {
	v, ok := valueAt(d.tree, path)
	if !ok {
		return nil, nil
	}
	return json.Marshal(v)
}

// valueAt is the value at path in a decoded tree, and whether it is there.
func valueAt(v any, path []string) (any, bool) {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// Has reports whether path exists.
func (d *TOMLDoc) Has(path ...string) (bool, error) {
	b, err := d.Get(path...)
	return b != nil, err
}

// Duplicates is always empty: TOML forbids defining a key twice, so such a
// file does not parse.
func (d *TOMLDoc) Duplicates(path ...string) *DuplicateError { return nil }

// Set replaces the table at path with value (a JSON object), or appends the
// table at the end of the file when there is none.
func (d *TOMLDoc) Set(value []byte, path ...string) error {
	body, err := tableText(value, path, d.newline())
	if err != nil {
		return err
	}
	start, end, found, err := d.span(path)
	if err != nil {
		return err
	}
	if found {
		return d.reparse(concat(d.src[:start], d.fit(body, end), d.src[end:]))
	}
	head := d.src
	if len(bytes.TrimSpace(head)) > 0 {
		if !bytes.HasSuffix(head, []byte("\n")) {
			head = concat(head, []byte(d.newline()))
		}
		head = concat(head, []byte(d.newline()))
	}
	return d.reparse(concat(head, d.fit(body, len(d.src))))
}

// fit drops body's final line break when it goes at the end of a file
// whose last line has none, so the file keeps its ending (and Delete
// gives the file back).
func (d *TOMLDoc) fit(body []byte, at int) []byte {
	if at == len(d.src) && len(bytes.TrimSpace(d.src)) > 0 && !bytes.HasSuffix(d.src, []byte("\n")) {
		return bytes.TrimSuffix(body, []byte(d.newline()))
	}
	return body
}

// Delete removes the table at path (with the one blank line before it that
// Set adds) and reports whether it was there.
func (d *TOMLDoc) Delete(path ...string) (bool, error) {
	start, end, found, err := d.span(path)
	if err != nil || !found {
		return false, err
	}
	nl := d.newline()
	if bytes.HasSuffix(d.src[:start], []byte(nl+nl)) {
		start -= len(nl)
		if end == len(d.src) && !bytes.HasSuffix(d.src, []byte("\n")) {
			start -= len(nl) // the last line had no line break (Set's fit)
		}
	} else if start == len(nl) && bytes.Equal(d.src[:start], []byte(nl)) {
		start = 0
	}
	return true, d.reparse(concat(d.src[:start], d.src[end:]))
}

func (d *TOMLDoc) reparse(src []byte) error {
	nd, err := ParseTOML(src)
	if err != nil {
		return fmt.Errorf("the edit would not parse (please report): %w", err)
	}
	nd.bom = d.bom
	*d = *nd
	return nil
}

func (d *TOMLDoc) newline() string { return newlineOf(d.src) }

// newlineOf is the line break a spliced document's new lines use: CRLF
// when the document has any, else LF.
func newlineOf(src []byte) string {
	if bytes.Contains(src, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// span finds the bytes of the table at path: from its header's '[' to the end of the last key/value line of it and its sub-tables.
// Comment lines after that last key belong to what follows and are kept.
func (d *TOMLDoc) span(path []string) (start, end int, found bool, err error) {
	if len(d.src) == 0 {
		return 0, 0, false, nil
	}
	p := &unstable.Parser{}
	p.Reset(d.src)
	var table []string
	inside, closed := false, false
	_, held := valueAt(d.tree, path)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			keys, first, last := nodeKey(e.Key())
			table = keys
			mine := hasPrefix(keys, path)
			header := bytes.LastIndexByte(d.src[:first], '[') // indentation before it is not the table's
			if e.Kind == unstable.ArrayTable {
				header-- // [[ is one token
			}
			// [[path.x]] is part of the table, as [path.x] is; [[path]]
			// is no table.
			if e.Kind == unstable.ArrayTable && slices.Equal(keys, path) {
				return 0, 0, false, confpos.At("", d.src, header, pathName(path)+" is an array of tables ([[...]]), not one table",
					fmt.Sprintf("write it as one [%s] table, with single brackets, holding the one entry you mean", strings.Join(path, ".")))
			}
			if e.Kind == unstable.ArrayTable && hasPrefix(path, keys) { // [[mcp_servers]]: a list, not a table of entries
				parent := strings.Join(keys, ".")
				return 0, 0, false, confpos.At("", d.src, header, fmt.Sprintf("%s is an array of tables ([[%s]]), so render cannot add a [%s] table", parent, parent, strings.Join(path, ".")),
					fmt.Sprintf("write each entry of it as its own [%s.NAME] table by hand ([[%s]] with name = \"x\" becomes [%s.x])", parent, parent, parent))
			}
			if mine && closed {
				return 0, 0, false, fmt.Errorf("%s is split into parts with other tables between them; put them together by hand", pathName(path))
			}
			if mine && !inside {
				start, found, inside = header, true, true
			}
			if mine {
				end = lineEnd(d.src, last)
			} else if inside {
				inside, closed = false, true
			}
		case unstable.KeyValue:
			keys, _, _ := nodeKey(e.Key())
			full := append(append([]string(nil), table...), keys...)
			if inside {
				end = lineEnd(d.src, int(e.Raw.Offset+e.Raw.Length))
				continue
			}
			if err := d.keyOutside(full, path, held, int(e.Raw.Offset)); err != nil {
				return 0, 0, false, err
			}
		}
	}
	if err := p.Error(); err != nil {
		return 0, 0, false, err
	}
	return start, end, found, nil
}

// keyOutside says why the key full, at offset outside the table at path,
// keeps render from editing that table (held: the document sets path), if
// it does.
func (d *TOMLDoc) keyOutside(full, path []string, held bool, offset int) error {
	// A key above path that holds it (so is a table: path goes
	// through it) sets path too.
	if hasPrefix(full, path) || hasPrefix(path, full) && held {
		return confpos.At("", d.src, offset, fmt.Sprintf("%s is set with an inline table or dotted keys; render edits only a [%s] table", pathName(path), strings.Join(path, ".")),
			"move it into a ["+strings.Join(path, ".")+"] table by hand")
	}
	// One that does not hold it is a value or an inline table, so
	// no [path] table can be added under it.
	if hasPrefix(path, full) {
		parent := strings.Join(full, ".")
		return confpos.At("", d.src, offset, fmt.Sprintf("%s is set as an inline table or a value, so render cannot add a [%s] table", parent, strings.Join(path, ".")),
			fmt.Sprintf("write each entry of it as its own [%s.NAME] table by hand (%s = { x = {...} } becomes [%s.x])", parent, parent, parent))
	}
	return nil
}

func nodeKey(it unstable.Iterator) (keys []string, first, last int) {
	first = -1
	for it.Next() {
		n := it.Node()
		keys = append(keys, string(n.Data))
		if first < 0 {
			first = int(n.Raw.Offset)
		}
		last = int(n.Raw.Offset + n.Raw.Length)
	}
	return keys, first, last
}

func hasPrefix(keys, prefix []string) bool {
	return len(keys) >= len(prefix) && slices.Equal(keys[:len(prefix)], prefix)
}

// lineEnd is the offset just past the newline ending the line holding off
// (the end of the file if there is none). After a header or a key/value
// only blanks and a comment can follow on the line.
func lineEnd(src []byte, off int) int {
	if i := bytes.IndexByte(src[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(src)
}

// tomlKey writes a key bare when TOML allows it (A-Za-z0-9_-), else quoted.
// No regexp: this package is on every container start's path, and a
// package-level regexp is compiled at init.
func tomlKey(k string) string {
	bare := k != ""
	for _, c := range k {
		bare = bare && (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}
	if bare {
		return k
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// tableText renders a JSON object as a TOML table: scalars and arrays as
// key = value lines in the object's own key order, nested objects as inline
// tables.
func tableText(value []byte, path []string, nl string) ([]byte, error) {
	var obj orderedObject
	if err := json.Unmarshal(value, &obj); err != nil {
		return nil, fmt.Errorf("a TOML table needs a JSON object, got %.40q", value)
	}
	var b strings.Builder
	var hdr []string
	for _, p := range path {
		hdr = append(hdr, tomlKey(p))
	}
	b.WriteString("[" + strings.Join(hdr, ".") + "]" + nl)
	for _, m := range obj {
		v, err := tomlValue(m.value)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", strings.Join(path, "."), m.key, err)
		}
		b.WriteString(tomlKey(m.key) + " = " + v + nl)
	}
	return []byte(b.String()), nil
}

// tomlValue writes one JSON value as TOML. A JSON string's escapes are all
// valid in a TOML basic string; null has no TOML form.
func tomlValue(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty value")
	}
	switch raw[0] {
	case '"', 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
		if s, ok := v.(string); ok {
			enc, _ := json.Marshal(s)
			return string(enc), nil
		}
		return string(raw), nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return "", err
		}
		parts := make([]string, 0, len(items))
		for _, it := range items {
			s, err := tomlValue(it)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", err
		}
		if len(m) == 0 {
			return "{}", nil
		}
		parts := make([]string, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			s, err := tomlValue(m[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, tomlKey(k)+" = "+s)
		}
		return "{ " + strings.Join(parts, ", ") + " }", nil
	}
	return "", fmt.Errorf("%.20s has no TOML form", raw)
}
