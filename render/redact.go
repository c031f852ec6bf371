package render

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
)

// hidden stands for a value of the user's that render does not print.
const hidden = "…"

// redacted stands for MEMPALACE_REMOTE_TOKEN's value in what render
// prints.
const redacted = "[redacted]"

// reference is a value that only names a variable, in a form a harness
// resolves (${VAR}, $VAR, {env:VAR}, ${env:VAR}), perhaps after "Bearer ".
// VAR is upper case, as variables are named by convention: a secret that
// merely starts with $ ("$S3cretpass") is no reference.
var reference = regexp.MustCompile(`^(?:Bearer )?(?:\$\{(?:env:)?[A-Z_][A-Z0-9_]*\}|\$[A-Z_][A-Z0-9_]*|\{env:[A-Z_][A-Z0-9_]*\})$`)

// plain is an unquoted number, boolean or null.
var plain = regexp.MustCompile(`^(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|~)$`)

// masker prints a config's keys and structure and hides every value
// (hidden) but the values render writes itself (ours, which hold
// references, never a secret), variable references, and unquoted numbers,
// booleans and null. Comments are hidden too. Every line stays a line, so
// a diff of two masked texts lines up as the diff of the texts does.
type masker struct {
	ours map[string]bool
	b    strings.Builder
}

// shown: the value v (quoted or not) is printed as it is.
func (k *masker) shown(v string, quoted bool) bool {
	return v == "" || k.ours[v] || reference.MatchString(v) || (!quoted && plain.MatchString(v))
}

// mask is text in format with the values render does not print hidden.
func mask(format harness.Format, text []byte, ours map[string]bool) []byte {
	if text == nil {
		return nil
	}
	k := &masker{ours: ours}
	switch format {
	case harness.TOML:
		k.toml(string(text))
	case harness.YAML:
		k.yaml(string(text))
	default:
		k.json(string(text))
	}
	return []byte(k.b.String())
}

// value writes the value s (a quoted one with its quotes, q its quote) as
// it is or hidden, each of its lines then hidden.
func (k *masker) value(s, q string) {
	inner := strings.TrimSuffix(strings.TrimPrefix(s, q), q)
	if len(s) >= 2*len(q) && k.shown(inner, q != "") {
		k.b.WriteString(s)
		return
	}
	k.b.WriteString(q)
	k.hideLines(inner)
	if strings.HasSuffix(s, q) && len(s) >= 2*len(q) {
		k.b.WriteString(q)
	}
}

// hideLines writes text with every line's content hidden, its leading
// blanks, line ends and empty lines kept.
func (k *masker) hideLines(text string) {
	for i, line := range strings.Split(text, "\n") {
		if i > 0 {
			k.b.WriteByte('\n')
		}
		body := strings.TrimRight(line, "\r")
		if t := strings.TrimLeft(body, " \t"); t != "" {
			k.b.WriteString(body[:len(body)-len(t)] + hidden)
		}
		k.b.WriteString(line[len(body):])
	}
}

// comment writes a comment: its marker, then hidden.
func (k *masker) comment(marker, body string) {
	k.b.WriteString(marker)
	k.hideLines(body)
}

// quoted is the end of the string quoted with q that starts at s[i],
// escapes (\) honoured when esc; multi says it may span lines. One that
// does not end ends at its line's end (or, multi, the text's).
func quoted(s string, i int, q string, esc, multi bool) int {
	for j := i + len(q); j < len(s); j++ {
		switch {
		case esc && s[j] == '\\':
			j++
		case s[j] == '\n' && !multi:
			return j
		case strings.HasPrefix(s[j:], q):
			return j + len(q)
		}
	}
	return len(s)
}

// lineEnd is the index of the newline ending the line s[i] is on.
func lineEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

// json masks JSON or JSONC: a string followed by ':' is a key.
func (k *masker) json(s string) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			end := quoted(s, i, `"`, true, false)
			if rest := strings.TrimLeft(s[end:], " \t"); strings.HasPrefix(rest, ":") {
				k.b.WriteString(s[i:end])
			} else {
				k.value(s[i:end], `"`)
			}
			i = end
		case strings.HasPrefix(s[i:], "//"):
			end := lineEnd(s, i)
			k.comment("//", s[i+2:end])
			i = end
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				end = len(s) - i - 2
			}
			k.b.WriteString("/*")
			k.hideLines(s[i+2 : i+2+end])
			i += 2 + end
			if strings.HasPrefix(s[i:], "*/") {
				k.b.WriteString("*/")
				i += 2
			}
		case strings.IndexByte(" \t\r\n{}[],:", c) >= 0:
			k.b.WriteByte(c)
			i++
		default:
			end := i + 1
			for end < len(s) && strings.IndexByte(" \t\r\n{}[],:\"/", s[end]) < 0 {
				end++
			}
			k.value(s[i:end], "")
			i = end
		}
	}
}

