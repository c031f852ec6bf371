package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/joakimp/devbox-config/confpos"
)

// Doc is a JSONC document (JSON with comments and trailing commas) that can
// be edited at a key path while every byte outside the edited value stays
// as it was: comments, blank lines, key order, trailing-comma style and line
// endings included.
//
// Each edit works on the hujson syntax tree, whose Pack is byte-for-byte
// the input except where the tree was changed, so an edit is a splice of
// the value's bytes. New values are indented like their neighbours.
type Doc struct {
	src []byte
	// v is src parsed; nil after an edit until the next read needs it.
	v *hujson.Value
	// lines holds the offset of each line's start in src; nil until
	// needed, dropped with v.
	lines []int
	// bom: the input began with a UTF-8 byte order mark, which src does
	// not hold and Bytes puts back.
	bom bool
	// addedNewline: the input ended in a // comment without a newline;
	// src has one added (the parser needs it) and Bytes takes it away.
	addedNewline bool
	// spans are the top-level values a skeleton left out of src (see
	// ParseDocFocused); nil when src is the whole document.
	spans [][]byte
	// loose says, for each of spans, that it holds a comment or a
	// trailing comma (not strict JSON).
	loose []bool
	// crlf: the whole document uses CRLF (src may no longer show it).
	crlf bool
}

// utf8BOM is the byte order mark some Windows editors write; opencode's
// parser skips it, so render keeps it and edits after it.
var utf8BOM = []byte("\xef\xbb\xbf")

// ErrNotObject is returned when a path runs through a value that is not an
// object.
var ErrNotObject = errors.New("not an object")

// ParseDoc parses JSONC. An empty or all-whitespace input is an empty
// object. Parse errors carry the line and column.
//
// A leading UTF-8 byte order mark and a last line that is a // comment
// without a final newline are accepted (opencode accepts both) and kept.
func ParseDoc(src []byte) (*Doc, error) {
	d := &Doc{}
	if rest, ok := bytes.CutPrefix(src, utf8BOM); ok {
		d.bom, src = true, rest
	}
	if len(bytes.TrimSpace(src)) == 0 {
		src = []byte("{}\n")
	}
	src = bytes.Clone(src)
	v, err := hujson.Parse(src)
	if err != nil && endsInLineComment(src) {
		if v2, err2 := hujson.Parse(append(src, '\n')); err2 == nil {
			v, err, src, d.addedNewline = v2, nil, append(src, '\n'), true
		}
	}
	if err != nil {
		return nil, err
	}
	if _, ok := v.Value.(*hujson.Object); !ok {
		line, col := position(src, v.StartOffset)
		return nil, &confpos.Error{Line: line, Col: col, What: fmt.Sprintf("the top-level value is %s, not an object", confpos.KindOf(v.Value)),
			Fix: "make the file one object, {...}", Err: ErrNotObject}
	}
	d.src, d.v = src, &v
	return d, nil
}

// endsInLineComment reports whether the last line of src holds a //
// outside a string (a cheap check; the re-parse decides).
func endsInLineComment(src []byte) bool {
	last := src[bytes.LastIndexByte(src, '\n')+1:]
	return len(last) > 0 && bytes.Contains(last, []byte("//"))
}

// Clone returns an independent copy of the document: edits to one do not
// change the other.
func (d *Doc) Clone() *Doc {
	c := *d
	c.src = bytes.Clone(d.src)
	c.v, c.lines = nil, nil // spans are never changed, so they are shared
	return &c
}

// Bytes returns the document's current bytes.
func (d *Doc) Bytes() []byte {
	src := d.src
	if d.spans != nil {
		src = restore(src, d.spans)
	}
	if d.addedNewline {
		src = bytes.TrimSuffix(src, []byte("\n"))
	}
	if d.bom {
		return append(bytes.Clone(utf8BOM), src...)
	}
	if d.spans != nil {
		return src // restore made a new slice
	}
	return bytes.Clone(src)
}

