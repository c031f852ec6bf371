package pyjson

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Dumps is v as json.dumps(v, ensure_ascii=False, sort_keys=True) writes
// it. v holds what strictjson.Decode gives: nil, bool, string,
// json.Number, []any, map[string]any.
func Dumps(v any) ([]byte, error) {
	return appendValue(nil, v)
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case string:
		return appendString(b, t), nil
	case json.Number:
		return appendNumber(b, string(t))
	case []any:
		b = append(b, '[')
		for i, x := range t {
			if i > 0 {
				b = append(b, ", "...)
			}
			var err error
			if b, err = appendValue(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys) // UTF-8 byte order is code point order, Python's
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(appendString(b, k), ": "...)
			var err error
			if b, err = appendValue(b, t[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("pyjson: a %T is not a JSON value", v)
}

// appendString writes s as Python's encoder does with ensure_ascii=False:
// " and \ escaped, \n \r \t \b \f by their letters, any other control
// character below U+0020 as \u00XX (lowercase hex), everything else as it is.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendNumber writes a JSON number literal as Python's json reads and
// writes it: with no fraction and no exponent an int, written as it is
// ("-0" as 0); else a float, written as its repr.
func appendNumber(b []byte, lit string) ([]byte, error) {
	if !strings.ContainsAny(lit, ".eE") {
		if lit == "-0" {
			lit = "0"
		}
		return append(b, lit...), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("pyjson: %q is not a finite float64", lit)
	}
	return appendRepr(b, f), nil
}

// appendRepr writes f as Python's repr(float) does: the shortest digits
// that read back as f, in positional notation with at least one digit
// after the point when the decimal point falls within 16 digits of the
// first (1e-4 <= |f| < 1e16), else as d.ddde±XX (two exponent digits at
// least, no ".0").
func appendRepr(b []byte, f float64) []byte {
	e := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	if math.Signbit(f) {
		b = append(b, '-')
	}
	switch decpt := x + 1; {
	case decpt <= -4 || decpt > 16:
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(append(b, '.'), digits[1:]...)
		}
		sign := byte('+')
		if x < 0 {
			sign, x = '-', -x
		}
		return fmt.Appendf(append(b, 'e', sign), "%02d", x)
	case decpt <= 0:
		return append(append(b, "0."+strings.Repeat("0", -decpt)...), digits...)
	case decpt >= len(digits):
		return append(append(b, digits...), strings.Repeat("0", decpt-len(digits))+".0"...)
	}
	return append(append(append(b, digits[:x+1]...), '.'), digits[x+1:]...)
}
