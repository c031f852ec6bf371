package confpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailscale/hujson"
)

// JSON says how DecodeJSON reads a file.
type JSON struct {
	// JSONC allows comments and trailing commas (hujson); without it the
	// file is plain JSON.
	JSONC bool
	// NoTrailingCommas refuses a trailing comma in JSONC: what a reader
	// that strips comments and then calls JSON.parse takes.
	NoTrailingCommas bool
	// Strict makes a key v has no field for an error (encoding/json's
	// DisallowUnknownFields).
	Strict bool
}

// DecodeJSON decodes the one JSON value src holds into v. A file that does
// not parse, has a key v does not take (Strict), a value of the wrong type
// or anything after its value is an *Error at the mistake, with its fix.
// An error of an UnmarshalJSON of a value inside v is placed at that value
// (a time that is no time gets the fix for a time); one of v's own is
// returned as is, named by the file.
func (o JSON) DecodeJSON(file string, src []byte, v any) error {
	std := src
	if o.JSONC {
		var err error
		if std, err = hujson.Standardize(bytes.Clone(src)); err != nil { // offsets kept: comments become spaces
			return o.hujsonError(file, src, err)
		}
		if o.NoTrailingCommas {
			if err := noTrailingComma(file, src); err != nil {
				return err
			}
		}
	}
	if root, err := hujson.Parse(src); err == nil { // else the decoder places it
		if o.Strict {
			if err := asciiEscape(file, src, &root); err != nil {
				return err
			}
		}
		std = bytes.Clone(std)
		blankFolded(std, &root, reflect.TypeOf(v))
	}
	dec := json.NewDecoder(bytes.NewReader(std))
	if o.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return o.decodeError(file, src, err, reflect.TypeOf(v))
	}
	if o.Strict {
		if v, err := hujson.Parse(src); err == nil {
			if m, path := twice(&v, ""); m != nil {
				name := m.Name.Value.(hujson.Literal).String()
				return At(file, src, m.Name.StartOffset, fmt.Sprintf("%q is named twice in %s", name, orTop(path)),
					"keep one: only the last one counts, so a reader of the first is misled")
			}
		}
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(std[end:], " \t\r\n"); len(rest) > 0 {
		return At(file, src, len(std)-len(rest), "something follows the end of the file's one JSON value",
			"remove it, or move what it says into the value before it")
	}
	return nil
}

// asciiEscape refuses the first \u escape, in a key or a string value of
// v, of a printable ASCII character (attack75 F1): "\u0061dmin": true is
// an admin and ["\u002a"] every wing, to the decoder but not to a reader,
// a diff or grep. Kept: the escapes JSON needs (\n, \", \u0000 and the
// other control characters), non-ASCII ones (Python's json.dumps writes
// "ü" as \u00fc, and one stays visible as an escape) and < > &, which
// Go's encoder writes so (a gateway.jsonc saved by an operator command).
func asciiEscape(file string, src []byte, v *hujson.Value) error {
	for c := range v.All() {
		lit, ok := c.Value.(hujson.Literal)
		if !ok || lit.Kind() != '"' {
			continue
		}
		for i := 0; i < len(lit)-1; i++ {
			if lit[i] != '\\' {
				continue
			}
			i++ // the escaped character: \\u0061 is a backslash and u0061
			r, err := strconv.ParseUint(string(lit[i+1:min(i+5, len(lit))]), 16, 16)
			if lit[i] != 'u' || err != nil || r < 0x20 || r > 0x7e || strings.ContainsRune("<>&", rune(r)) {
				continue
			}
			fix := fmt.Sprintf("write the character itself, %+q: an escape of a plain character hides from a reader (and grep) what the file says", lit.String())
			if r == '"' || r == '\\' {
				fix = fmt.Sprintf("write it as %s, the escape JSON has for it", strconv.Quote(string(rune(r)))[1:3])
			}
			return At(file, src, c.StartOffset+i-1, fmt.Sprintf("%+q is written with %s for %q", lit.String(), lit[i-1:i+5], string(rune(r))), fix)
		}
	}
	return nil
}