// expandFor turns a skeleton into the whole document when path leads into
// a value the skeleton left out.
func (d *Doc) expandFor(path []string) {
	if d.spans == nil || len(path) == 0 {
		return
	}
	{
		obj := d.tree().Value.(*hujson.Object)
		j := memberIndex(obj, path[0])
		if j < 0 {
			return
		}
		lit, ok := obj.Members[j].Value.Value.(hujson.Literal)
		if !ok || placeholderIndex(lit) < 0 {
			// a duplicate of path[0] may still be a placeholder
			n := 0
			for _, m := range obj.Members {
				if memberName(m) == path[0] {
					n++
				}
			}
			if n < 2 {
				return
			}
		}
	}
	d.expand()
}

// expand turns a skeleton into the whole document.
func (d *Doc) expand() {
	if d.spans != nil {
		d.src = restore(d.src, d.spans)
		d.spans, d.loose, d.v, d.lines = nil, nil, nil, nil
	}
}

// Get returns the value at path as standard JSON (comments and trailing
// commas removed, whitespace as written), or nil if absent.
func (d *Doc) Get(path ...string) ([]byte, error) {
	if len(path) == 0 {
		d.expand() // the whole document, skipped values included
	}
	v, err := d.lookup(path)
	if err != nil || v == nil {
		return nil, err
	}
	c := v.Clone()
	c.BeforeExtra, c.AfterExtra = nil, nil
	c.Standardize()
	return bytes.TrimSpace(c.Pack()), nil
}

// Has reports whether path exists.
func (d *Doc) Has(path ...string) (bool, error) {
	v, err := d.lookup(path)
	return v != nil, err
}

// Set puts value (standard JSON) at path, creating missing parent objects.
// An existing value is replaced in place; a new key is inserted as the
// first member of its parent (after a leading "$schema" at the top level).
func (d *Doc) Set(value []byte, path ...string) (err error) {
	defer d.resetOnError(&err)
	if len(path) == 0 {
		return fmt.Errorf("empty path")
	}
	if !json.Valid(value) {
		return fmt.Errorf("value for %s is not valid JSON", strings.Join(path, "."))
	}
	// Create missing parents one edit at a time: each edit re-parses, so
	// offsets and indentation are always those of the current bytes.
	for i := 1; i < len(path); i++ {
		ok, err := d.Has(path[:i]...)
		if err != nil {
			return err
		}
		if !ok {
			return d.insert(path[:i-1], path[i-1], nestValue(path[i:], value), false)
		}
	}
	ok, err := d.Has(path...)
	if err != nil {
		return err
	}
	if !ok {
		return d.insert(path[:len(path)-1], path[len(path)-1], value, false)
	}
	return d.replace(path, value)
}

// Append adds a new key as the last member of its parent object, which
// must exist (pi's settings merge: keys missing from the live file are
// added after the user's, in the template's order). An existing value is
// replaced in place, as Set does.
func (d *Doc) Append(value []byte, path ...string) (err error) {
	defer d.resetOnError(&err)
	if len(path) == 0 {
		return fmt.Errorf("empty path")
	}
	if !json.Valid(value) {
		return fmt.Errorf("value for %s is not valid JSON", strings.Join(path, "."))
	}
	ok, err := d.Has(path...)
	if err != nil {
		return err
	}
	if ok {
		return d.replace(path, value)
	}
	return d.insert(path[:len(path)-1], path[len(path)-1], value, true)
}

