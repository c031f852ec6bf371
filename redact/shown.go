package redact

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxShown is the longest value a warning or an error repeats: shorter
// than the shortest token doctor takes for a secret (16 characters), so a
// token pasted into the wrong place is never printed.
const MaxShown = 15

// NotShown says why a warning or an error may not repeat v, a value of the
// user's (a variable's, a config file's text a parser quotes): "" when it
// may, being short (MaxShown characters at most), without whitespace, '='
// or an invisible character, and without the token tok
// (MEMPALACE_REMOTE_TOKEN's value; "" when unknown) or a piece of it
// (HoldsToken). A value such as "1 MEMPALACE_REMOTE_TOKEN=..." is two
// .env assignments on one line (the token included), a long one may be a
// token in the wrong place, and a short token (a loopback primary's) is
// known.
func NotShown(v, tok string) string {
	switch {
	case HoldsToken(v, tok):
		return fmt.Sprintf("it holds MEMPALACE_REMOTE_TOKEN's value, or %d characters of it in a row", MinTokenInText)
	case MayBeTwoAssignments(v):
		return "it holds a space, '=' or an invisible character, and may hold a secret"
	case utf8.RuneCountInString(v) > MaxShown:
		return fmt.Sprintf("%d characters, it may be a secret", utf8.RuneCountInString(v))
	}
	return ""
}

// HoldsToken: v holds the token tok, or MinTokenInText characters of it
// in a row (a truncated paste of it), in any case (MEMPALACE_EDGE_LOG is
// read lower-cased). False when tok is "".
func HoldsToken(v, tok string) bool {
	if tok == "" {
		return false
	}
	v, tok = strings.ToLower(v), strings.ToLower(tok)
	if strings.Contains(v, tok) {
		return true
	}
	for i := 0; i+MinTokenInText <= len(v); i++ {
		if strings.Contains(tok, v[i:i+MinTokenInText]) {
			return true
		}
	}
	return false
}

// MayBeTwoAssignments: v holds whitespace, '=' or an invisible character.
func MayBeTwoAssignments(v string) bool {
	return strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '=' || !unicode.IsPrint(r) }) >= 0
}

// Pieces is text with the token tok taken out of each word (a run
// between whitespace and quotes) that holds it, the punctuation around it
// kept (a parser's "invalid literal: x; nothing written", attack117 F2): a
// parse error quoting a literal that holds 8 characters of the token in a
// row (attack115 F1: "invalid literal: SECRETtok012345", short enough to be
// shown). A token of MinTokenInText characters or more, and each run of
// that many of its characters, is replaced with Mark where it stands; a
// word holding a shorter one goes whole (holdsShort).
func Pieces(text, tok string) string {
	if tok == "" {
		return text
	}
	return pieceWords.ReplaceAllStringFunc(text, func(w string) string {
		if len(tok) >= MinTokenInText {
			return runs(w, tok)
		}
		core := strings.TrimLeft(w, wordPunct)
		lead := w[:len(w)-len(core)]
		core = strings.TrimRight(core, wordPunct)
		switch {
		case holdsShort(core, tok):
			return lead + Mark + w[len(lead)+len(core):]
		case holdsShort(w, tok): // the punctuation is the token's own
			return Mark
		}
		return w
	})
}

// wordPunct is what Pieces keeps around a word holding a short token.
const wordPunct = ",;:.()[]{}<>"

// holdsShort: the word w holds a token tok shorter than MinTokenInText:
// is it, or, of 4 characters or more, contains it. A shorter one in a
// word is more likely the word's own letters (a test's token "t" in
// "the").
func holdsShort(w, tok string) bool {
	return strings.EqualFold(w, tok) || len(tok) >= 4 && strings.Contains(strings.ToLower(w), strings.ToLower(tok))
}

// runs is w with each run of MinTokenInText characters or more that tok
// holds in a row (ASCII case ignored) replaced with Mark; Mark alone when
// what is left still HoldsToken (a non-ASCII letter's other case).
func runs(w, tok string) string {
	lw, lt := asciiLower(w), asciiLower(tok)
	cover := make([]bool, len(w))
	for i := 0; i+MinTokenInText <= len(w); i++ {
		if strings.Contains(lt, lw[i:i+MinTokenInText]) {
			for j := i; j < i+MinTokenInText; j++ {
				cover[j] = true
			}
		}
	}
	var b strings.Builder
	for i := range len(w) {
		switch {
		case !cover[i]:
			b.WriteByte(w[i])
		case i == 0 || !cover[i-1]:
			b.WriteString(Mark)
		}
	}
	if HoldsToken(b.String(), tok) {
		return Mark
	}
	return b.String()
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

// pieceWords is a word Pieces looks at.
var pieceWords = regexp.MustCompile(`[^\s"'` + "`" + `]+`)