// toml masks TOML: what stands before '=' (at a line's start or in an
// inline table) and a [table] header are keys; strings, bare values,
// arrays and inline tables after '=' are values, a multi-line string's
// lines included.
func (k *masker) toml(s string) {
	var open []byte // the arrays and inline tables the scan is in
	key := true     // at a key's place
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '#':
			end := lineEnd(s, i)
			k.comment("#", s[i+1:end])
			i = end
		case c == '"' || c == '\'':
			q, multi := s[i:i+1], false
			if strings.HasPrefix(s[i:], strings.Repeat(q, 3)) {
				q, multi = strings.Repeat(q, 3), true
			}
			end := quoted(s, i, q, c == '"', multi)
			if key {
				k.b.WriteString(s[i:end])
			} else {
				k.value(s[i:end], q)
			}
			i = end
		case c == '\n':
			key = len(open) == 0
			k.b.WriteByte(c)
			i++
		case c == '=' && key:
			key = false
			k.b.WriteByte(c)
			i++
		case (c == '[' || c == '{') && !key:
			open = append(open, c)
			key = c == '{'
			k.b.WriteByte(c)
			i++
		case (c == ']' || c == '}') && len(open) > 0:
			open = open[:len(open)-1]
			k.b.WriteByte(c)
			i++
		case c == ',' && len(open) > 0:
			key = open[len(open)-1] == '{'
			k.b.WriteByte(c)
			i++
		case strings.IndexByte(" \t\r[].=,{}", c) >= 0:
			k.b.WriteByte(c)
			i++
		default:
			end := i + 1
			for end < len(s) && strings.IndexByte(" \t\r\n#\"'[]{},=", s[end]) < 0 {
				end++
			}
			if key {
				k.b.WriteString(s[i:end])
			} else {
				k.value(s[i:end], "")
			}
			i = end
		}
	}
}

// yamlBlock is a block scalar's indicator (| or >, perhaps after a tag or
// an anchor): the lines after it that are indented more are its text.
var yamlBlock = regexp.MustCompile(`^(?:[!&]\S*\s+)*[|>][-+1-9]{0,2}$`)

// yaml masks YAML line by line: a block scalar's lines (after | or >) and
// a quoted string's further lines are hidden whole; on other lines, what
// stands before ': ' is a key, '- ' and flow brackets are structure, and
// every scalar else is a value.
func (k *masker) yaml(s string) {
	y := yamlScan{k: k, block: none, key: -1}
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			k.b.WriteByte('\n')
		}
		y.line(line)
	}
}

// none is yamlScan.block outside a block scalar.
const none = -2

// yamlScan is the state carried from one YAML line to the next.
type yamlScan struct {
	k     *masker
	flow  int    // open [ and {
	quote string // the quote of a string that goes on to the next line
	block int    // a block scalar's text is indented more than this (none: not in one)
	key   int    // where the last key or '-' on an earlier line starts (-1: none yet)
}

func (y *yamlScan) line(line string) {
	k := y.k
	indent := len(line) - len(strings.TrimLeft(line, " "))
	i, node, done := y.carried(line, indent) // node: at a node's start, where '- ', '? ' and ': ' are structure
	if done {
		return
	}
	col := min(y.key, indent-1) // where the line's last key or '-' starts, or an earlier line's
	// alone: no key, '-' or bracket before on this line, so a plain scalar
	// may go on from the line before (a number there is a word of it)
	alone := y.flow == 0 && node
	for i < len(line) {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			k.b.WriteByte(c)
			i++
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			k.comment("#", line[i+1:])
			return
		case node && y.flow == 0 && strings.IndexByte("-?:", c) >= 0 && (i+1 == len(line) || strings.IndexByte(" \t\r", line[i+1]) >= 0):
			col, y.key, alone = i, i, false
			k.b.WriteByte(c)
			i++
		case c == '"' || c == '\'':
			end, key := y.quoted(line, i)
			if end < 0 {
				return
			}
			if key {
				col, y.key, alone = i, i, false
			}
			i, node = end, false
		case (c == '[' || c == '{') && node || y.flow > 0 && (c == '[' || c == '{'):
			y.flow, alone = y.flow+1, false
			k.b.WriteByte(c)
			i++
		case y.flow > 0 && strings.IndexByte("]},", c) >= 0:
			if c != ',' {
				y.flow--
			}
			k.b.WriteByte(c)
			i++
		case c == ':' && y.keyAfter(line[i:]):
			k.b.WriteByte(c)
			i, node = i+1, true
		default:
			end := y.plainEnd(line, i)
			tok := strings.TrimRight(line[i:end], " \t\r")
			if y.scalar(tok, line[end:], i == 0, col, alone) {
				col, y.key, alone = i, i, false
			}
			i, node = i+len(tok), false
		}
	}
}

