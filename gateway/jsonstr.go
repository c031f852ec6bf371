package gateway

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The filter reads MemPalace's answer text out of a JSON string and puts
// the cut text back into one. encoding/json (and gjson, and segmentio)
// do either at 50 to 100 MB/s on MemPalace's escape-heavy indented text;
// these two copy the runs between escapes whole. FuzzJSONString checks
// both against encoding/json.

// unquote decodes a JSON string's body from the start of s to the quote
// that ends it, in one pass (end: that quote's index); false for an
// escape JSON does not have, or no end. A lone surrogate becomes U+FFFD,
// as in encoding/json.
func unquote(s []byte) (text []byte, end int, ok bool) {
	out := make([]byte, 0, len(s))
	start := 0 // of the run not copied yet
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' && c != '"' {
			continue
		}
		out = append(out, s[start:i]...)
		if c == '"' {
			return out, i, true
		}
		if i+1 >= len(s) {
			return nil, 0, false
		}
		if e := unescaped(s[i+1]); e != 0 {
			out, i, start = append(out, e), i+1, i+2
			continue
		}
		r, ok := hex4(s[i+1:])
		if !ok {
			return nil, 0, false
		}
		i += 5 // the escape's last hex digit
		if utf16.IsSurrogate(r) {
			r2, ok := hex4(bytes.TrimPrefix(s[i+1:], []byte{'\\'}))
			if d := utf16.DecodeRune(r, r2); ok && s[i+1] == '\\' && d != utf8.RuneError {
				r, i = d, i+6
			} else {
				r = utf8.RuneError
			}
		}
		out, start = utf8.AppendRune(out, r), i+1
	}
	return nil, 0, false
}

// unescaped is the character a one-letter escape stands for (0: none).
func unescaped(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// hex4 reads "uXXXX".
func hex4(s []byte) (rune, bool) {
	if len(s) < 5 || s[0] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[1:5]), 16, 16)
	return rune(n), err == nil
}

// appendQuoted appends s as a JSON string: '"' and '\' escaped, control
// characters as \n, \r, \t or \u00XX, everything else (valid UTF-8, which
// the caller checks) as it is.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return append(append(dst, s[start:]...), '"')
}

const hexDigits = "0123456789abcdef"

// plainAnswer reads a tools/call answer laid out as MemPalace writes every
// one that is not an error, {"jsonrpc": "2.0", "id": N, "result":
// {"content": [{"type": "text", "text": "..."}]}} (any whitespace between
// the tokens, an integer, null or plain string id), in one pass: the id
// member as it is and the text unquoted. ok is false
// for anything else, which the general decoder then reads. It is the
// decoder's fast path (that decoder validated MemPalace's kilobytes of
// escaped text once, unquote read them again); one difference: the
// characters JSON forbids raw in a string pass here as themselves, and
// the answer text's own validation refuses all but tab, CR and LF between
// its tokens, which the gateway then sends on escaped.
func plainAnswer(resp []byte) (id, text []byte, ok bool) {
	r := reader{b: resp}
	if !r.tokens(`{`, `"jsonrpc"`, `:`, `"2.0"`, `,`, `"id"`, `:`) {
		return nil, nil, false
	}
	if id = r.id(); id == nil || !r.tokens(`,`, `"result"`, `:`, `{`, `"content"`, `:`, `[`, `{`, `"type"`, `:`, `"text"`, `,`, `"text"`, `:`, `"`) {
		return nil, nil, false
	}
	text, end, ok := unquote(r.b[r.i:])
	r.i += end + 1
	if !ok || !r.tokens(`}`, `]`, `}`, `}`) || r.space() != len(r.b) {
		return nil, nil, false
	}
	return id, text, true
}

// reader is plainAnswer's position in an answer.
type reader struct {
	b []byte
	i int
}

// space skips JSON whitespace and returns the position after it.
func (r *reader) space() int {
	for r.i < len(r.b) && (r.b[r.i] == ' ' || r.b[r.i] == '\n' || r.b[r.i] == '\t' || r.b[r.i] == '\r') {
		r.i++
	}
	return r.i
}

// tokens reads each token in turn, whitespace before each.
func (r *reader) tokens(tokens ...string) bool {
	for _, t := range tokens {
		r.space()
		if !bytes.HasPrefix(r.b[r.i:], []byte(t)) {
			return false
		}
		r.i += len(t)
	}
	return true
}

// id reads an id: an integer, null, or a string without escapes (nil for
// anything else).
func (r *reader) id() []byte {
	start := r.space()
	switch {
	case r.tokens("null"):
	case r.tokens(`"`):
		end := bytes.IndexByte(r.b[r.i:], '"')
		if end < 0 || bytes.ContainsFunc(r.b[r.i:r.i+end], func(c rune) bool { return c < 0x20 || c == '\\' }) {
			return nil
		}
		r.i += end + 1
	default:
		r.tokens("-")
		digits := r.i
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.i++
		}
		if n := r.i - digits; n == 0 || (n > 1 && r.b[digits] == '0') {
			return nil
		}
	}
	return r.b[start:r.i]
}
