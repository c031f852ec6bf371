package confpos

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/redact"
)

// Error is a mistake at a place in a file, and its fix.
type Error struct {
	// File is "" where the file is not known yet (a parser's error, placed
	// by its caller): the error then reads "line L, column C: what".
	File      string
	Line, Col int // 1-based; 0 when the place is not known
	What, Fix string
	// Err is the error this one places, if any.
	Err error
}

func (e *Error) Error() string {
	s := e.File
	switch {
	case e.File == "" && e.Line > 0:
		// a place found before the file is known (merge's parsers)
		s = fmt.Sprintf("line %d, column %d", e.Line, e.Col)
	case e.Line > 0:
		s += fmt.Sprintf(":%d:%d", e.Line, e.Col)
	}
	s += ": " + e.What
	if e.Fix != "" {
		s += " (fix: " + e.Fix + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// At is an Error at the byte offset off of src.
func At(file string, src []byte, off int, what, fix string) *Error {
	line, col := LineCol(src, off)
	return &Error{File: file, Line: line, Col: col, What: what, Fix: fix}
}

// LineCol is the 1-based line and column of the byte offset off of src;
// an offset past the end is the end. The column counts characters, as an
// editor shows it, not bytes (é is one column).
func LineCol(src []byte, off int) (line, col int) {
	off = min(max(off, 0), len(src))
	line = 1 + bytes.Count(src[:off], []byte("\n"))
	col = 1 + utf8.RuneCount(src[bytes.LastIndexByte(src[:off], '\n')+1:off])
	return line, col
}

// Repeated is text of the user's file that a message repeats (a literal a
// parser quotes, which may be a header's secret): as it is when
// redact.NotShown allows, else "(not shown: why)". The token is not known
// here: render redacts it in all it prints.
func Repeated(text string) string {
	if why := redact.NotShown(text, ""); why != "" {
		return "(not shown: " + why + ")"
	}
	return text
}

// isName: k is a word of ASCII letters, '_' and '-' (mcp_servers,
// bearer_token_env_var), which no generated secret is.
func isName(k string) bool {
	return k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-") == ""
}

// Key is a key of the user's file as a message repeats it (path: the keys
// down to it), quoted: each that is a name, or that Repeated shows as it
// is, as it is; any other as …, and why.
func Key(path ...string) string {
	shown, hidden := make([]string, len(path)), ""
	for i, k := range path {
		shown[i] = k
		if why := redact.NotShown(k, ""); why != "" && !isName(k) {
			shown[i], hidden = "…", " (a key not shown: "+why+")"
		}
	}
	return strconv.Quote(strings.Join(shown, ".")) + hidden
}
