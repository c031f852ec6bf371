package merge

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/tailscale/hujson"
)

// A large document is parsed as a skeleton: the values of top-level
// members that no edit will touch are replaced by short placeholders
// before hujson builds its tree, and put back, byte for byte, when the
// document's bytes are asked for. hujson's tree costs far more per byte
// than a scan, so a 50 MB config with the entry beside a huge "agent"
// section is edited in time linear in its size with a small constant.
// Any look-up that does reach a placeholder first expands the document
// (a full parse), so every method stays correct for every path.

// skeletonMin is the size from which ParseDocFocused builds a skeleton;
// smaller documents are parsed whole, exactly as ParseDoc does.
const skeletonMin = 256 << 10

// placeholderMin is the smallest value worth replacing.
const placeholderMin = 64

// placeholderMark starts every placeholder: a JSON string no sane config
// holds (a document holding it is parsed whole).
var placeholderMark = []byte(`"\u0001devbox-config-skipped:`)

// ParseDocFocused is ParseDoc for a document that will be read and edited
// only under the given top-level keys (render: "mcp" and "$schema"). A
// large document's other top-level values are only checked for syntax,
// not built into the tree; a look-up outside keys still works, at the
// cost of a full parse.
func ParseDocFocused(src []byte, keys ...string) (*Doc, error) {
	return parseFocused(src, skeletonMin, keys)
}

// parseFocused is ParseDocFocused with the size threshold as a parameter
// (tests use 0 to check every document both ways).
func parseFocused(src []byte, threshold int, keys []string) (*Doc, error) {
	body, _ := bytes.CutPrefix(src, utf8BOM)
	if len(body) < threshold || bytes.Contains(body, placeholderMark[1:]) {
		return ParseDoc(src)
	}
	reduced, spans, loose, ok := skeleton(body, keys)
	if !ok {
		return ParseDoc(src) // a syntax error: the full parse names it
	}
	withBOM := reduced
	if len(body) != len(src) {
		withBOM = append(bytes.Clone(utf8BOM), reduced...)
	}
	d, err := ParseDoc(withBOM)
	if err != nil {
		return ParseDoc(src)
	}
	d.spans, d.loose = spans, loose
	d.crlf = bytes.Contains(body, []byte("\r\n"))
	return d, nil
}

// skeleton returns src with the values of top-level members not named in
// keys (and longer than placeholderMin) replaced by placeholders, the
// replaced bytes in order, and for each whether it holds a comment or a
// trailing comma. ok is false if src is not valid JSONC.
func skeleton(src []byte, keys []string) (out []byte, spans [][]byte, loose []bool, ok bool) {
	keep := map[string]bool{}
	for _, k := range keys {
		keep[k] = true
	}
	s := scanner{src: src}
	s.space()
	if !s.eat('{') {
		return nil, nil, nil, false
	}
	last := 0
	for {
		s.space()
		if s.eat('}') {
			break
		}
		keyStart := s.i
		if !s.str() {
			return nil, nil, nil, false
		}
		key, err := strconv.Unquote(string(src[keyStart:s.i]))
		s.space()
		if !s.eat(':') {
			return nil, nil, nil, false
		}
		s.space()
		start := s.i
		s.loose = false
		if !s.value() {
			return nil, nil, nil, false
		}
		if (err != nil || !keep[key]) && s.i-start >= placeholderMin {
			out = append(out, src[last:start]...)
			out = append(out, placeholderMark...)
			out = strconv.AppendInt(out, int64(len(spans)), 10)
			out = append(out, '"')
			spans = append(spans, src[start:s.i])
			loose = append(loose, s.loose)
			last = s.i
		}
		s.space()
		if s.eat(',') {
			continue
		}
		s.space()
		if !s.eat('}') {
			return nil, nil, nil, false
		}
		break
	}
	s.space()
	if s.i != len(src) {
		return nil, nil, nil, false
	}
	return append(out, src[last:]...), spans, loose, true
}

