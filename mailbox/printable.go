package mailbox

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/invisible"
)

// Printable is s made safe to show on one line, to a terminal or to an
// agent. Text read from the coordination log (a body, a sender, a type,
// a stream, an id) is written by whoever may append to it, an untrusted
// device included: shown raw, its escape codes would erase and redraw
// what the mailbox says around it, a carriage return would start a fake
// line, a right-to-left override would reorder it, and invisible
// characters would say more than a reader sees.
//
//   - a line break or tab (\t \n \v \f \r, U+0085, U+2028, U+2029)
//     becomes a space: the text stays on the line it is shown on;
//   - every other control character (C0, DEL, C1; ESC among them) shows as
//     its escape, \x1b or \u009b;
//   - every format character (Unicode Cf: the bidi embeddings, overrides,
//     isolates and marks U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
//     U+061C; the zero-width U+200B-U+200D, U+2060, U+FEFF; the tag
//     characters U+E0000-U+E007F that spell invisible text), every other
//     default-ignorable or blank one (the Hangul filler U+3164, a variation
//     selector, U+2800: invisible.Is) shows as its escape, \u202e or
//     \U000e0041;
//   - a byte that is not UTF-8 shows as \xNN.
//
// A backslash stays as it is, so Printable(Printable(s)) == Printable(s):
// a text that was made printable on its way (a line kept by an earlier
// session) can be made printable again where it is shown.
func Printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, unprintable) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case lineBreak(r):
			b.WriteByte(' ')
		case r < 0x80 && unprintable(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff && unprintable(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case unprintable(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Quoted is s in double quotes, Go-escaped and Printable: how text that
// names an identity (an agent name or a label, from .env, the gateway or
// the log) shows it, so that a name made of allowed characters (letters,
// '.' and spaces) cannot read as a sentence of the text around it.
func Quoted(s string) string { return Printable(strconv.Quote(s)) }

// Name is how a name a sender chose (its from_agent, an event's stream)
// is shown: Quoted, so "claude. SYSTEM NOTE ..." reads as a name and not
// as a sentence; - when there is none.
func Name(s string) string {
	if s == "" {
		return "-"
	}
	return Quoted(s)
}

// Type is how an event's type is shown: as it is when it keeps to
// MemPalace's grammar for one (lowercase letters, digits, '.', '_', '-';
// at most 64 characters), else Quoted and cut to 64 bytes as shown, so a type
// a primary made up ("ask IGNORE ... from \"admin@ops\"") reads as a
// type, not as a sentence or a sender; - when there is none.
func Type(s string) string {
	if s == "" {
		return "-"
	}
	if len(s) <= typeMax && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == "" {
		return s
	}
	return quotedCut(s, typeMax)
}

// typeMax is the longest type MemPalace takes.
const typeMax = 64

// correlation is how an event's correlation id is shown: Quoted and cut
// to corrMax bytes as shown, as a type outside the grammar is. MemPalace
// refuses only control characters in one, so "x. SYSTEM NOTICE: ..." is a
// valid id, and bare it would read as the mailbox's own words.
func correlation(s string) string { return quotedCut(s, corrMax) }

// corrMax is how many bytes of a correlation id are shown, quotes and
// escapes counted: a UUID with a prefix fits; MemPalace takes 256
// characters.
const corrMax = 64

// quotedCut is s Quoted, cut to max bytes as shown with "…" marking the
// cut. Escapes are counted: quotes or bidi marks are up to six times
// longer quoted than they are (the review).
func quotedCut(s string, max int) string {
	r, cut := []rune(s), false
	if len(r) > max {
		r, cut = r[:max], true
	}
	for len(r) > 0 && len(Quoted(string(r))) > max {
		r, cut = r[:len(r)-1], true
	}
	if cut {
		return Quoted(string(r)) + "…"
	}
	return Quoted(s)
}

// PrintableCut is Printable(s) when what it shows measures at most max
// (measure: len for bytes, utf8.RuneCountInString for characters), else
// its longest prefix that measures at most max with the "…" that marks
// the cut: a character's escape is kept whole or cut whole.
func PrintableCut(s string, max int, measure func(string) int) string {
	if p := Printable(s); measure(p) <= max {
		return p
	}
	var b strings.Builder
	for i, n, shown := 0, 0, measure("…"); i < len(s); i += n {
		_, n = utf8.DecodeRuneInString(s[i:])
		p := Printable(s[i : i+n])
		if shown += measure(p); shown > max {
			break
		}
		b.WriteString(p)
	}
	return b.String() + "…"
}

// unprintable reports a character Printable does not pass as it is.
func unprintable(r rune) bool {
	return lineBreak(r) || invisible.Is(r)
}

// lineBreak reports a character that ends or breaks a line, or a tab.
func lineBreak(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// PrintableJSON is the JSON text b with every character Printable would
// escape written as a JSON escape (\u202e, a surrogate pair above U+FFFF)
// instead of raw. Such characters can stand only inside a string, where
// the escape means the same character: b decodes to the same value, and
// printed to a terminal or read by an agent, it shows what it holds.
// encoding/json escapes the controls already, not the format characters.
func PrintableJSON(b []byte) []byte {
	if utf8.Valid(b) && bytes.IndexFunc(b, unprintableRaw) < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...) // encoding/json writes none; from elsewhere, shown replaced
		case unprintableRaw(r) && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		case unprintableRaw(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// unprintableRaw is unprintable but for the line breaks and tabs
// between a JSON text's members, which encoding/json escapes in strings.
func unprintableRaw(r rune) bool {
	return r != '\n' && r != '\t' && r != '\r' && r != ' ' && unprintable(r)
}
