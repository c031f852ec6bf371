package ladder

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxShown is the longest value a warning or an error repeats: shorter
// than the shortest token doctor takes for a secret (16 characters), so a
// token pasted into the wrong variable is never printed.
const maxShown = 15

// showable reports whether a bad value may be repeated in a message: short,
// without whitespace, '=' or an invisible character, and without the token
// (tok, MEMPALACE_REMOTE_TOKEN's value). A value such as
// "1 MEMPALACE_REMOTE_TOKEN=..." is two .env assignments on one line (the
// token included), a long one may be a token in the wrong variable, and a
// short token (a loopback primary's) is known.
func showable(v, tok string) bool {
	return utf8.RuneCountInString(v) <= maxShown && !mayBeTwoAssignments(v) && !holdsToken(v, tok)
}

// holdsToken: v holds the token tok, in any case (MEMPALACE_EDGE_LOG is
// read lower-cased).
func holdsToken(v, tok string) bool {
	return tok != "" && strings.Contains(strings.ToLower(v), strings.ToLower(tok))
}

// mayBeTwoAssignments: whitespace, '=' or an invisible character.
func mayBeTwoAssignments(v string) bool {
	return strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '=' || !unicode.IsPrint(r) }) >= 0
}

// shown is a bad value as a warning or an error says it: quoted when
// showable (tok is the token), else "its value (not shown: why)", like the URL's query ("not
// repeated here: it may hold a secret").
func shown(v, tok string) string {
	switch {
	case holdsToken(v, tok):
		return "its value (not shown: it holds " + EnvRemoteToken + "'s value, the token)"
	case mayBeTwoAssignments(v):
		return "its value (not shown: it holds a space, '=' or an invisible character, and may hold a secret)"
	case !showable(v, tok):
		return fmt.Sprintf("its value (not shown: %d characters, it may be a secret)", utf8.RuneCountInString(v))
	}
	return fmt.Sprintf("%q", v)
}