// Skipped returns the value of the top-level member key as written, when
// the skeleton left it out of the tree and it is strict JSON (no comments,
// no trailing commas), without expanding the document; ok is false
// otherwise (Get reads it, expanding the document if need be).
func (d *Doc) Skipped(key string) (_ []byte, ok bool) {
	if d.spans == nil {
		return nil, false
	}
	n := -1
	for _, m := range d.tree().Value.(*hujson.Object).Members {
		if memberName(m) != key {
			continue
		}
		lit, _ := m.Value.Value.(hujson.Literal)
		if n >= 0 || lit == nil {
			return nil, false // twice, or in the tree
		}
		n = placeholderIndex(lit)
		if n < 0 {
			return nil, false
		}
	}
	if n < 0 || d.loose[n] {
		return nil, false
	}
	return d.spans[n], true
}

// placeholderIndex returns the span index a placeholder literal stands
// for, or -1.
func placeholderIndex(lit []byte) int {
	rest, ok := bytes.CutPrefix(lit, placeholderMark)
	if !ok || len(rest) < 2 || rest[len(rest)-1] != '"' {
		return -1
	}
	n, err := strconv.Atoi(string(rest[:len(rest)-1]))
	if err != nil {
		return -1
	}
	return n
}

// restore puts the skipped values back into reduced bytes.
func restore(reduced []byte, spans [][]byte) []byte {
	if spans == nil {
		return reduced
	}
	out := make([]byte, 0, len(reduced)+totalLen(spans))
	for {
		i := bytes.Index(reduced, placeholderMark)
		if i < 0 {
			return append(out, reduced...)
		}
		end := i + len(placeholderMark) + bytes.IndexByte(reduced[i+len(placeholderMark):], '"') + 1
		n := placeholderIndex(reduced[i:end])
		if n < 0 || n >= len(spans) {
			panic(fmt.Sprintf("merge: damaged placeholder %q", reduced[i:end]))
		}
		out = append(out, reduced[:i]...)
		out = append(out, spans[n]...)
		reduced = reduced[end:]
	}
}

func totalLen(spans [][]byte) int {
	n := 0
	for _, s := range spans {
		n += len(s)
	}
	return n
}

// scanner checks JSONC (JSON with // and /* */ comments and trailing
// commas, as hujson accepts it) without building anything. It is
// iterative, so nesting depth costs no stack.
// StrictJSON reports whether src is one JSON value as JSON.parse reads
// it: no comments, no trailing commas, nested as deep as it likes (the
// scanner keeps its own stack; encoding/json stops at 10,000 levels,
// which JSON.parse does not).
func StrictJSON(src []byte) bool {
	s, ok := scan(src)
	return ok && !s.loose
}

// CommentedJSON reports whether src is one JSON value as JSON.parse reads
// it once its comments are stripped (strip-json-comments: Gemini CLI, Qwen
// Code): comments, no trailing commas, nested as deep as it likes.
func CommentedJSON(src []byte) bool {
	s, ok := scan(src)
	return ok && !s.trailingComma
}

// scan scans src as one JSONC value with only space and comments around it.
func scan(src []byte) (scanner, bool) {
	s := scanner{src: src}
	s.space()
	ok := s.value()
	s.space()
	return s, ok && s.i == len(src)
}

type scanner struct {
	src []byte
	i   int
	// loose: a comment or a trailing comma was skipped (not strict JSON);
	// trailingComma: a trailing comma was.
	loose, trailingComma bool
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.src) && s.src[s.i] == c {
		s.i++
		return true
	}
	return false
}