// hujsonError places hujson's "hujson: line L, column C: what", the
// literal it quotes Repeated (a header's value the file holds).
func (o JSON) hujsonError(file string, src []byte, err error) error {
	msg := err.Error()
	if i := strings.Index(msg, invalidLiteral); i >= 0 {
		msg = msg[:i+len(invalidLiteral)] + Repeated(msg[i+len(invalidLiteral):])
	}
	rest, ok := strings.CutPrefix(msg, "hujson: line ")
	l, rest, ok1 := strings.Cut(rest, ", column ")
	c, what, ok2 := strings.Cut(rest, ": ")
	line, err1 := strconv.Atoi(l)
	col, err2 := strconv.Atoi(c)
	if !ok || !ok1 || !ok2 || err1 != nil || err2 != nil {
		return &Error{File: file, What: msg, Fix: o.syntaxFix(file, src, -1, msg)}
	}
	off := Offset(src, line, col) // hujson counts the column in bytes
	line, col = LineCol(src, off)
	return &Error{File: file, Line: line, Col: col, What: what, Fix: o.syntaxFix(file, src, off, what)}
}

// invalidLiteral is what hujson says before the text it could not read.
const invalidLiteral = "invalid literal: "

// Offset is the byte offset of 1-based line and col (in bytes, as parsers
// such as hujson and go-toml count it) in src; one past the end is the end.
// LineCol of it is the position in characters.
func Offset(src []byte, line, col int) int {
	off := 0
	for ; line > 1; line-- {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return len(src)
		}
		off += i + 1
	}
	return min(off+col-1, len(src))
}

func (o JSON) decodeError(file string, src []byte, err error, t reflect.Type) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return At(file, src, len(src), "the file holds no JSON value", "write the object it should hold, {...}, or remove the file if an absent one will do")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return At(file, src, len(src), "the file ends before its JSON does", "close every {, [ and \" left open, or restore the file's end")
	case errors.As(err, &se):
		off := min(max(int(se.Offset)-1, 0), len(src)) // Offset counts the offending byte
		if !o.JSONC {
			if c := trailingComma(src, off); c >= 0 {
				return At(file, src, c, "a comma before "+strconv.Quote(string(src[off])),
					fmt.Sprintf("remove the comma: %s is plain JSON, which has no trailing commas", filepath.Base(file)))
			}
		}
		return At(file, src, off, se.Error(), o.syntaxFix(file, src, off, se.Error()))
	case errors.As(err, &te):
		if e := wrongType(file, src, t, te); e != nil {
			return e
		}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if e := unknownKey(file, src, t); e != nil {
			return e
		}
	default: // an UnmarshalJSON's own error, which says nothing of where
		if e := refusedValue(file, src, t); e != nil {
			return e
		}
	}
	return fmt.Errorf("%s: %w", file, err)
}

// wrongType places a value that does not decode into its field's type
// (te) in src, decoded into t, and says what to make it; nil when src
// does not parse or the value is not found.
func wrongType(file string, src []byte, t reflect.Type, te *json.UnmarshalTypeError) *Error {
	root, err := hujson.Parse(src)
	if err != nil {
		return nil
	}
	v, path := enclosing(&root, t, int(te.Offset)-1, "")
	if v == nil {
		return nil
	}
	if what, fix, ok := badNumber(v.Value, te.Type); ok {
		return At(file, src, v.StartOffset, orTop(path)+": "+what, fix)
	}
	return At(file, src, v.StartOffset, fmt.Sprintf("%s is %s", orTop(path), kindOfValue(v.Value)), "make it "+kindOfType(te.Type))
}

// unknownKey places the first key in src that t does not take, with the
// keys it does (the nearest first); nil when src does not parse or none
// is found.
func unknownKey(file string, src []byte, t reflect.Type) *Error {
	root, err := hujson.Parse(src)
	if err != nil {
		return nil
	}
	m, path, known := firstUnknown(&root, t, "")
	if m == nil {
		return nil
	}
	name := m.Name.Value.(hujson.Literal).String()
	where := "in " + path
	if path == "" {
		where = "at the top level"
	}
	fix := "remove it, or rename it to one of the keys allowed here: " + strings.Join(known, ", ")
	if s := Nearest(name, known); s != "" {
		fix = fmt.Sprintf("did you mean %q? Rename it or remove it; the keys allowed here: %s", s, strings.Join(known, ", "))
		if strings.EqualFold(s, name) {
			fix = fmt.Sprintf("did you mean %q? A key is read exactly, case included: rename it or remove it", s)
		}
	}
	return At(file, src, m.Name.StartOffset, fmt.Sprintf("unknown key %+q %s", name, where), fix) // %+q: a Kelvin sign shows as \u212a, not as K
}

