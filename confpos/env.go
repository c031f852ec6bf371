package confpos

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/joho/godotenv"
)

// ReadEnv reads a .env file as godotenv does; a file that does not parse
// is an *Error at the mistake. A leading UTF-8 byte order mark (Windows
// Notepad writes one) is dropped, as Docker Compose's env_file drops it:
// it is no part of the first variable's name.
//
// An error repeats nothing of the file but a variable's name (a line that
// is not NAME=value may hold a value anywhere, the token included), and a
// name only where it is one: before the line's =, and written as a name
// (capital letters, digits and _, with an _ in it).
func ReadEnv(file string) (map[string]string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	src = bytes.TrimPrefix(src, []byte("\ufeff"))
	vars, err := godotenv.UnmarshalBytes(src)
	if err != nil {
		return nil, envError(file, src, err)
	}
	if _, ok := vars[""]; ok {
		return nil, noName(file, src)
	}
	return vars, nil
}

// EnvAssignments is, by name, the line of each assignment in the .env
// file src, in order, its statements found as godotenv (ReadEnv) finds
// them, so not inside a quoted value that spans lines: a name assigned
// twice has two lines, and the last is its value (Docker Compose's rule
// too). For a file ReadEnv accepts.
func EnvAssignments(src []byte) map[string][]int {
	lf := bytes.ReplaceAll(bytes.TrimPrefix(src, []byte("\ufeff")), []byte("\r\n"), []byte("\n"))
	out := map[string][]int{}
	for off := 0; ; {
		start := bytes.IndexFunc(lf[off:], func(r rune) bool { return !unicode.IsSpace(r) })
		if start < 0 {
			return out
		}
		off += start
		if lf[off] == '#' {
			off = lineEnd(lf, off)
			continue
		}
		stmt := lf[off:]
		if rest, ok := bytes.CutPrefix(stmt, []byte("export")); ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
			stmt = bytes.TrimLeft(rest, " \t")
		}
		eq := bytes.IndexAny(stmt, "=:")
		if eq < 0 {
			return out
		}
		name := string(bytes.TrimSpace(stmt[:eq]))
		out[name] = append(out[name], bytes.Count(lf[:off], []byte("\n"))+1)
		val := bytes.TrimLeft(stmt[eq+1:], " \t\v\f\r")
		off = len(lf) - len(val)
		if len(val) == 0 || val[0] != '"' && val[0] != '\'' {
			off = lineEnd(lf, off)
			continue
		}
		end := 1 // the closing quote: the first not after a backslash, as godotenv takes it
		for end < len(val) && (val[end] != val[0] || val[end-1] == '\\') {
			end++
		}
		off += end + 1
		if off >= len(lf) {
			return out
		}
	}
}