// Delete removes the member at path. It reports whether anything was
// removed. The member's own leading comments go with it; a comment on the
// line before it that belongs to the previous member stays.
func (d *Doc) Delete(path ...string) (_ bool, err error) {
	defer d.resetOnError(&err)
	if len(path) == 0 {
		return false, fmt.Errorf("empty path")
	}
	parent, err := d.lookup(path[:len(path)-1])
	if err != nil || parent == nil {
		return false, err
	}
	obj, ok := parent.Value.(*hujson.Object)
	if !ok {
		return false, d.notObject(path[:len(path)-1], parent)
	}
	i := memberIndex(obj, path[len(path)-1])
	if i < 0 {
		return false, nil
	}
	removed := obj.Members[i]
	head, _ := splitHead(removed.Name.BeforeExtra)
	last := i == len(obj.Members)-1
	hadTrailingComma := last && removed.Value.AfterExtra != nil
	obj.Members = append(obj.Members[:i:i], obj.Members[i+1:]...)
	switch {
	case len(obj.Members) == 0:
		_, tail := splitHead(obj.AfterExtra)
		obj.AfterExtra = concat(head, tail)
	case last:
		// The comment on the removed member's line (after the trailing comma
		// or its value) belonged to it; keep the previous member's.
		_, tail := splitHead(obj.AfterExtra)
		obj.AfterExtra = concat(head, tail)
		prev := &obj.Members[len(obj.Members)-1].Value
		if hadTrailingComma {
			if prev.AfterExtra == nil {
				prev.AfterExtra = hujson.Extra{}
			}
		} else if prev.AfterExtra != nil {
			obj.AfterExtra = concat(prev.AfterExtra, obj.AfterExtra)
			prev.AfterExtra = nil
		}
	default:
		next := &obj.Members[i].Name
		_, tail := splitHead(next.BeforeExtra)
		next.BeforeExtra = concat(head, tail)
	}
	d.commit()
	return true, nil
}