// refusedValue places the first value in src whose own UnmarshalJSON
// refuses it; nil when src does not parse or none is found below the top.
func refusedValue(file string, src []byte, t reflect.Type) *Error {
	root, err := hujson.Parse(src)
	if err != nil {
		return nil
	}
	v, path, vt, uerr := firstRefused(&root, t, "")
	if v == nil || path == "" {
		return nil
	}
	e := At(file, src, v.StartOffset, path+": "+uerr.Error(), "")
	if vt == reflect.TypeFor[time.Time]() {
		e = At(file, src, v.StartOffset, fmt.Sprintf("%s is %s, not a time", path, kindOfValue(v.Value)),
			`write it in RFC 3339 form, in double quotes, e.g. "2006-01-02T15:04:05Z" (an offset such as +02:00 in place of the Z)`)
	}
	e.Err = uerr
	return e
}

// badNumber says what is wrong with a number (v) that does not decode into
// the number type t, and the fix; ok false for any other mistake.
func badNumber(v hujson.ValueTrimmed, t reflect.Type) (what, fix string, ok bool) {
	l, isLit := v.(hujson.Literal)
	if !isLit || l.Kind() != '0' {
		return "", "", false
	}
	text := string(l)
	var lo, hi string
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return text + " is out of range (larger than any number it can hold)", "make it a smaller number", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo, hi = strconv.FormatInt(math.MinInt64>>(64-t.Bits()), 10), strconv.FormatInt(math.MaxInt64>>(64-t.Bits()), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		lo, hi = "0", strconv.FormatUint(math.MaxUint64>>(64-t.Bits()), 10)
	default:
		return "", "", false
	}
	f, err := strconv.ParseFloat(text, 64)
	switch {
	case err == nil && f != math.Trunc(f):
		return text + " is not a whole number", fmt.Sprintf("make it a whole number, %.0f or %.0f", math.Floor(f), math.Ceil(f)), true
	case err == nil && strings.ContainsAny(text, ".eE") && math.Abs(f) < 1<<53:
		return text + " is not written as a whole number", fmt.Sprintf("write it as %.0f, digits alone", f), true
	case strings.HasPrefix(text, "-"):
		return text + " is out of range", "make it a whole number, at least " + lo, true
	}
	return text + " is out of range", "make it a whole number, at most " + hi, true
}

// noTrailingComma places the first trailing comma in src, which parses as
// JSONC: a comma after an object's or array's last value.
func noTrailingComma(file string, src []byte) error {
	root, err := hujson.Parse(src)
	if err != nil {
		return nil // DecodeJSON has placed it
	}
	for v := range root.All() {
		var last *hujson.Value
		switch c := v.Value.(type) {
		case *hujson.Object:
			if n := len(c.Members); n > 0 {
				last = &c.Members[n-1].Value
			}
		case *hujson.Array:
			if n := len(c.Elements); n > 0 {
				last = &c.Elements[n-1]
			}
		}
		if last != nil && last.AfterExtra != nil { // hujson's mark of a trailing comma
			return At(file, src, last.EndOffset+len(last.AfterExtra), "a comma before "+strconv.Quote(string(src[v.EndOffset-1])),
				fmt.Sprintf("remove the comma: %s may hold comments but no trailing commas", filepath.Base(file)))
		}
	}
	return nil
}

// trailingComma is the offset of the comma before the } or ] at off, with
// only white space between; -1 if there is none.
func trailingComma(src []byte, off int) int {
	if off >= len(src) || (src[off] != '}' && src[off] != ']') {
		return -1
	}
	before := bytes.TrimRight(src[:off], " \t\r\n")
	if len(before) == 0 || before[len(before)-1] != ',' {
		return -1
	}
	return len(before) - 1
}

