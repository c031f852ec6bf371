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

// unquote decodes the body of a JSON string (without its quotes); false
// for an escape JSON does not have. A lone surrogate becomes U+FFFD, as
// in encoding/json.
func unquote(s []byte) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(out, s...), true
		}
		out = append(out, s[:i]...)
		if i+1 >= len(s) {
			return nil, false
		}
		if c := unescaped(s[i+1]); c != 0 {
			out, s = append(out, c), s[i+2:]
			continue
		}
		r, ok := hex4(s[i+1:])
		if !ok {
			return nil, false
		}
		s = s[i+6:]
		if utf16.IsSurrogate(r) {
			r2, ok := hex4(bytes.TrimPrefix(s, []byte{'\\'}))
			if d := utf16.DecodeRune(r, r2); ok && len(s) > 0 && s[0] == '\\' && d != utf8.RuneError {
				r, s = d, s[6:]
			} else {
				r = utf8.RuneError
			}
		}
		out = utf8.AppendRune(out, r)
	}
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
