package confpos

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/joho/godotenv"
)

// ReadEnv reads a .env file as godotenv does; a file that does not parse
// is an *Error at the mistake.
func ReadEnv(file string) (map[string]string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	vars, err := godotenv.UnmarshalBytes(src)
	if err != nil {
		return nil, envError(file, src, err)
	}
	if _, ok := vars[""]; ok {
		return nil, noName(file, src)
	}
	return vars, nil
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
			return At(file, lf, start, fmt.Sprintf("%q has no name before its =", strings.TrimSpace(string(line))),
				"write the variable's name before the =, NAME=value, or begin the line with # to make it a comment")
		}
		if len(text) > 0 && text[0] != '#' {
			last = start
		}
		off += end + 1
	}
	if last >= 0 {
		line, _, _ := strings.Cut(string(lf[last:]), "\n")
		return At(file, lf, last, fmt.Sprintf("%q is not NAME=value", strings.TrimSpace(line)),
			"write it as NAME=value, with an = between the name and the value, or begin the line with # to make it a comment")
	}
	return &Error{File: file, What: "a value with no name", Fix: "write each line as NAME=value"}
}

// envError places one of godotenv's errors. godotenv reads the file with
// CRLF made LF, which moves no line and no column but the last of a line,
// and says what is left of the file where it stopped ("near ..."), or the
// start of an unterminated quoted value: where that is in the file is where
// the mistake is. An error this does not know keeps godotenv's words.
func envError(file string, src []byte, err error) error {
	lf := bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	msg := err.Error()
	if char, near, ok := badNameChar(msg); ok && strings.HasSuffix(string(lf), near) {
		stmt := len(lf) - len(near) // where the variable's name starts
		i := strings.Index(near, char)
		if char == "\n" || i < 0 {
			// No '=' before the line's end: the line is the mistake.
			start := bytes.LastIndexByte(lf[:stmt], '\n') + 1
			start += len(lf[start:]) - len(bytes.TrimLeft(lf[start:], " \t"))
			line, _, _ := strings.Cut(string(lf[start:]), "\n")
			return At(file, lf, start, fmt.Sprintf("%q is not NAME=value", strings.TrimSpace(line)),
				"write it as NAME=value, with an = between the name and the value, or begin the line with # to make it a comment")
		}
		return At(file, lf, stmt+i, fmt.Sprintf("%q cannot be in a variable's name", char),
			"a name is letters, digits, _ and . only (MEMPALACE_EDGE, not MEMPALACE-EDGE); if the line is not a variable, begin it with #")
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
	return &Error{File: file, What: msg, Fix: "write each line as NAME=value, or begin it with # to make it a comment"}
}

// badNameChar parses godotenv's `unexpected character %q in variable name
// near %q`.
func badNameChar(msg string) (char, near string, ok bool) {
	rest, ok := strings.CutPrefix(msg, "unexpected character ")
	if !ok {
		return "", "", false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", false
	}
	rest, ok = strings.CutPrefix(rest[len(q):], " in variable name near ")
	if !ok {
		return "", "", false
	}
	char, err1 := strconv.Unquote(q)
	near, err2 := strconv.Unquote(rest)
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	return char, near, true
}