// syntaxFix is the fix for a syntax error what at off (-1: not known).
func (o JSON) syntaxFix(file string, src []byte, off int, what string) string {
	switch {
	case !o.JSONC && off >= 0 && off < len(src) && src[off] == '/':
		return fmt.Sprintf("remove the comment: %s is plain JSON, which has no comments", filepath.Base(file))
	case strings.Contains(what, "unexpected EOF"):
		return "close every {, [ and \" left open, or restore the file's end"
	case strings.Contains(what, "after object key:value pair"), strings.Contains(what, "after object value"),
		strings.Contains(what, "after array element"), strings.Contains(what, "after array value"):
		return "add the missing comma before it, or the } or ] that should close what comes before"
	case strings.Contains(what, "after object key"), strings.Contains(what, "after object name"):
		return "put a : between the key and its value"
	case strings.Contains(what, "beginning of object key"), strings.Contains(what, "at start of object name"):
		return "put the key in double quotes, \"key\": value, or remove the stray character"
	case strings.Contains(what, "exceeded max depth"): // encoding/json's limit
		return "nest it less deeply: at most 10,000 levels of { and [ are read"
	}
	return "correct the JSON here: a missing or extra comma, quote, colon or bracket is the usual cause"
}

// enclosing is the innermost value of v (which decodes into t) that
// holds the byte at off, and its path.
func enclosing(v *hujson.Value, t reflect.Type, off int, path string) (*hujson.Value, string) {
	if off < v.StartOffset || off >= v.EndOffset {
		return nil, ""
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.Value.(type) {
	case *hujson.Object:
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		for i := range x.Members {
			m := &x.Members[i]
			name := m.Name.Value.(hujson.Literal).String()
			var ft reflect.Type
			if t != nil && t.Kind() == reflect.Map {
				ft = t.Elem()
			} else {
				ft = field(fields, name)
			}
			if in, p := enclosing(&m.Value, ft, off, step(path, name, fields != nil)); in != nil {
				return in, p
			}
		}
	case *hujson.Array:
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := range x.Elements {
			if in, p := enclosing(&x.Elements[i], et, off, fmt.Sprintf("%s[%d]", path, i)); in != nil {
				return in, p
			}
		}
	}
	return v, path
}

// step is the path to key in the object at path: .key for a struct's
// field, ["key"] for a map's key.
func step(path, key string, isStruct bool) string {
	switch {
	case !isStruct:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// field is the type of the struct field key decodes into, matched
// exactly, as a reader of the file does; nil if none (blankFolded keeps
// encoding/json from taking "Admin" for "admin").
func field(fields map[string]reflect.Type, key string) reflect.Type {
	return fields[key]
}

// blankFolded overwrites in std (src standardized: its offsets) the name
// of each key in v that is not exactly one of its struct's keys, with as
// many ~, so that encoding/json, which matches a key ignoring case, takes
// it for no field: "Admin", "READ" or a second "Devices" would otherwise
// set admin, read or devices past the key a reviewer reads (attack73 F1).
// Blanked, it is an unknown key: refused when Strict (unknownKey names it
// as written), ignored otherwise, as MemPalace's Python ignores it in its
// config.json.
func blankFolded(std []byte, v *hujson.Value, t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return // any reads keys as written; an Unmarshaler reads its own
	}
	eachChild(v, t, "", func(c *hujson.Value, ct reflect.Type, _ string, m *hujson.ObjectMember) bool {
		if ct != nil {
			blankFolded(std, c, ct)
		} else if m != nil {
			for i := m.Name.StartOffset + 1; i < m.Name.EndOffset-1; i++ {
				std[i] = '~'
			}
		}
		return false
	})
}

func orTop(path string) string {
	if path == "" {
		return "the top-level value"
	}
	return path
}

// firstUnknown is the first member, in the file's order, whose key the
// type it decodes into has no field for, with its object's path and the
// keys that object takes.
func firstUnknown(v *hujson.Value, t reflect.Type, path string) (m *hujson.ObjectMember, at string, known []string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil, "", nil // it reads its own keys
	}
	eachChild(v, t, path, func(c *hujson.Value, ct reflect.Type, cpath string, cm *hujson.ObjectMember) bool {
		if ct == nil {
			m, at, known = cm, path, slices.Sorted(maps.Keys(jsonFields(t)))
		} else {
			m, at, known = firstUnknown(c, ct, cpath)
		}
		return m != nil
	})
	return m, at, known
}

// eachChild calls visit with each member or element of v as t decodes it
// (an object into a struct or a map, an array into a slice or an array),
// in the file's order, until visit returns true: its value, its type
// (nil: a key the struct has no field for), its path and, for a member,
// the member.
func eachChild(v *hujson.Value, t reflect.Type, path string, visit func(c *hujson.Value, ct reflect.Type, cpath string, m *hujson.ObjectMember) bool) {
	switch x := v.Value.(type) {
	case *hujson.Object:
		if t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
			return
		}
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		for i := range x.Members {
			m := &x.Members[i]
			name := m.Name.Value.(hujson.Literal).String()
			var ft reflect.Type
			if fields == nil {
				ft = t.Elem()
			} else {
				ft = field(fields, name)
			}
			if visit(&m.Value, ft, step(path, name, fields != nil), m) {
				return
			}
		}
	case *hujson.Array:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i := range x.Elements {
				if visit(&x.Elements[i], t.Elem(), fmt.Sprintf("%s[%d]", path, i), nil) {
					return
				}
			}
		}
	}
}

