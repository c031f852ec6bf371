package invisible

import (
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Is reports a character that a reader cannot see or that a terminal
// acts on: a control (Unicode Cc), a format character (Cf: bidi
// overrides, zero-width, tag characters), a default-ignorable one
// (Other_Default_Ignorable_Code_Point: the combining grapheme joiner
// U+034F, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, which are
// letters, the Khmer inherent vowels U+17B4, U+17B5; the variation
// selectors U+180B-U+180D, U+FE00-U+FE0F, U+E0100-U+E01EF), and the blank
// Braille pattern U+2800, a symbol that shows as a space. Together the
// first three are Unicode's Default_Ignorable_Code_Point and Cf. Spaces
// and line breaks are not: callers treat them as they need.
func Is(r rune) bool {
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	return r == '\u2800' || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// EscapeJSON is the JSON text b with every character Is reports above
// ASCII written as its \u escape (a surrogate pair above U+FFFF): the
// same JSON to a decoder, but a bidi override or a zero-width character a
// client sent shows as its code in any viewer, and cannot make a line
// display otherwise than it reads. ASCII controls are escaped by any
// encoder already. b is returned as it is when it holds none.
func EscapeJSON(b []byte) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if !Is(r) {
			i += n
			continue
		}
		out = append(out, b[done:i]...)
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
		done = i
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}