// EmptyText is the text of the object at path ("{}", "{ }") if it has no
// members: what inserting into it changes besides the new member.
func (d *Doc) EmptyText(path ...string) (string, bool) {
	v, err := d.lookup(path)
	if err != nil || v == nil {
		return "", false
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok || len(obj.Members) > 0 {
		return "", false
	}
	return "{" + string(obj.AfterExtra) + "}", true
}

// RestoreEmpty gives the object at path the text EmptyText gave,
// when the object has no members and what is inside it differs from what
// was inside only in white space (an insert and a delete reflowed it). It
// reports whether it did.
func (d *Doc) RestoreEmpty(text string, path ...string) (_ bool, err error) {
	defer d.resetOnError(&err)
	inner, ok := strings.CutPrefix(text, "{")
	if inner, ok = strings.CutSuffix(inner, "}"); !ok {
		return false, nil
	}
	v, err := d.lookup(path)
	if err != nil || v == nil {
		return false, err
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok || len(obj.Members) > 0 || string(obj.AfterExtra) == inner || noSpace(obj.AfterExtra) != noSpace([]byte(inner)) {
		return false, nil
	}
	obj.AfterExtra = []byte(inner)
	d.commit()
	return true, nil
}

func noSpace(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, string(b))
}

// tree returns the parsed document. Edits change it in place and then
// commit, which packs it into src and updates its offsets, so offsets are
// always those of the current bytes.
func (d *Doc) tree() *hujson.Value {
	if d.v == nil {
		v, err := hujson.Parse(d.src)
		if err != nil { // d.src is only ever set to parseable bytes
			panic(fmt.Sprintf("merge: document stopped parsing: %v", err))
		}
		d.v = &v
	}
	return d.v
}

// lineStart returns the offset of the start of the line holding offset.
// The line index is built once per committed text, so a look-up is a
// binary search, not a scan back through a long line.
func (d *Doc) lineStart(offset int) int {
	if d.lines == nil {
		d.lines = append(d.lines, 0)
		for i, c := range d.src {
			if c == '\n' {
				d.lines = append(d.lines, i+1)
			}
		}
	}
	i := sort.SearchInts(d.lines, offset+1) - 1
	return d.lines[i]
}

// resetOnError drops a tree that a failed edit may have half changed; src
// still holds the last committed bytes.
func (d *Doc) resetOnError(err *error) {
	if *err != nil {
		d.v, d.lines = nil, nil
	}
}

// commit packs an edited tree into src.
//
// The tree is kept, its offsets updated to the new bytes, so the next
// read does not parse the document again (a full parse is the costliest
// step on a large file).
func (d *Doc) commit() {
	d.src = d.v.Pack()
	d.v.UpdateOffsets()
	normalizeExtras(d.v, false)
	d.lines = nil
}

// normalizeExtras makes the edited tree's Extras what a parse of its bytes
// gives: nil when empty, except after an object's or array's last value,
// where non-nil is what marks a trailing comma. (FuzzRoundTrip checks that
// the kept tree equals a fresh parse.)
func normalizeExtras(v *hujson.Value, last bool) {
	if len(v.BeforeExtra) == 0 {
		v.BeforeExtra = nil
	}
	if len(v.AfterExtra) == 0 && !last {
		v.AfterExtra = nil
	}
	switch x := v.Value.(type) {
	case *hujson.Object:
		for i := range x.Members {
			normalizeExtras(&x.Members[i].Name, false)
			normalizeExtras(&x.Members[i].Value, i == len(x.Members)-1)
		}
		if len(x.AfterExtra) == 0 {
			x.AfterExtra = nil
		}
	case *hujson.Array:
		for i := range x.Elements {
			normalizeExtras(&x.Elements[i], i == len(x.Elements)-1)
		}
		if len(x.AfterExtra) == 0 {
			x.AfterExtra = nil
		}
	}
}

func (d *Doc) replace(path []string, value []byte) error {
	parent, err := d.lookup(path[:len(path)-1])
	if err != nil {
		return err
	}
	obj := parent.Value.(*hujson.Object) // Has(path) succeeded
	m := &obj.Members[memberIndex(obj, path[len(path)-1])]
	// Keep the layout: a value on lines of its own stays expanded, one
	// inside a one-line object stays compact (as insert would write it).
	multiline := d.multiline(m.Value.StartOffset, m.Value.EndOffset) || d.startsLine(m.Name.StartOffset)
	indent := d.lineIndent(m.Name.StartOffset)
	// Indent like the value being replaced, so that writing the same
	// value again (a rung change and back) gives the same bytes even where
	// the document's indentation is uneven.
	unit := d.unit()
	if o, ok := m.Value.Value.(*hujson.Object); ok && len(o.Members) > 0 && d.startsLine(o.Members[0].Name.StartOffset) {
		if inner := d.lineIndent(o.Members[0].Name.StartOffset); strings.HasPrefix(inner, indent) && len(inner) > len(indent) {
			unit = inner[len(indent):]
		}
	}
	nv, err := d.formatValue(value, indent, unit, multiline)
	if err != nil {
		return err
	}
	m.Value.Value = nv
	d.commit()
	return nil
}

// insert adds key=value as a new member of the object at parentPath: as
// its first member, or after a leading "$schema" at the top level; with
// last, after its last member.
func (d *Doc) insert(parentPath []string, key string, value []byte, last bool) error {
	parent, err := d.lookup(parentPath)
	if err != nil {
		return err
	}
	obj, ok := parent.Value.(*hujson.Object)
	if !ok {
		return d.notObject(parentPath, parent)
	}
	at := 0
	switch {
	case last:
		at = len(obj.Members)
	case len(parentPath) == 0 && len(obj.Members) > 0 && memberName(obj.Members[0]) == "$schema":
		at = 1
	}
	m := hujson.ObjectMember{Name: hujson.Value{Value: hujson.String(key)}, Value: hujson.Value{BeforeExtra: []byte(" ")}}
	switch {
	case len(obj.Members) == 0:
		err = d.insertIntoEmpty(parent, obj, m, value)
	case at < len(obj.Members):
		err = d.insertBefore(obj, at, m, value)
	default: // after the last member (a leading "$schema" alone, or last)
		err = d.insertAfterLast(obj, m, value)
	}
	if err != nil {
		return err
	}
	d.commit()
	return nil
}

// insertIntoEmpty makes `{}` a block with m on a line of its own.
func (d *Doc) insertIntoEmpty(parent *hujson.Value, obj *hujson.Object, m hujson.ObjectMember, value []byte) (err error) {
	parentIndent := d.lineIndent(parent.StartOffset)
	memberIndent := parentIndent + d.unit()
	if m.Value.Value, err = d.formatValue(value, memberIndent, d.unit(), true); err != nil {
		return err
	}
	// What is on the brace's line (spaces, a comment, a block comment
	// spanning lines) stays there; the rest stays before the "}".
	nl := d.newline()
	head, tail := splitHead(obj.AfterExtra)
	m.Name.BeforeExtra = concat(head, []byte(nl+memberIndent))
	if isBlank(tail) && indentAfterNewline(tail) == nil {
		tail = []byte(nl + parentIndent)
	}
	obj.AfterExtra = tail
	obj.Members = []hujson.ObjectMember{m}
	return nil
}

// insertBefore puts m in front of the member at index at, laid out like it.
func (d *Doc) insertBefore(obj *hujson.Object, at int, m hujson.ObjectMember, value []byte) (err error) {
	next := &obj.Members[at].Name
	indent := indentAfterNewline(next.BeforeExtra)
	if indent == nil { // a one-line object: insert inline, compactly
		if m.Value.Value, err = d.formatValue(value, "", d.unit(), false); err != nil {
			return err
		}
		// The spaces before the next member are copied; a comment
		// there is the next member's and stays in front of it.
		m.Name.BeforeExtra = leadingSpace(next.BeforeExtra)
	} else {
		if m.Value.Value, err = d.formatValue(value, string(indent), d.unit(), true); err != nil {
			return err
		}
		// A comment on the line of the opening brace (or of the previous
		// comma) stays on that line, above the new member.
		head, tail := splitHead(next.BeforeExtra)
		m.Name.BeforeExtra = concat(head, []byte(d.newline()+string(indent)))
		next.BeforeExtra = tail
	}
	obj.Members = append(obj.Members[:at], append([]hujson.ObjectMember{m}, obj.Members[at:]...)...)
	return nil
}

// insertAfterLast puts m after the object's last member, laid out like it.
func (d *Doc) insertAfterLast(obj *hujson.Object, m hujson.ObjectMember, value []byte) (err error) {
	prev := &obj.Members[len(obj.Members)-1]
	indent := indentAfterNewline(prev.Name.BeforeExtra)
	if head, _ := splitHead(obj.AfterExtra); indent == nil && !isBlank(head) {
		// A comment after "$schema" on its line: the new member goes
		// on the next line, so the comment stays where it was.
		indent = []byte(d.lineIndent(prev.Name.StartOffset))
	}
	if m.Value.Value, err = d.formatValue(value, string(indent), d.unit(), indent != nil); err != nil {
		return err
	}
	if indent == nil {
		m.Name.BeforeExtra = []byte(" ")
	} else {
		head, tail := splitHead(obj.AfterExtra)
		m.Name.BeforeExtra = concat(head, []byte(d.newline()+string(indent)))
		obj.AfterExtra = tail
	}
	if prev.Value.AfterExtra != nil { // keep the trailing-comma style
		m.Value.AfterExtra = hujson.Extra{}
	}
	obj.Members = append(obj.Members, m)
	return nil
}

// formatValue renders standard JSON as a hujson value indented for a member
// whose line starts with indent, using the document's indent unit and line
// ending. Compact when multiline is false.
func (d *Doc) formatValue(value []byte, indent, unit string, multiline bool) (hujson.ValueTrimmed, error) {
	v, err := hujson.Parse(value)
	if err != nil {
		return nil, err
	}
	if !v.IsStandard() {
		return nil, fmt.Errorf("value is not standard JSON")
	}
	var out []byte
	if multiline {
		out = appendPretty(nil, v.Value, indent, unit, d.newline())
	} else {
		v.Minimize()
		out = v.Pack()
	}
	if v, err = hujson.Parse(out); err != nil {
		return nil, err
	}
	return v.Value, nil
}

// shortArray is the longest compact rendering of an array of scalars kept
// on one line, as people write ["mempalace-mcp"] or ["devbox-config", "edge"].
const shortArray = 60

// appendPretty renders a standard JSON value with objects expanded one
// member per line and short arrays of scalars kept on one line. Key order
// is kept.
func appendPretty(b []byte, v hujson.ValueTrimmed, indent, unit, nl string) []byte {
	switch x := v.(type) {
	case hujson.Literal:
		return append(b, x...)
	case *hujson.Object:
		if len(x.Members) == 0 {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		for i, m := range x.Members {
			b = append(b, nl+indent+unit...)
			b = append(b, m.Name.Value.(hujson.Literal)...)
			b = append(b, ": "...)
			b = appendPretty(b, m.Value.Value, indent+unit, unit, nl)
			if i < len(x.Members)-1 {
				b = append(b, ',')
			}
		}
		return append(b, nl+indent+"}"...)
	case *hujson.Array:
		if len(x.Elements) == 0 {
			return append(b, "[]"...)
		}
		if line, ok := inlineArray(x); ok {
			return append(b, line...)
		}
		b = append(b, '[')
		for i, e := range x.Elements {
			b = append(b, nl+indent+unit...)
			b = appendPretty(b, e.Value, indent+unit, unit, nl)
			if i < len(x.Elements)-1 {
				b = append(b, ',')
			}
		}
		return append(b, nl+indent+"]"...)
	}
	return b
}

func inlineArray(a *hujson.Array) ([]byte, bool) {
	out := []byte{'['}
	for i, e := range a.Elements {
		lit, ok := e.Value.(hujson.Literal)
		if !ok {
			return nil, false
		}
		if i > 0 {
			out = append(out, ", "...)
		}
		out = append(out, lit...)
	}
	out = append(out, ']')
	return out, len(out) <= shortArray
}

// newline is the document's line ending: CRLF if it has any, else LF.
func (d *Doc) newline() string {
	if d.crlf || bytes.Contains(d.src, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// unit is the document's indentation step: a tab, or the smallest number
// of spaces by which a member's line is indented past its object's line.
// Two spaces when the document shows none.
func (d *Doc) unit() string {
	best := 0
	for v := range d.tree().All() {
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			continue
		}
		outer := d.lineIndent(v.StartOffset)
		for _, m := range obj.Members {
			if !d.startsLine(m.Name.StartOffset) {
				continue
			}
			inner := d.lineIndent(m.Name.StartOffset)
			if !strings.HasPrefix(inner, outer) || len(inner) == len(outer) {
				continue
			}
			step := inner[len(outer):]
			if step[0] == '\t' {
				return "\t"
			}
			if n := len(step); best == 0 || n < best {
				best = n
			}
		}
	}
	if best == 0 {
		best = 2
	}
	return strings.Repeat(" ", best)
}

// lineIndent returns the leading whitespace of the line holding offset.
func (d *Doc) lineIndent(offset int) string {
	line := d.src[d.lineStart(offset):]
	return string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
}

func (d *Doc) multiline(start, end int) bool {
	return bytes.IndexByte(d.src[start:end], '\n') >= 0
}

// startsLine reports whether only indentation precedes offset on its line.
func (d *Doc) startsLine(offset int) bool {
	start := d.lineStart(offset)
	return start > 0 && isBlank(d.src[start:offset])
}

func (d *Doc) lookup(path []string) (*hujson.Value, error) {
	d.expandFor(path)
	v := d.tree()
	for i, key := range path {
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			return nil, d.notObject(path[:i], v)
		}
		j := memberIndex(obj, key)
		if j < 0 {
			return nil, nil
		}
		v = &obj.Members[j].Value
	}
	return v, nil
}

// memberIndex returns the index of the first member named key, or -1.
// (opencode's jsonc-parser keeps the last duplicate; duplicates are refused
// by the caller before editing, see Duplicates.)
func memberIndex(obj *hujson.Object, key string) int {
	for i, m := range obj.Members {
		if memberName(m) == key {
			return i
		}
	}
	return -1
}

// DuplicateError names a key that an object along an edited path holds
// twice, at the second occurrence.
type DuplicateError struct {
	Path         string // dotted path of the duplicated member
	Line, Column int
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("line %d, column %d: %q is named twice", e.Line, e.Column, e.Path)
}

// Duplicates returns a *DuplicateError for the first object along path
// that names the next key of path twice, or nil if there is none. An edit
// through a duplicated key would be ambiguous: the harness and
// devbox-config might read different members.
func (d *Doc) Duplicates(path ...string) *DuplicateError {
	d.expandFor(path)
	v := d.tree()
	for i := 0; i < len(path); i++ {
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			return nil
		}
		j := -1
		for n, m := range obj.Members {
			if memberName(m) != path[i] {
				continue
			}
			if j >= 0 {
				line, col := position(d.src, m.Name.StartOffset)
				return &DuplicateError{Path: pathName(path[:i+1]), Line: line, Column: col}
			}
			j = n
		}
		if j < 0 {
			return nil
		}
		v = &obj.Members[j].Value
	}
	return nil
}

// notObject is ErrNotObject for the value at path, placed (a
// *confpos.Error the caller names the file of), with what it is instead.
func (d *Doc) notObject(path []string, v *hujson.Value) error {
	line, col := position(d.src, v.StartOffset)
	return &confpos.Error{Line: line, Col: col, What: fmt.Sprintf("%s is %s, not an object", pathName(path), confpos.KindOf(v.Value)),
		Fix: fmt.Sprintf("make %s an object, {...}, or remove it", pathName(path)), Err: ErrNotObject}
}

// position returns the 1-based line and column (in bytes) of offset.
func position(src []byte, offset int) (line, col int) { return confpos.LineCol(src, offset) }

func memberName(m hujson.ObjectMember) string {
	return m.Name.Value.(hujson.Literal).String()
}

func pathName(path []string) string {
	if len(path) == 0 {
		return "top level"
	}
	return strings.Join(path, ".")
}

// nestValue wraps value in objects along path: ["a","b"], v -> {"a":{"b":v}}.
func nestValue(path []string, value []byte) []byte {
	out := value
	for i := len(path) - 1; i >= 0; i-- {
		k, _ := json.Marshal(path[i])
		out = []byte(fmt.Sprintf("{%s:%s}", k, out))
	}
	return out
}

// lineBreaks returns the offsets of the newlines in extra (whitespace and
// comments) that end a line of the document: not those inside a block
// comment, which are the comment's own.
func lineBreaks(extra []byte) []int {
	var out []int
	for i := 0; i < len(extra); {
		switch {
		case bytes.HasPrefix(extra[i:], []byte("//")):
			n := bytes.IndexByte(extra[i:], '\n')
			if n < 0 {
				return out
			}
			i += n // the newline ends the comment and the line
		case bytes.HasPrefix(extra[i:], []byte("/*")):
			n := bytes.Index(extra[i+2:], []byte("*/"))
			if n < 0 {
				return out
			}
			i += 2 + n + 2
		case extra[i] == '\n':
			out = append(out, i)
			i++
		default:
			i++
		}
	}
	return out
}

// splitHead splits extra at its first line break outside a comment: head
// is what stays on the current line (spaces, a line comment, a block
// comment even if it spans lines), tail starts with the newline. Without a
// line break, all of extra is tail.
func splitHead(extra hujson.Extra) (head, tail []byte) {
	breaks := lineBreaks(extra)
	if len(breaks) == 0 {
		return nil, extra
	}
	i := breaks[0]
	if i > 0 && extra[i-1] == '\r' {
		i--
	}
	return extra[:i], extra[i:]
}

// leadingSpace returns the spaces and tabs extra starts with.
func leadingSpace(extra hujson.Extra) []byte {
	return concat(extra[:len(extra)-len(bytes.TrimLeft(extra, " \t"))])
}

// indentAfterNewline returns the whitespace after the last line break in
// extra (outside comments), or nil if extra holds none.
func indentAfterNewline(extra hujson.Extra) []byte {
	breaks := lineBreaks(extra)
	if len(breaks) == 0 {
		return nil
	}
	rest := extra[breaks[len(breaks)-1]+1:]
	return append([]byte{}, rest[:len(rest)-len(bytes.TrimLeft(rest, " \t"))]...)
}

func isBlank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	if out == nil {
		out = []byte{}
	}
	return out
}