// jsonFields are the keys a struct takes and the type of each: an
// embedded struct's (or struct pointer's) keys too, unless its tag names
// it, as encoding/json takes them, a key of the struct's own winning
// over an embedded one's. (Two embedded structs with one key at the same
// depth, which encoding/json then ignores, are not told apart.)
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out, promoted := map[string]reflect.Type{}, map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if et := f.Type; f.Anonymous && name == "" && tag != "-" {
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				maps.Copy(promoted, jsonFields(et))
				continue
			}
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	for k, ft := range promoted {
		if _, own := out[k]; !own {
			out[k] = ft
		}
	}
	return out
}

// KindOf names a JSON value's kind for messages ("an object", "a string").
func KindOf(v hujson.ValueTrimmed) string {
	switch x := v.(type) {
	case *hujson.Object:
		return "an object"
	case *hujson.Array:
		return "an array"
	case hujson.Literal:
		switch x.Kind() {
		case 'n':
			return "null"
		case 't', 'f':
			return "a boolean"
		case '"':
			return "a string"
		case '0':
			return "a number"
		}
	}
	return "a value"
}

// kindOfValue is KindOf with a scalar's own text: "a number (7)".
func kindOfValue(v hujson.ValueTrimmed) string {
	if l, ok := v.(hujson.Literal); ok && l.Kind() != 'n' && l.IsValid() {
		return KindOf(v) + " (" + string(l) + ")"
	}
	return KindOf(v)
}

// kindOfType names the JSON a Go type decodes from.
func kindOfType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string, in double quotes"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, without quotes"
	case reflect.Float32, reflect.Float64:
		return "a number, without quotes"
	case reflect.Slice, reflect.Array:
		return "an array, [...]"
	case reflect.Map, reflect.Struct:
		return "an object, {...}"
	}
	return "a value of the right kind"
}

// firstRefused is the first value, in the file's order, that decodes into
// a type with its own UnmarshalJSON (a time) and that UnmarshalJSON
// refuses: the value, its path, the type and the error.
func firstRefused(v *hujson.Value, t reflect.Type, path string) (in *hujson.Value, at string, it reflect.Type, err error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil, "", nil, nil
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		c := v.Clone()
		c.Standardize()
		if err := json.Unmarshal(c.Pack(), reflect.New(t).Interface()); err != nil {
			return v, path, t, err
		}
		return nil, "", nil, nil
	}
	eachChild(v, t, path, func(c *hujson.Value, ct reflect.Type, cpath string, _ *hujson.ObjectMember) bool {
		in, at, it, err = firstRefused(c, ct, cpath)
		return in != nil
	})
	return in, at, it, err
}

// twice is the first member, in the file's order, whose key its object
// already has, with that object's path.
func twice(v *hujson.Value, path string) (*hujson.ObjectMember, string) {
	switch x := v.Value.(type) {
	case *hujson.Object:
		seen := map[string]bool{}
		for i := range x.Members {
			m := &x.Members[i]
			name := m.Name.Value.(hujson.Literal).String()
			if seen[name] {
				return m, path
			}
			seen[name] = true
			if d, p := twice(&m.Value, step(path, name, true)); d != nil {
				return d, p
			}
		}
	case *hujson.Array:
		for i := range x.Elements {
			if d, p := twice(&x.Elements[i], fmt.Sprintf("%s[%d]", path, i)); d != nil {
				return d, p
			}
		}
	}
	return nil, ""
}
