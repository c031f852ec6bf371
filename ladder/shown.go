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
// and without whitespace, '=' or an invisible character. A value such as
// "1 MEMPALACE_REMOTE_TOKEN=..." is two .env assignments on one line (the
// token included), and a long one may be a token in the wrong variable.
func showable(v string) bool {
	return utf8.RuneCountInString(v) <= maxShown && !mayBeTwoAssignments(v)
}

// mayBeTwoAssignments: whitespace, '=' or an invisible character.
func mayBeTwoAssignments(v string) bool {
	return strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '=' || !unicode.IsPrint(r) }) >= 0
}

// shown is a bad value as a warning or an error says it: quoted when
// showable, else "its value (not shown: why)", like the URL's query ("not
// repeated here: it may hold a secret").
func shown(v string) string {
	switch {
	case mayBeTwoAssignments(v):
		return "its value (not shown: it holds a space, '=' or an invisible character, and may hold a secret)"
	case !showable(v):
		return fmt.Sprintf("its value (not shown: %d characters, it may be a secret)", utf8.RuneCountInString(v))
	}
	return fmt.Sprintf("%q", v)
}