// carried masks what of line (indented by indent) an earlier line carries
// on, hidden: a block scalar's text (the whole line), or the rest of a
// quoted string (its closing quote kept). i is where the line's own scan
// starts, node whether that is at a node's start; done: nothing of the
// line is left to scan.
func (y *yamlScan) carried(line string, indent int) (i int, node, done bool) {
	if y.block != none && (strings.TrimSpace(line) == "" || indent > y.block) {
		y.k.hideLines(line)
		return 0, false, true
	}
	y.block = none
	if y.quote == "" {
		return 0, true, false
	}
	end := yamlQuoteEnd(line, 0, y.quote)
	if end < 0 {
		y.k.hideLines(line)
		return 0, false, true
	}
	y.k.hideLines(line[:end-1])
	y.k.b.WriteString(y.quote)
	y.quote = ""
	return end, false, false
}

// quoted masks the quoted scalar at line[i]: a key is kept, a value
// hidden unless shown. end is where it ends, -1 when it goes on to the
// next line (hidden, and y.quote its quote).
func (y *yamlScan) quoted(line string, i int) (end int, key bool) {
	q := line[i : i+1]
	end = yamlQuoteEnd(line, i+1, q)
	switch {
	case end < 0:
		y.k.b.WriteString(q)
		y.k.hideLines(line[i+1:])
		y.quote = q
	case y.keyAfter(line[end:]):
		y.k.b.WriteString(line[i:end])
		key = true
	default:
		y.k.value(line[i:end], q)
	}
	return end, key
}

// scalar masks the plain scalar tok (rest: what follows it on the line;
// first: it starts the line) and reports whether it is a key: a key, a
// document's start or end and a block scalar's indicator (whose text is
// indented more than col) are kept; a scalar alone on its line, perhaps
// a word of one going on from the line before, is hidden; any other is a
// value.
func (y *yamlScan) scalar(tok, rest string, first bool, col int, alone bool) (key bool) {
	k := y.k
	switch {
	case y.keyAfter(rest):
		k.b.WriteString(tok)
		return true
	case first && (tok == "---" || tok == "..."): // a document's start or end
		k.b.WriteString(tok)
	case y.flow == 0 && yamlBlock.MatchString(tok):
		k.b.WriteString(tok)
		y.block = col
	case alone:
		k.b.WriteString(hidden)
	default:
		k.value(tok, "")
	}
	return false
}

// keyAfter: rest (what follows a scalar) starts with the ':' that makes
// the scalar a key.
func (y *yamlScan) keyAfter(rest string) bool {
	rest = strings.TrimLeft(rest, " \t")
	if !strings.HasPrefix(rest, ":") {
		return false
	}
	return len(rest) == 1 || strings.IndexByte(" \t\r", rest[1]) >= 0 || y.flow > 0 && strings.IndexByte(",]}", rest[1]) >= 0
}

// plainEnd is the end of the plain scalar starting at line[i]: a ': ', a
// ' #', the line's end, or in a flow collection a ',', ']' or '}'.
func (y *yamlScan) plainEnd(line string, i int) int {
	for j := i; j < len(line); j++ {
		switch c := line[j]; {
		case c == ':' && y.keyAfter(line[j:]):
			return j
		case c == '#' && j > i && (line[j-1] == ' ' || line[j-1] == '\t'):
			return j
		case y.flow > 0 && strings.IndexByte(",[]{}", c) >= 0:
			return j
		}
	}
	return len(line)
}

// yamlQuoteEnd is the index just after the quote q that ends a string
// whose text starts at line[i], or -1 if it does not end on this line (in
// a "string \ escapes, in a 'string a doubled quote is one).
func yamlQuoteEnd(line string, i int, q string) int {
	for j := i; j < len(line); j++ {
		switch {
		case q == `"` && line[j] == '\\':
			j++
		case q == "'" && strings.HasPrefix(line[j:], "''"):
			j++
		case line[j] == q[0]:
			return j + 1
		}
	}
	return -1
}

// ours is the set of the strings in the JSON values vs: what render
// writes there, shown as it is.
func ours(vs ...[]byte) map[string]bool {
	set := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			set[v] = true
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, b := range vs {
		var v any
		if json.Unmarshal(b, &v) == nil {
			walk(v)
		}
	}
	return set
}

// recordOurs is what the records in states hold but each one's "was"
// (the text of the user's file an insert replaced): render's own.
func recordOurs(states ...[]byte) map[string]bool {
	var own [][]byte
	for _, b := range states {
		st, err := fingerprint.ParseState(b)
		if err != nil {
			continue
		}
		for name, r := range st.Targets {
			r.Was = ""
			st.Targets[name] = r
		}
		own = append(own, st.Marshal())
	}
	return ours(own...)
}
