package invisible

import "unicode"

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
