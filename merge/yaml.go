package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/fingerprint"
)

// YAMLDoc is a YAML file (Continue's config.yaml, Goose's) in which one
// entry can be read as JSON and replaced, inserted or removed while every
// byte outside it stays as it was: comments, order, blank lines, anchors,
// CRLF. The entry is a mapping member (extensions.mempalace) or, with a
// list key, the item of a block sequence named by it (mcpServers' item
// whose name is mempalace). Only block style is edited: an entry or a
// non-empty parent written in flow style ({…}, […]) is reported, not
// rewritten; an empty one ("mcpServers: []") becomes a block.
//
// The library parses (go.yaml.in/yaml/v4: the YAML organisation's
// maintained yaml, whose node API gives every key's line and column and
// whose errors give the problem's; v3's gave a line only, often the
// wrong one);
// the splice works on lines, since a block entry is exactly the lines
// from its key (or its "- ") to the next line indented no deeper, less
// the comments and blank lines at its end, which belong to what follows.
// Every edit is parsed again, so what the splice wrote is what a YAML
// reader reads.
type YAMLDoc struct {
	src     []byte
	root    *yaml.Node // the top-level mapping; nil for an empty document
	listKey string
}

// ParseYAML parses src. Empty input is an empty document. listKey names
// the field that names a sequence's items ("" : paths run through
// mappings only). Errors name the line.
func ParseYAML(src []byte, listKey string) (*YAMLDoc, error) {
	d := &YAMLDoc{src: bytes.Clone(src), listKey: listKey}
	for i := bytes.IndexByte(src, '\r'); i >= 0; i = bytes.IndexByte(src[i+1:], '\r') + i + 1 {
		if i+1 == len(src) || src[i+1] != '\n' {
			// YAML reads a lone CR as a line break; the splice counts lines by LF
			return nil, confpos.At("", src, i, "a carriage return without a line feed; render edits YAML with LF or CRLF line endings only", "")
		}
		if bytes.IndexByte(src[i+1:], '\r') < 0 {
			break
		}
	}
	if err := notUTF8(src); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(versionAsComment(src)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		return nil, yamlError(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, &confpos.Error{Line: more.Line, Col: more.Column, What: "a second YAML document; the config must be one document",
			Fix: "keep one document: move what you need from the second into the first, then remove this --- and what follows it"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	if len(doc.Content) == 0 {
		return d, nil
	}
	top := doc.Content[0]
	switch {
	case top.Kind == yaml.ScalarNode && top.Tag == "!!null":
		return d, nil
	case top.Kind != yaml.MappingNode:
		return nil, &confpos.Error{Line: top.Line, Col: top.Column, What: "the top-level value is not a mapping"}
	}
	if err := duplicateKey(top, nil); err != nil {
		return nil, err
	}
	d.root = top
	return d, nil
}

// notUTF8 places the first byte of src that is not UTF-8 (the library
// says only "invalid leading UTF-8 octet"). A file in UTF-16 or UTF-32 is
// refused before it is parsed (render's notUTF8), so any such byte is a
// mistake in a UTF-8 file: a value pasted or saved in another encoding.
func notUTF8(src []byte) error {
	if utf8.Valid(src) { // the usual file: one fast pass, no rune loop
		return nil
	}
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n == 1 {
			return confpos.At("", src, i, fmt.Sprintf("byte 0x%02X is not UTF-8, which YAML must be (a character saved in another encoding, such as Latin-1)", src[i]),
				"retype the character there, or convert the file to UTF-8 (iconv -f LATIN1 -t UTF-8 converts a Latin-1 file)")
		}
		i += n
	}
	return nil
}

// duplicateKey refuses a mapping in n (at path) that names a key twice:
// Continue's parser ("Map keys must be unique") refuses the file, and the
// splice would edit only one of the two. Keys are compared as that parser
// compares them (coreKey), not by text. Keys that are not scalars are not
// compared; aliases are not followed.
func duplicateKey(n *yaml.Node, path []string) error {
	switch n.Kind {
	case yaml.MappingNode:
		seen := map[any]*yaml.Node{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k := n.Content[j]
			if key, ok := coreKey(k); ok {
				if first := seen[key]; first != nil {
					return &confpos.Error{Line: k.Line, Col: k.Column, What: fmt.Sprintf("%s is named twice (first at line %d), which the harness refuses", confpos.Key(append(slices.Clone(path), k.Value)...), first.Line),
						Fix: "keep one, merging the two by hand"}
				}
				seen[key] = k
			}
			if err := duplicateKey(n.Content[j+1], append(path, k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, it := range n.Content {
			if err := duplicateKey(it, append(path, fmt.Sprint(i))); err != nil {
				return err
			}
		}
	}
	return nil
}

// versionAsComment is src with a %YAML 1.x directive of its prologue (the
// lines before the first ---) turned into a comment of the same length
// ("#YAML 1.2"), so every line and column stays where it was: the library
// refuses any version but 1.1 ("found incompatible YAML document", at
// 1:1), while Continue's cn loads a %YAML 1.2 document. The library then
// reads it as 1.1, which differs from 1.2 in plain scalars such as yes/no
// and 0o17, none of which the entry's keys or values are. src itself,
// directive and marker, is what is kept and written.
func versionAsComment(src []byte) []byte {
	for at := 0; at < len(src); {
		line, _, _ := bytes.Cut(src[at:], []byte("\n"))
		if bytes.HasPrefix(line, []byte("%YAML 1.")) {
			out := bytes.Clone(src)
			out[at] = '#'
			return out // one: a second is an error the library reports
		}
		if len(bytes.TrimSpace(line)) > 0 && line[0] != '#' && line[0] != '%' {
			return src // content, or the --- marker: the prologue is over
		}
		at += len(line) + 1
	}
	return src
}

// yamlError places the library's error: the problem's line and column,
// or, for a flow collection or a quoted scalar never closed, where it
// opened (the problem is then at the end of what follows, far from the
// edit a person must make).
func yamlError(err error) error {
	var le *yaml.LoadError
	if !errors.As(err, &le) || le.Mark.Line == 0 {
		return err
	}
	at, what := le.Mark, le.Message
	if le.ContextMark.Line > 0 && (strings.Contains(le.ContextMsg, "flow") || strings.Contains(le.ContextMsg, "quoted scalar")) {
		at = le.ContextMark
		what = fmt.Sprintf("%s (%s that starts here; the parser stopped at line %d, column %d)", what, le.ContextMsg, le.Mark.Line, le.Mark.Column)
	}
	return &confpos.Error{Line: at.Line, Col: at.Column, What: what, Err: err}
}

// Bytes returns the document's current text.
func (d *YAMLDoc) Bytes() []byte { return bytes.Clone(d.src) }

// find walks path: each step a mapping key, or, in a sequence with a list
// key, the item so named. It returns the node at the end (nil if absent),
// the deepest node found along the way and how many steps it took.
func (d *YAMLDoc) find(path []string) (node, parent *yaml.Node, depth int) {
	n := d.root
	for i, k := range path {
		if n == nil {
			return nil, nil, 0
		}
		next := d.child(n, k)
		if next == nil {
			return nil, n, i
		}
		parent, n = n, next
	}
	return n, parent, len(path)
}

// child is n's member k: a mapping's value, or a sequence's item named k.
func (d *YAMLDoc) child(n *yaml.Node, k string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if d.listKey == "" {
			return nil
		}
		for _, it := range n.Content {
			if v := d.child(it, d.listKey); it.Kind == yaml.MappingNode && v != nil && v.Kind == yaml.ScalarNode && v.Value == k {
				return it
			}
		}
	}
	return nil
}

// Get returns the value at path as standard JSON, or nil if it is absent.
func (d *YAMLDoc) Get(path ...string) ([]byte, error) {
	n, _, _ := d.find(path)
	if n == nil {
		return nil, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("line %d: %s: %w", n.Line, strings.Join(path, "."), err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("line %d: %s has no JSON form (a key that is not a string?): %w", n.Line, strings.Join(path, "."), err)
	}
	return b, nil
}

// Has reports whether path exists.
func (d *YAMLDoc) Has(path ...string) (bool, error) {
	n, _, _ := d.find(path)
	return n != nil, nil
}

// Duplicates reports the first mapping along path that names the next key
// twice, or a sequence with two items of that name.
func (d *YAMLDoc) Duplicates(path ...string) *DuplicateError {
	n := d.root
	for i, k := range path {
		if n == nil {
			return nil
		}
		var found []*yaml.Node // the key nodes (or items) named k
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == k {
					found, next = append(found, n.Content[j]), n.Content[j+1]
				}
			}
		case yaml.SequenceNode:
			for _, it := range n.Content {
				if v := d.child(it, d.listKey); d.listKey != "" && it.Kind == yaml.MappingNode && v != nil && v.Value == k {
					found, next = append(found, it), it
				}
			}
		}
		if len(found) > 1 {
			return &DuplicateError{Path: strings.Join(path[:i+1], "."), Line: found[1].Line, Column: found[1].Column}
		}
		n = next
	}
	return nil
}

// Indirect reports where the entry at path comes through an alias or a
// merge key (<<), which the splice neither edits nor sees as the entry: a
// step whose value is an alias, a sequence item that is an alias to (or
// merges in) the item so named, or a mapping without the key whose merge
// key brings it in. nil: the path is plain YAML.
func (d *YAMLDoc) Indirect(path ...string) *confpos.Error {
	n := d.root
	for _, k := range path {
		if n == nil {
			return nil
		}
		if n.Kind == yaml.AliasNode {
			return &confpos.Error{Line: n.Line, Col: n.Column}
		}
		if next := d.child(n, k); next != nil {
			n = next
			continue
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "<<" && merged(n.Content[i+1], k, 0) != nil {
					return &confpos.Error{Line: n.Content[i].Line, Col: n.Content[i].Column}
				}
			}
		case yaml.SequenceNode:
			for _, it := range n.Content {
				if v := merged(it, d.listKey, 0); d.listKey != "" && v != nil && v.Value == k {
					return &confpos.Error{Line: it.Line, Col: it.Column}
				}
			}
		}
		return nil
	}
	return nil
}

// merged is the value of key k in n, an alias, a mapping or a merge key's
// sequence of them, following aliases and merge keys (nil: none).
func merged(n *yaml.Node, k string, depth int) *yaml.Node {
	if n == nil || depth > 32 { // aliases can nest, not loop forever
		return nil
	}
	switch n.Kind {
	case yaml.AliasNode:
		return merged(n.Alias, k, depth+1)
	case yaml.SequenceNode:
		for _, it := range n.Content {
			if v := merged(it, k, depth+1); v != nil {
				return v
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				return n.Content[i+1]
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "<<" {
				if v := merged(n.Content[i+1], k, depth+1); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// Set replaces the entry at path with value (a JSON object), or inserts it
// at the end of its parent, creating the parents that are missing. An edit
// that would not read back as value is refused and nothing changes.
func (d *YAMLDoc) Set(value []byte, path ...string) error {
	if len(path) == 0 {
		return errors.New("yaml: an empty path")
	}
	orig := *d
	if err := d.set(value, path); err != nil {
		*d = orig
		return err
	}
	got, err := d.Get(path...)
	if same, _ := fingerprint.Equal(got, value); err != nil || !same {
		*d = orig
		return fmt.Errorf("%s: the edit would not read back as written (please report); edit it by hand", strings.Join(path, "."))
	}
	return nil
}

func (d *YAMLDoc) set(value []byte, path []string) error {
	n, parent, depth := d.find(path)
	if n != nil {
		start, end, ind, err := d.span(n, parent, path)
		if err != nil {
			return err
		}
		body, err := d.entryText(value, path[len(path)-1], parent.Kind == yaml.SequenceNode, ind)
		if err != nil {
			return err
		}
		return d.reparse(concat(d.src[:start], d.fit(body, end), d.src[end:]))
	}
	return d.insert(value, path, parent, depth)
}

// Delete removes the entry at path and reports whether it was there.
func (d *YAMLDoc) Delete(path ...string) (bool, error) {
	n, parent, _ := d.find(path)
	if n == nil {
		return false, nil
	}
	start, end, _, err := d.span(n, parent, path)
	if err != nil {
		return false, err
	}
	if d.noFinalNL(end) && start > 0 {
		// the entry was the last line, without a line break: the one before
		// it goes too (insert put it there)
		start--
		if start > 0 && d.src[start-1] == '\r' {
			start--
		}
	}
	out := concat(d.src[:start], d.src[end:])
	if len(path) > 1 && len(parent.Content) == map[bool]int{true: 1, false: 2}[parent.Kind == yaml.SequenceNode] {
		// The last member goes: the parent stays an empty collection
		// ("key: []"), which the harness reads as before, not null.
		owner, _, _ := d.find(path[:len(path)-2])
		if key := d.keyOf(owner, parent); key != nil {
			if at := d.afterColon(key); at > 0 && at <= start {
				empty := " {}"
				if parent.Kind == yaml.SequenceNode {
					empty = " []"
				}
				out = concat(d.src[:at], []byte(empty), d.src[at:start], d.src[end:])
			}
		}
	}
	return true, d.reparse(out)
}

// EmptyText is the line of the key whose value, the collection at path, is
// empty or null ("extensions:", "mcpServers: [] # none"): what inserting
// into it changes besides the new entry.
func (d *YAMLDoc) EmptyText(path ...string) (string, bool) {
	start, end, ok := d.emptyLine(path)
	if !ok {
		return "", false
	}
	return string(d.src[start:end]), true
}

// RestoreEmpty puts back the line EmptyText gave when the collection at
// path is empty again and its line differs from that one only in how the
// empty value is written (Delete writes {} or [], where there may have
// been nothing, ~ or { }). It reports whether it did.
func (d *YAMLDoc) RestoreEmpty(line string, path ...string) (bool, error) {
	start, end, ok := d.emptyLine(path)
	if !ok {
		return false, nil
	}
	cur := string(d.src[start:end])
	key := d.afterColon(d.keyOf(d.parentOf(path), d.nodeAt(path))) - start
	if cur == line || len(line) < key || line[:key] != cur[:key] || restOfLine(line[key:]) != restOfLine(cur[key:]) {
		return false, nil
	}
	return true, d.reparse(concat(d.src[:start], []byte(line), d.src[end:]))
}

// emptyLine is the span of the line of path's key, without its line
// break, when path's value is an empty collection or null on that line.
func (d *YAMLDoc) emptyLine(path []string) (start, end int, ok bool) {
	n := d.nodeAt(path)
	if n == nil {
		return 0, 0, false
	}
	empty := n.Kind == yaml.ScalarNode && n.Tag == "!!null" ||
		(n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && len(n.Content) == 0
	key := d.keyOf(d.parentOf(path), n)
	if !empty || key == nil || n.Line != key.Line && n.Value != "" || d.afterColon(key) == 0 {
		return 0, 0, false
	}
	start = d.lineStart(key.Line)
	end = start + bytes.IndexAny(append(d.src[start:len(d.src):len(d.src)], '\n'), "\r\n")
	return start, end, true
}

func (d *YAMLDoc) nodeAt(path []string) *yaml.Node {
	if len(path) == 0 {
		return nil
	}
	n, _, _ := d.find(path)
	return n
}

func (d *YAMLDoc) parentOf(path []string) *yaml.Node {
	if len(path) == 1 {
		return d.root
	}
	return d.nodeAt(path[:len(path)-1])
}

// restOfLine is what follows a key's colon without the empty value
// written there, if any, and without blanks: the comment.
func restOfLine(s string) string {
	s = strings.TrimSpace(s)
	for _, v := range []string{"{}", "[]", "~", "null", "Null", "NULL"} {
		if r, ok := strings.CutPrefix(s, v); ok && (r == "" || r[0] == ' ' || r[0] == '\t') {
			return strings.TrimSpace(r)
		}
	}
	for _, pair := range []string{"{}", "[]"} { // with blanks inside
		if r, ok := strings.CutPrefix(s, pair[:1]); ok {
			if i := strings.IndexByte(r, pair[1]); i >= 0 && strings.TrimSpace(r[:i]) == "" {
				return strings.TrimSpace(r[i+1:])
			}
		}
	}
	return s
}

// afterColon is the offset just past the ":" that follows key (0 if it is
// not on the key's line).
func (d *YAMLDoc) afterColon(key *yaml.Node) int {
	ls := d.lineStart(key.Line)
	off := ls + key.Column - 1 + len(key.Value)
	if off > len(d.src) {
		return 0
	}
	eol := lineEnd(d.src, ls)
	i := bytes.IndexByte(d.src[off:eol], ':')
	if i < 0 {
		return 0
	}
	return off + i + 1
}

func (d *YAMLDoc) reparse(src []byte) error {
	nd, err := ParseYAML(src, d.listKey)
	if err != nil {
		return fmt.Errorf("the edit would not parse (please report): %w", err)
	}
	*d = *nd
	return nil
}

func (d *YAMLDoc) newline() string { return newlineOf(d.src) }

// lineStart is the offset of the first byte of 1-based line n.
func (d *YAMLDoc) lineStart(n int) int {
	off := 0
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(d.src[off:], '\n')
		if j < 0 {
			return len(d.src)
		}
		off += j + 1
	}
	return off
}

// blockEnd is the end of the block that starts on line first and holds
// the lines indented deeper than col (0-based): the start of the next line
// indented no deeper, less the blank and comment lines before it. With
// compact, the block is a key whose sequence may sit at the key's own
// indentation ("key:" then "- item"), so such lines are the block's too.
func (d *YAMLDoc) blockEnd(first, col int, compact bool) int {
	off := d.lineStart(first)
	off = lineEnd(d.src, off) // the first line is the block's
	end := off
	for off < len(d.src) {
		next := lineEnd(d.src, off)
		line := d.src[off:next]
		text := bytes.TrimLeft(line, " \t")
		body := bytes.TrimRight(text, "\r\n")
		indent := len(line) - len(text)
		switch {
		case len(body) == 0, body[0] == '#':
			// blank or a comment: the block's only if a line of it follows
		case compact && indent == col && (bytes.HasPrefix(body, []byte("- ")) || string(body) == "-"):
			end = next
		case indent <= col:
			return end
		default:
			end = next
		}
		off = next
	}
	return end
}

// span is the bytes of the entry n (the value of its key in parent, or an
// item of parent): from the start of its key's (or "- "'s) line to the end
// of its block. ind is the entry's indentation.
func (d *YAMLDoc) span(n, parent *yaml.Node, path []string) (start, end, ind int, err error) {
	if err := d.blockStyle(path[:len(path)-1]); err != nil {
		return 0, 0, 0, err
	}
	var line, col int
	compact := false
	if parent.Kind == yaml.SequenceNode {
		if line, col, err = d.dash(n); err != nil {
			return 0, 0, 0, err
		}
	} else {
		key := d.keyOf(parent, n)
		line, col = key.Line, key.Column-1
		compact = n.Kind == yaml.SequenceNode
	}
	start = d.lineStart(line)
	if pre := d.src[start:min(start+col, len(d.src))]; len(bytes.Trim(pre, " ")) != 0 {
		fix := fmt.Sprintf("write it as %s: on a line of its own, indented as the keys beside it", path[len(path)-1])
		if parent.Kind == yaml.SequenceNode {
			fix = "start its item, - " + d.listKey + ": " + path[len(path)-1] + ", on a line of its own"
		}
		return 0, 0, 0, &confpos.Error{Line: line, Col: col + 1, What: fmt.Sprintf("%s does not start its own line (a ? complex key, or another key before it on the line), so render cannot edit it", strings.Join(path, ".")),
			Fix: fix}
	}
	return start, d.blockEnd(line, col, compact), col, nil
}

// blockStyle refuses a path through a collection written in flow style
// ({…} or […]): the document's top level and each node along path.
func (d *YAMLDoc) blockStyle(path []string) error {
	n := d.root
	for i := 0; n != nil; i++ {
		if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle != 0 {
			what := "the document"
			if i > 0 {
				what = strings.Join(path[:i], ".")
			}
			return &confpos.Error{Line: n.Line, Col: n.Column, What: what + " is written in flow style ({…} or […]); render edits only block style",
				Fix: "rewrite it as a block by hand, one key or - item a line"}
		}
		if i == len(path) {
			break
		}
		n = d.child(n, path[i])
	}
	return nil
}

// keyOf is the key node of value v in mapping m.
func (d *YAMLDoc) keyOf(m, v *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i+1] == v {
			return m.Content[i]
		}
	}
	return nil
}

// dash finds the "-" that opens sequence item n: back from the item's
// first byte over blanks and line breaks.
func (d *YAMLDoc) dash(n *yaml.Node) (line, col int, err error) {
	off := d.lineStart(n.Line) + n.Column - 1
	if n.Anchor != "" || n.Tag != "" && n.Tag != "!!map" {
		off = d.lineStart(n.Line) // "- &a" or "- !tag": the dash is on this line
		i := bytes.IndexByte(d.src[off:], '-')
		if i < 0 {
			return 0, 0, fmt.Errorf("line %d: cannot find the item's \"-\"", n.Line)
		}
		off += i + 1
	}
	for off > 0 {
		c := d.src[off-1]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			off--
			continue
		}
		break
	}
	if off == 0 || d.src[off-1] != '-' {
		return 0, 0, fmt.Errorf("line %d: the item is not a block sequence entry (\"- \"); edit it by hand", n.Line)
	}
	off--
	line = 1 + bytes.Count(d.src[:off], []byte("\n"))
	col = off - d.lineStart(line)
	return line, col, nil
}

// insert adds the entry under the deepest existing parent, creating the
// missing levels as block mappings.
func (d *YAMLDoc) insert(value []byte, path []string, parent *yaml.Node, depth int) error {
	rest := path[depth:]
	if parent == nil || depth == 0 { // at the end of the file, at the top level
		return d.insertTop(value, rest)
	}
	owner, _, _ := d.find(path[:depth-1])
	if owner == nil {
		owner = d.root
	}
	empty := parent.Kind == yaml.ScalarNode && parent.Tag == "!!null" ||
		(parent.Kind == yaml.MappingNode || parent.Kind == yaml.SequenceNode) && len(parent.Content) == 0
	if err := d.insertable(parent, path[:depth], rest, empty); err != nil {
		return err
	}
	check := path[:depth]
	if empty {
		check = path[:depth-1] // "key: []" becomes a block
	}
	if err := d.blockStyle(check); err != nil {
		return err
	}
	_, end, col, err := d.span(parent, owner, path[:depth])
	if err != nil {
		return err
	}
	if !empty {
		return d.insertAfter(value, rest, parent, end)
	}
	return d.insertIntoEmpty(value, path[:depth], rest, parent, owner, col)
}

// insertTop adds the entry at the end of the file, at the top level.
func (d *YAMLDoc) insertTop(value []byte, rest []string) error {
	if err := d.blockStyle(nil); err != nil {
		return err
	}
	ind := 0
	if d.root != nil && len(d.root.Content) > 0 {
		first := d.root.Content[0]
		ind = first.Column - 1
		ls := d.lineStart(first.Line)
		if pre := d.src[ls:min(ls+ind, len(d.src))]; len(bytes.Trim(pre, " ")) != 0 {
			return &confpos.Error{Line: first.Line, Col: first.Column, What: "the first top-level key does not start its own line (a ? complex key?), so render cannot tell the indentation to add its entry at",
				Fix: "write it as KEY: on a line of its own"}
		}
	}
	text, err := d.levels(value, rest, ind, d.newline())
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(d.src)) == 0 {
		return d.reparse(text)
	}
	return d.reparse(concat(d.ensureNL(), d.fit(text, len(d.src))))
}

// insertable says why rest cannot be added under parent (at parentPath),
// if it cannot.
func (d *YAMLDoc) insertable(parent *yaml.Node, parentPath, rest []string, empty bool) error {
	name, coll := strings.Join(parentPath, "."), d.collection(len(rest))
	if !empty && parent.Kind != yaml.MappingNode && !(parent.Kind == yaml.SequenceNode && d.listKey != "" && len(rest) == 1) {
		return &confpos.Error{Line: parent.Line, Col: parent.Column, What: fmt.Sprintf("%s is not a %s; render cannot add %s to it", name, coll, strings.Join(rest, ".")),
			Fix: fmt.Sprintf("make %s a %s, or remove it", name, coll)}
	}
	if !empty && parent.Kind == yaml.MappingNode && d.listKey != "" && len(rest) == 1 {
		return &confpos.Error{Line: parent.Line, Col: parent.Column, What: fmt.Sprintf("%s is a mapping, not the list of named items it should be; render cannot add %s to it", name, rest[0]),
			Fix: fmt.Sprintf("make %s a list of items, each starting \"- %s: \"", name, d.listKey)}
	}
	return nil
}

// insertAfter adds the entry after the last of parent's entries, which
// ends at end, indented like its first.
func (d *YAMLDoc) insertAfter(value []byte, rest []string, parent *yaml.Node, end int) error {
	first := parent.Content[0]
	ind := d.keyIndent(first)
	if parent.Kind == yaml.SequenceNode {
		var err error
		if _, ind, err = d.dash(first); err != nil {
			return err
		}
	}
	text, err := d.levels(value, rest, ind, d.newline())
	if err != nil {
		return err
	}
	return d.reparse(concat(d.src[:end], d.sepAt(end), d.fit(text, end), d.src[end:]))
}

// keyIndent is the indentation of the mapping entry whose key is k: its
// key's column, or that of the "?" before it, a complex key ("? dev",
// which Goose reads as "dev:"; attack98 F5).
func (d *YAMLDoc) keyIndent(k *yaml.Node) int {
	q := len(bytes.TrimRight(d.src[:d.lineStart(k.Line)+k.Column-1], " \t\r\n")) - 1
	ls := bytes.LastIndexByte(d.src[:max(q, 0)], '\n') + 1
	if q < 0 || d.src[q] != '?' || len(bytes.Trim(d.src[ls:q], " ")) != 0 { // not a "?" that starts its line (a comment's)
		return k.Column - 1
	}
	return q - ls
}

// insertIntoEmpty makes the entry the block value of an empty parent
// ("key:", "key: ~", "key: []" or "key: {}") whose key is at column col.
func (d *YAMLDoc) insertIntoEmpty(value []byte, parentPath, rest []string, parent, owner *yaml.Node, col int) error {
	text, err := d.levels(value, rest, col+2, d.newline())
	if err != nil {
		return err
	}
	keyLine := d.lineStart(d.keyOf(owner, parent).Line)
	eol := lineEnd(d.src, keyLine)
	text = d.fit(text, eol)
	if parent.Kind == yaml.ScalarNode && parent.Value == "" {
		return d.reparse(concat(d.src[:eol], d.sepAt(eol), text, d.src[eol:]))
	}
	if parent.Line != d.keyOf(owner, parent).Line {
		return fmt.Errorf("line %d: the empty value of %s is not on its key's line; edit it by hand", parent.Line, strings.Join(parentPath, "."))
	}
	vs := keyLine + parent.Column - 1
	ve := vs + d.valueLen(vs)
	head := bytes.TrimRight(d.src[:vs], " \t")
	return d.reparse(concat(head, d.src[ve:eol], d.sepAt(eol), text, d.src[eol:]))
}

// collection names what a path's parent must be.
func (d *YAMLDoc) collection(rest int) string {
	if d.listKey != "" && rest == 1 {
		return "list"
	}
	return "mapping"
}

// valueLen is the length of the empty value ("[]", "{ }", "~", "null")
// that starts at off.
func (d *YAMLDoc) valueLen(off int) int {
	rest := d.src[off:]
	switch {
	case len(rest) > 0 && (rest[0] == '[' || rest[0] == '{'):
		close := byte(']')
		if rest[0] == '{' {
			close = '}'
		}
		if i := bytes.IndexByte(rest, close); i >= 0 {
			return i + 1
		}
	case bytes.HasPrefix(rest, []byte("null")), bytes.HasPrefix(rest, []byte("Null")), bytes.HasPrefix(rest, []byte("NULL")):
		return 4
	case bytes.HasPrefix(rest, []byte("~")):
		return 1
	}
	return 0
}

// sepAt is a line break to put before text inserted at off when the line
// there has none (the file's last line).
func (d *YAMLDoc) sepAt(off int) []byte {
	if off > 0 && d.src[off-1] != '\n' && d.src[off-1] != '\r' {
		return []byte(d.newline())
	}
	return nil
}

// noFinalNL: off is the end of a document whose last line has no line
// break.
func (d *YAMLDoc) noFinalNL(off int) bool {
	return off == len(d.src) && off > 0 && d.src[off-1] != '\n' && d.src[off-1] != '\r'
}

// fit drops text's final line break when it goes at the end of a
// document whose last line has none, so the file keeps its ending (and
// Delete gives it back).
func (d *YAMLDoc) fit(text []byte, at int) []byte {
	if d.noFinalNL(at) {
		return bytes.TrimSuffix(bytes.TrimSuffix(text, []byte("\n")), []byte("\r"))
	}
	return text
}

// ensureNL is the document with a final line break.
func (d *YAMLDoc) ensureNL() []byte {
	if len(d.src) == 0 || d.src[len(d.src)-1] == '\n' || d.src[len(d.src)-1] == '\r' {
		return d.src
	}
	return concat(d.src, []byte(d.newline()))
}

// levels writes the missing mapping levels path[:len-1] and the entry at
// indentation ind: a named list item when the document has a list key,
// else a mapping member.
func (d *YAMLDoc) levels(value []byte, path []string, ind int, nl string) ([]byte, error) {
	var b bytes.Buffer
	for _, k := range path[:len(path)-1] {
		b.WriteString(strings.Repeat(" ", ind) + yamlKey(k) + ":" + nl)
		ind += 2
	}
	body, err := d.entryText(value, path[len(path)-1], d.listKey != "", ind)
	if err != nil {
		return nil, err
	}
	b.Write(body)
	return b.Bytes(), nil
}

// entryText writes one entry in block style at indentation ind: "key:"
// and its members, or, as a sequence item, "- " and the members.
func (d *YAMLDoc) entryText(value []byte, key string, item bool, ind int) ([]byte, error) {
	var b strings.Builder
	nl := d.newline()
	pad := strings.Repeat(" ", ind)
	if item {
		var obj orderedObject
		if err := json.Unmarshal(value, &obj); err != nil {
			return nil, fmt.Errorf("a list item needs a JSON object: %w", err)
		}
		if len(obj) == 0 {
			return []byte(pad + "- {}" + nl), nil
		}
		for i, m := range obj {
			lead := pad + "  "
			if i == 0 {
				lead = pad + "- "
			}
			if err := writeMember(&b, lead, ind+2, m.key, m.value, nl); err != nil {
				return nil, err
			}
		}
		return []byte(b.String()), nil
	}
	if err := writeMember(&b, pad, ind, key, value, nl); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// writeMember writes "key: value" (a scalar or a flow list of scalars on
// the line; an object or a list of objects as a block below it).
func writeMember(b *strings.Builder, lead string, ind int, key string, raw json.RawMessage, nl string) error {
	raw = bytes.TrimSpace(raw)
	b.WriteString(lead + yamlKey(key) + ":")
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var obj orderedObject
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		if len(obj) == 0 {
			b.WriteString(" {}" + nl)
			return nil
		}
		b.WriteString(nl)
		for _, m := range obj {
			if err := writeMember(b, strings.Repeat(" ", ind+2), ind+2, m.key, m.value, nl); err != nil {
				return err
			}
		}
		return nil
	case len(raw) > 0 && raw[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		parts := make([]string, 0, len(items))
		for _, it := range items {
			s, err := yamlScalar(it)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			parts = append(parts, s)
		}
		b.WriteString(" [" + strings.Join(parts, ", ") + "]" + nl)
		return nil
	}
	s, err := yamlScalar(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	b.WriteString(" " + s + nl)
	return nil
}

// yamlScalar writes a JSON scalar as YAML: a string plain when YAML reads
// it back as the same string, else double-quoted (a JSON string is a
// valid YAML double-quoted scalar); numbers, booleans and null as JSON
// writes them.
func yamlScalar(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty value")
	}
	switch raw[0] {
	case '{', '[':
		return "", errors.New("a nested object or list inside a list has no form here")
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		if plainSafe(s) {
			return s, nil
		}
		enc, _ := json.Marshal(s)
		return string(enc), nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	return string(raw), nil
}

// plainSafe: s reads back as the same string when written plain, in a
// block mapping and in a flow list alike (so no flow indicator at all).
func plainSafe(s string) bool {
	if s == "" || strings.TrimSpace(s) != s || strings.ContainsAny(s, ",[]{}#&*!|>'\"%@`\\\n\r\t") ||
		strings.ContainsAny(s[:1], "-?:") || strings.Contains(s, ": ") || strings.HasSuffix(s, ":") {
		return false
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return false
	}
	got, ok := v.(string)
	return ok && got == s
}

// yamlKey writes a mapping key plain when it is safe, else quoted.
func yamlKey(k string) string {
	if plainSafe(k) {
		return k
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// orderedObject is a JSON object's members in their order.
type orderedObject []member

type member struct {
	key   string
	value json.RawMessage
}

func (o *orderedObject) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not a JSON object: %.40q", b)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		*o = append(*o, member{k.(string), raw})
	}
	return nil
}