// space skips whitespace and comments.
func (s *scanner) space() bool {
	if s.i < len(s.src) && s.src[s.i] > ' ' && s.src[s.i] != '/' {
		return true // the common case in a minified file: nothing to skip
	}
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.i++
		case c == '/' && s.i+1 < len(s.src) && s.src[s.i+1] == '/':
			s.loose = true
			n := bytes.IndexByte(s.src[s.i:], '\n')
			if n < 0 {
				s.i = len(s.src)
				return true
			}
			s.i += n + 1
		case c == '/' && s.i+1 < len(s.src) && s.src[s.i+1] == '*':
			s.loose = true
			n := bytes.Index(s.src[s.i+2:], []byte("*/"))
			if n < 0 {
				return false
			}
			s.i += 2 + n + 2
		default:
			return true
		}
	}
	return true
}

// str scans a JSON string.
func (s *scanner) str() bool {
	if !s.eat('"') {
		return false
	}
	start, high := s.i, false
	for s.i < len(s.src) {
		c := s.src[s.i]
		if c >= 0x20 && c < 0x80 && c != '"' && c != '\\' {
			s.i++
			continue
		}
		switch {
		case c >= 0x80:
			high = true
			s.i++
		case c == '"':
			ok := !high || utf8.Valid(s.src[start:s.i])
			s.i++
			return ok
		case c == '\\':
			if s.i+1 >= len(s.src) {
				return false
			}
			switch s.src[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.src) {
					return false
				}
				for _, h := range s.src[s.i+2 : s.i+6] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans a JSON number.
func (s *scanner) number() bool {
	s.eat('-')
	digits := func() int {
		n := 0
		for s.i < len(s.src) && '0' <= s.src[s.i] && s.src[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.eat('0') {
		// no leading zeros
	} else if digits() == 0 {
		return false
	}
	if s.eat('.') && digits() == 0 {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// value scans one JSONC value: objects and arrays with an explicit stack.
func (s *scanner) value() bool {
	var stack []byte // '{' or '['
	for {
		// one value
		if s.i >= len(s.src) {
			return false
		}
		if c := s.src[s.i]; c == '{' || c == '[' {
			s.i++
			stack = append(stack, c)
			s.space()
			if (c == '{' && s.eat('}')) || (c == '[' && s.eat(']')) {
				stack = stack[:len(stack)-1]
			} else if c == '{' && !s.memberName() {
				return false
			} else {
				continue
			}
		} else if !s.scalar(c) {
			return false
		}
		var done, ok bool
		if stack, done, ok = s.afterValue(stack); done || !ok {
			return ok
		}
		if !s.space() {
			return false
		}
	}
}

// scalar scans a string, true, false, null or a number starting with c.
func (s *scanner) scalar(c byte) bool {
	switch c {
	case '"':
		return s.str()
	case 't':
		return s.word("true")
	case 'f':
		return s.word("false")
	case 'n':
		return s.word("null")
	}
	return s.number()
}

// afterValue scans what follows a value: the closers of the containers it
// ends, then the comma (and member name) before the next element. done when
// the outermost value is complete.
func (s *scanner) afterValue(stack []byte) (_ []byte, done, ok bool) {
	for len(stack) > 0 {
		if !s.space() {
			return stack, false, false
		}
		top := stack[len(stack)-1]
		closer := byte('}')
		if top == '[' {
			closer = ']'
		}
		if s.eat(closer) {
			stack = stack[:len(stack)-1]
			continue
		}
		if !s.eat(',') || !s.space() {
			return stack, false, false
		}
		if s.eat(closer) { // trailing comma
			s.loose, s.trailingComma = true, true
			stack = stack[:len(stack)-1]
			continue
		}
		return stack, false, top != '{' || s.memberName()
	}
	return stack, true, true
}

// memberName scans `"name" :` and the space after it.
func (s *scanner) memberName() bool {
	if !s.str() || !s.space() || !s.eat(':') {
		return false
	}
	return s.space()
}

func (s *scanner) word(w string) bool {
	if bytes.HasPrefix(s.src[s.i:], []byte(w)) {
		s.i += len(w)
		return true
	}
	return false
}