// lineEnd is the offset just past the end of the line at off in lf.
func lineEnd(lf []byte, off int) int {
	if i := bytes.IndexByte(lf[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(lf)
}

// noName places what godotenv takes under the name "" without an error: a
// line that begins with =, or a last line with no = and no newline (its
// whole text is the value).
func noName(file string, src []byte) error {
	lf := bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	last := -1
	for off := 0; off < len(lf); {
		end := bytes.IndexByte(lf[off:], '\n')
		if end < 0 {
			end = len(lf) - off
		}
		line := lf[off : off+end]
		text := bytes.TrimLeft(line, " \t")
		start := off + len(line) - len(text)
		if rest, ok := bytes.CutPrefix(text, []byte("export")); ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
			text = bytes.TrimLeft(rest, " \t")
		}
		if bytes.HasPrefix(text, []byte("=")) || bytes.HasPrefix(text, []byte(":")) {
			return At(file, lf, start, "the line has no name before its =",
				"write the variable's name before the =, NAME=value, or begin the line with # to make it a comment")
		}
		if len(text) > 0 && text[0] != '#' {
			last = start
		}
		off += end + 1
	}
	if last >= 0 {
		return notAssignment(file, lf, last)
	}
	return &Error{File: file, What: "a value with no name", Fix: "write each line as NAME=value"}
}

// envError places one of godotenv's errors. godotenv reads the file with
// CRLF made LF, which moves no line and no column but the last of a line,
// and says what is left of the file where it stopped ("near ..."), or the
// start of an unterminated quoted value: where that is in the file is where
// the mistake is. Its words are never repeated: they quote the file.
func envError(file string, src []byte, err error) error {
	lf := bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	msg := err.Error()
	if near, ok := badNameNear(msg); ok && strings.HasSuffix(string(lf), near) {
		return notAssignment(file, lf, len(lf)-len(near))
	}
	if rest, ok := strings.CutPrefix(msg, "unterminated quoted value "); ok && rest != "" {
		q := rest[0]
		// Nothing after the opening quote closes it, so it is the last
		// quote of its kind not escaped.
		for i := len(lf) - 1; i >= 0; i-- {
			if lf[i] == q && (i == 0 || lf[i-1] != '\\') {
				if !bytes.HasPrefix(lf[i:], []byte(rest)) {
					break
				}
				return At(file, lf, i, fmt.Sprintf("the quoted value that begins here is never closed: no %c follows it", q),
					fmt.Sprintf("add the closing %c at the end of the value, or remove the opening one", q))
			}
		}
	}
	return &Error{File: file, What: "a line is not NAME=value (not repeated here: it may hold a secret)",
		Fix: "write each line as NAME=value, or begin it with # to make it a comment"}
}

// badNameNear parses godotenv's `unexpected character %q in variable name
// near %q`: what is left of the file from the statement it could not read.
func badNameNear(msg string) (near string, ok bool) {
	rest, ok := strings.CutPrefix(msg, "unexpected character ")
	if !ok {
		return "", false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	rest, ok = strings.CutPrefix(rest[len(q):], " in variable name near ")
	if !ok {
		return "", false
	}
	near, err = strconv.Unquote(rest)
	return near, err == nil
}

// notAssignment says why the statement at stmt of lf is not NAME=value,
// at the character to blame.
func notAssignment(file string, lf []byte, stmt int) error {
	start := bytes.LastIndexByte(lf[:stmt], '\n') + 1
	if before := bytes.TrimSpace(lf[start:stmt]); len(before) > 0 && string(before) != "export" {
		// A statement in the middle of a line: what follows a quoted
		// value's closing quote.
		of := "a quoted value"
		if name, _, ok := bytes.Cut(lf[start:stmt], []byte("=")); ok && isVarName(string(bytes.TrimSpace(name))) {
			of = string(bytes.TrimSpace(name)) + "'s quoted value"
		}
		return At(file, lf, stmt, "text follows the closing quote of "+of,
			"end the line at the closing quote: move the text inside the quotes, or put a space and # before it to make it a comment")
	}
	start += len(lf[start:]) - len(bytes.TrimLeft(lf[start:], " \t"))
	line, _, _ := bytes.Cut(lf[start:], []byte("\n"))
	if rest, ok := bytes.CutPrefix(line, []byte("export")); ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		line = bytes.TrimLeft(rest, " \t")
	}
	at := start + bytes.Index(lf[start:], line) // where the name begins
	name := string(line[:len(line)-len(bytes.TrimLeftFunc(line, nameChar))])
	named := isVarName(name)
	r, _ := utf8.DecodeRune(line[len(name):])
	switch {
	case !bytes.ContainsAny(line, "=:"):
		what := "the line has no =, so it is not NAME=value"
		if named && (len(line) == len(name) || r == ' ' || r == '\t') {
			what = name + " has no = after it, so the line is not NAME=value"
		}
		return At(file, lf, start, what,
			"write it as NAME=value, with an = right after the name, or begin the line with # to make it a comment")
	case name == "" && (r == '"' || r == '\''):
		return At(file, lf, at, "a variable's name cannot be in quotes",
			"remove the quotes around the name: NAME=value (quotes go around the value only)")
	case r == ' ' || r == '\t':
		what := "a space inside the name, before the line's ="
		if named {
			what = name + " is followed by a space and more text before the line's ="
		}
		return At(file, lf, at+len(name), what,
			"write it as NAME=value, with the = right after the name, or begin the line with # to make it a comment")
	case r >= utf8.RuneSelf || !unicode.IsPrint(r):
		holder, what := "the name", fmt.Sprintf("%U, an invisible character,", r)
		if named {
			holder = name
		}
		if unicode.IsPrint(r) && !unicode.Is(unicode.Cf, r) {
			what = fmt.Sprintf("%U (%c), not a letter a name may hold,", r, r)
		}
		return At(file, lf, at+len(name), fmt.Sprintf("%s holds %s before its =", holder, what),
			"delete the character: retype the name (letters A to Z, digits, _ and . only), then =")
	}
	return At(file, lf, at+len(name), fmt.Sprintf("%q cannot be in a variable's name", string(r)),
		"a name is letters, digits, _ and . only (MEMPALACE_EDGE, not MEMPALACE-EDGE); if the line is not a variable, begin it with #")
}

// nameChar: what a name is made of.
func nameChar(r rune) bool {
	return r == '_' || r == '.' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// isVarName: an environment variable's name as written by convention
// (MEMPALACE_EDGE), which a message may repeat; a token is not written so.
func isVarName(s string) bool {
	return s != "" && strings.Contains(s, "_") && s[0] >= 'A' && s[0] <= 'Z' &&
		strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}
