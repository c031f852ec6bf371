package merge

import (
	"bytes"
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/joakimp/devbox-config/fingerprint"
)

var tomlEntry = []byte(`{"url":"https://palace.example.org/mcp","bearer_token_env_var":"MEMPALACE_REMOTE_TOKEN","env":{"B":"2","A":"x y"},"args":["edge","--x"]}`)

const codexConfig = `# Codex config: my comments stay
model = "o4-mini"   # trailing comment

[mcp_servers.memory]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]

[mcp_servers.mempalace]
# an old entry, with a comment inside
command = "mempalace-mcp"
env_vars = [
  "MEMPALACE_PALACE_PATH",
]   # multi-line array

[mcp_servers.mempalace.env]
X = "1"
# this comment sits above the next table and belongs to it
[profiles.fast]
model = "o3"
`

// Replacing a table keeps every byte before its header and from the line
// after its last key on; the table reads back as the value set.
func TestTOMLSetReplacesOnlyTheTable(t *testing.T) {
	d, err := ParseTOML([]byte(codexConfig))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := d.Get("mcp_servers", "mempalace")
	if !strings.Contains(string(old), `"env":{"X":"1"}`) {
		t.Fatalf("Get: %s", old)
	}
	if err := d.Set(tomlEntry, "mcp_servers", "mempalace"); err != nil {
		t.Fatal(err)
	}
	want := codexConfig[:strings.Index(codexConfig, "[mcp_servers.mempalace]")] +
		"[mcp_servers.mempalace]\n" +
		"url = \"https://palace.example.org/mcp\"\n" +
		"bearer_token_env_var = \"MEMPALACE_REMOTE_TOKEN\"\n" +
		"env = { A = \"x y\", B = \"2\" }\n" +
		"args = [\"edge\", \"--x\"]\n" +
		codexConfig[strings.Index(codexConfig, "# this comment sits above"):]
	if got := string(d.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	got, _ := d.Get("mcp_servers", "mempalace")
	if same, _ := fingerprint.Equal(got, tomlEntry); !same {
		t.Fatalf("read back %s", got)
	}
}

// Insert appends the table after a blank line; Delete takes exactly that
// away again, so a flip there and back leaves the file byte for byte.
func TestTOMLInsertDeleteRoundTrip(t *testing.T) {
	for _, in := range []string{"", "model = \"o3\"\n", "# only a comment\r\n[a]\r\nb = 1\r\n", "[mcp_servers.other]\ncommand = \"x\"\n"} {
		d, err := ParseTOML([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Set(tomlEntry, "mcp_servers", "mempalace"); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !bytes.HasPrefix(d.Bytes(), []byte(in)) {
			t.Errorf("%q: insert changed bytes before the table:\n%s", in, d.Bytes())
		}
		if strings.Contains(in, "\r\n") && strings.Count(string(d.Bytes()), "\n") != strings.Count(string(d.Bytes()), "\r\n") {
			t.Errorf("%q: CRLF file got LF lines:\n%q", in, d.Bytes())
		}
		if ok, err := d.Delete("mcp_servers", "mempalace"); !ok || err != nil {
			t.Fatalf("%q: delete %v %v", in, ok, err)
		}
		if got := string(d.Bytes()); got != in {
			t.Errorf("round trip of %q gave %q", in, got)
		}
	}
}

// Entries render cannot splice without touching other bytes are refused
// at their line and column, with the fix, never rewritten.
func TestTOMLRefusesOtherForms(t *testing.T) {
	for in, want := range map[string]string{
		"mcp_servers.mempalace.command = \"x\"\n":                                             "line 1, column 1: mcp_servers.mempalace is set with an inline table or dotted keys",
		"[mcp_servers]\nmempalace = { command = \"x\" }\n":                                    "line 2, column 1: mcp_servers.mempalace is set with an inline table or dotted keys",
		"[mcp_servers.mempalace]\nurl = \"u\"\n[a]\n[mcp_servers.mempalace.env]\nA = \"1\"\n": "split into parts",
		"[[mcp_servers.mempalace]]\nurl = \"u\"\n":                                            "line 1, column 1: mcp_servers.mempalace is an array of tables ([[...]]), not one table (fix: ",
		"a = 1\n\n  [[mcp_servers.mempalace]]\nurl = \"u\"\n":                                 "line 3, column 3: mcp_servers.mempalace is an array of tables",
		"model = \"o3\"\nmcp_servers = { other = { command = \"foo\" } }\n":                   "line 2, column 1: mcp_servers is set as an inline table or a value, so render cannot add a [mcp_servers.mempalace] table (fix: write each entry",
		"model = \"o3\"\nmcp_servers = 5\n":                                                   "line 2, column 1: mcp_servers is set as an inline table or a value",
		"[[mcp_servers]]\nname = \"x\"\n":                                                     "line 1, column 1: mcp_servers is an array of tables ([[mcp_servers]]), so render cannot add a [mcp_servers.mempalace] table (fix: write each entry of it as its own [mcp_servers.NAME] table by hand",
		"a = 1\n[[mcp_servers]]\nname = \"x\"\n[[mcp_servers]]\nname = \"y\"\n":               "line 2, column 1: mcp_servers is an array of tables",
	} {
		d, err := ParseTOML([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		err = d.Set(tomlEntry, "mcp_servers", "mempalace")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
		if !bytes.Equal(d.Bytes(), []byte(in)) {
			t.Errorf("%q: changed on a refused edit", in)
		}
	}
	if _, err := ParseTOML([]byte("a = 1\nb = \n")); err == nil || !strings.Contains(err.Error(), "line 2, column") {
		t.Errorf("a syntax error names line and column: %v", err)
	}
}

// The splice's rule, written down here from toml.go's doc comments and not
// from its code, so the tests below do not ask span() where the table is:
//
//   - the table starts at its header's '['; indentation before the header
//     is not the table's and stays;
//   - it ends with the newline of its last header or key/value line, its
//     sub-tables' included; comment and blank lines between those lines are
//     the table's;
//   - comment and blank lines after that last line belong to what follows
//     (the next header, or the end of the file) and stay;
//   - Delete takes, with the table, one empty line right before its header
//     (the one an insert adds) or a file's lone leading newline;
//   - an insert goes at the end, after a newline if the file lacks a final
//     one and then one empty line; a file of only whitespace gets just the
//     table;
//   - lines the splice writes end in CRLF when the file has any CRLF.
//
// A spliceCase is a document cut at those boundaries: the test, not the
// code, knows where each part starts.
type spliceCase struct {
	prefix string // anything before the table, ending in a newline (or empty)
	indent string // blanks before the header's '['
	core   string // '[mcp_servers.mempalace]' to the newline of its last header or key/value line
	tail   string // comment and blank lines after that, before the next header
	suffix string // the next header, maybe after comment and blank lines, and the rest; or only comment/blank lines
}

func (c spliceCase) doc() string { return c.prefix + c.indent + c.core + c.tail + c.suffix }

// newTable is what Set writes for tomlEntry: its keys in the JSON's order,
// the nested object as an inline table with sorted keys.
func newTable(nl string) string {
	return "[mcp_servers.mempalace]" + nl +
		`url = "https://palace.example.org/mcp"` + nl +
		`bearer_token_env_var = "MEMPALACE_REMOTE_TOKEN"` + nl +
		`env = { A = "x y", B = "2" }` + nl +
		`args = ["edge", "--x"]` + nl
}

// tomlEntry as a TOML reader sees it.
var tomlEntryValue = map[string]any{
	"url":                  "https://palace.example.org/mcp",
	"bearer_token_env_var": "MEMPALACE_REMOTE_TOKEN",
	"env":                  map[string]any{"A": "x y", "B": "2"},
	"args":                 []any{"edge", "--x"},
}

func docNewline(doc string) string {
	if strings.Contains(doc, "\r\n") {
		return "\r\n"
	}
	return "\n"
}

// afterDelete is what stays of before+table: before, less the one empty
// line (or lone leading newline) Delete takes with the table.
func afterDelete(before, nl string) string {
	if strings.HasSuffix(before, nl+nl) || before == nl {
		return before[:len(before)-len(nl)]
	}
	return before
}

// afterInsert is doc with the new table appended.
func afterInsert(doc string) string {
	nl := docNewline(doc)
	if strings.Trim(doc, " \t\r\n") == "" {
		return doc + newTable(nl)
	}
	if !strings.HasSuffix(doc, "\n") {
		// the file keeps its ending: the table goes after a line break
		// and a blank line, and ends without one
		return doc + nl + nl + strings.TrimSuffix(newTable(nl), nl)
	}
	return doc + nl + newTable(nl)
}

// onlyCommentLines reports whether every line of s is blank or a comment.
func onlyCommentLines(s string) bool {
	for _, l := range strings.SplitAfter(s, "\n") {
		if l = strings.Trim(l, " \t\r\n"); l != "" && l[0] != '#' {
			return false
		}
	}
	return true
}

// startsAtHeader reports whether s, past leading comment and blank lines,
// is empty or starts with a '[' header: at the top level after whole lines,
// a line starting with '[' can only be a header.
func startsAtHeader(s string) bool {
	for s != "" {
		l, rest, _ := strings.Cut(s, "\n")
		t := strings.TrimLeft(l, " \t")
		if strings.HasPrefix(t, "[") {
			return true
		}
		if t = strings.TrimRight(t, " \t\r"); t != "" && t[0] != '#' {
			return false
		}
		s = rest
	}
	return true
}

// parseTOML is go-toml's reading of b, or ok false.
func parseTOML(b string) (m map[string]any, ok bool) {
	m = map[string]any{}
	return m, toml.Unmarshal([]byte(b), &m) == nil
}

// mempalaceOf is mcp_servers.mempalace in m, or nil.
func mempalaceOf(m map[string]any) any {
	s, _ := m["mcp_servers"].(map[string]any)
	return s["mempalace"]
}

// othersOf is m without mcp_servers.mempalace (and without mcp_servers if
// that leaves it empty), m itself left as it was.
func othersOf(m map[string]any) map[string]any {
	o := maps.Clone(m)
	if s, ok := o["mcp_servers"].(map[string]any); ok {
		s = maps.Clone(s)
		delete(s, "mempalace")
		if len(s) == 0 {
			delete(o, "mcp_servers")
		} else {
			o["mcp_servers"] = s
		}
	}
	return o
}

// sameTOML is reflect.DeepEqual with nan equal to nan.
func sameTOML(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameTOML(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameTOML(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	return reflect.DeepEqual(a, b)
}

// usable says why c is not a document the rule above covers, or "".
func (c spliceCase) usable() string {
	switch {
	case c.prefix != "" && !strings.HasSuffix(c.prefix, "\n"):
		return "prefix does not end in a newline"
	case strings.Trim(c.indent, " \t") != "":
		return "indent is not blanks"
	case !onlyCommentLines(c.tail):
		return "tail has more than comment lines"
	case !startsAtHeader(c.suffix):
		return "suffix does not start at a header"
	}
	for _, part := range []string{c.prefix, c.suffix} {
		m, ok := parseTOML(part)
		if !ok {
			return "a part does not parse"
		}
		if mempalaceOf(m) != nil {
			return "a part has mcp_servers.mempalace"
		}
	}
	if _, ok := parseTOML(c.doc()); !ok {
		return "the document does not parse"
	}
	return ""
}

// checkSplice runs Set, Delete and an insert on c and holds each result to
// the bytes the rule gives and to go-toml's reading of them. The insert is
// also tried on each of more that parses (the fuzzed prefix as it came,
// without the final newline the case needs).
func checkSplice(t *testing.T, c spliceCase, more ...string) {
	t.Helper()
	doc := c.doc()
	nl := docNewline(doc)
	m, _ := parseTOML(doc)
	others := othersOf(m)
	path := []string{"mcp_servers", "mempalace"}

	holds := func(what, got, want string, value any, others map[string]any) {
		t.Helper()
		if got != want {
			t.Fatalf("%s of %q:\n got %q\nwant %q", what, doc, got, want)
		}
		m, ok := parseTOML(got)
		if !ok {
			t.Fatalf("%s of %q does not parse: %q", what, doc, got)
		}
		if v := mempalaceOf(m); !sameTOML(v, value) {
			t.Fatalf("%s of %q: mcp_servers.mempalace reads %v, want %v", what, doc, v, value)
		}
		if o := othersOf(m); !sameTOML(o, others) {
			t.Fatalf("%s of %q changed other keys:\n%v\n%v", what, doc, others, o)
		}
	}

	d, err := ParseTOML([]byte(doc))
	if err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	if err := d.Set(tomlEntry, path...); err != nil {
		t.Fatalf("Set on %q: %v", doc, err)
	}
	set := c.prefix + c.indent + newTable(nl) + c.tail + c.suffix
	deleted := afterDelete(c.prefix+c.indent, nl) + c.tail + c.suffix
	if c.tail+c.suffix == "" && !strings.HasSuffix(doc, "\n") {
		// the table is last, without a line break: the file keeps its
		// ending, and Delete takes the blank line's break away too
		set = strings.TrimSuffix(set, nl)
		if strings.HasSuffix(c.prefix+c.indent, nl+nl) {
			deleted = strings.TrimSuffix(deleted, nl)
		}
	}
	holds("Set", string(d.Bytes()), set, tomlEntryValue, others)
	if err := d.Set(tomlEntry, path...); err != nil {
		t.Fatalf("second Set on %q: %v", set, err)
	}
	holds("a second Set", string(d.Bytes()), set, tomlEntryValue, others)

	for _, from := range []string{doc, set} {
		d, _ := ParseTOML([]byte(from))
		if ok, err := d.Delete(path...); !ok || err != nil {
			t.Fatalf("Delete on %q: %v %v", from, ok, err)
		}
		holds("Delete", string(d.Bytes()), deleted, nil, others)
	}

	// Without the table (as Delete leaves it, the prefix on its own, more):
	// Set inserts, every old byte stays where it was, and Delete takes the
	// insert away again.
	for _, without := range append([]string{deleted, c.prefix}, more...) {
		m, ok := parseTOML(without)
		if !ok {
			continue
		}
		others := othersOf(m) // the prefix alone lacks the suffix's keys
		d, _ := ParseTOML([]byte(without))
		if err := d.Set(tomlEntry, path...); err != nil {
			t.Fatalf("insert into %q: %v", without, err)
		}
		ins := afterInsert(without)
		holds("insert", string(d.Bytes()), ins, tomlEntryValue, others)
		if ok, err := d.Delete(path...); !ok || err != nil {
			t.Fatalf("Delete on %q: %v %v", ins, ok, err)
		}
		back := afterDelete(strings.TrimSuffix(ins, newTable(docNewline(ins))), docNewline(ins))
		if !strings.HasSuffix(without, "\n") && strings.Trim(without, " \t\r\n") != "" {
			back = without // a file without a final line break: exactly
		}
		holds("Delete after insert", string(d.Bytes()), back, nil, others)
	}
}

// Which lines are the table's, case by case.
func TestTOMLSpliceBoundaries(t *testing.T) {
	for name, c := range map[string]spliceCase{
		"comments above the next header are its": {
			prefix: "model = \"o3\"\n\n",
			core:   "[mcp_servers.mempalace]\ncommand = \"x\"\n",
			tail:   "# about profiles\n\n",
			suffix: "# also about profiles\n[profiles.fast]\nmodel = \"o3\"\n",
		},
		"comments and blank lines between keys and sub-tables are the table's": {
			core: "[mcp_servers.mempalace]\n# inside\n\ncommand = \"x\"\n# still inside\n[mcp_servers.mempalace.env]\n\nX = \"1\"\n",
			tail: "# after\n",
		},
		"a last sub-table without keys ends the table": {
			prefix: "[mcp_servers]\n",
			core:   "[mcp_servers.mempalace]\nurl = 'u'\n[mcp_servers.mempalace.env]  # none yet\n",
			tail:   "   # indented, after\n",
			suffix: "[mcp_servers.other]\ncommand = \"y\"\n",
		},
		"a header alone": {
			core:   "[ mcp_servers . \"mempalace\" ] # c\n",
			suffix: "[a]\n",
		},
		"comments at the end of the file stay": {
			prefix: "a = 1\n",
			core:   "[mcp_servers.mempalace]\nx = [\n  1,\n] # multi-line\n",
			tail:   "# the end\n\n# really\n",
		},
		"no newline at the end": {
			prefix: "a = 1\n",
			core:   "[mcp_servers.mempalace]\nx = 1",
		},
		"indentation before the header stays": {
			prefix: "a = 1\n\n",
			indent: "  \t",
			core:   "[mcp_servers.mempalace]\nx = 1\n",
			suffix: "[b]\n",
		},
		"CRLF": {
			prefix: "# c\r\n\r\n",
			core:   "[mcp_servers.mempalace]\r\nx = 1\r\n",
			tail:   "\r\n# next\r\n",
			suffix: "[b]\r\ny = 2\r\n",
		},
		"a lone leading newline": {
			prefix: "\n",
			core:   "[mcp_servers.mempalace]\nx = 1\n",
		},
		"the header inside a string before the table": {
			prefix: "x = \"\"\"\n[mcp_servers.mempalace]\n\"\"\"\n",
			core:   "[mcp_servers.mempalace]\nx = 1\n",
			suffix: "[b]\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if why := c.usable(); why != "" {
				t.Fatal(why)
			}
			checkSplice(t, c)
		})
	}
}

// tableLines builds a [mcp_servers.mempalace] table from shape's bits and
// cuts it by the rule: core up to its last header or key/value line, tail
// the comment and blank lines after.
func tableLines(shape uint16) (indent, core, tail string) {
	nl := "\n"
	if shape&(1<<13) != 0 {
		nl = "\r\n"
	}
	type line struct {
		text string
		kv   bool // a header or key/value line
	}
	header := []string{"[mcp_servers.mempalace]", "[ mcp_servers . mempalace ]", `[mcp_servers."mempalace"]`, `[ "mcp_servers".'mempalace' ]`}[shape&3]
	if shape&(1<<3) != 0 {
		header += "  # the palace"
	}
	lines := []line{{header, true}}
	for _, o := range []struct {
		bit uint
		line
	}{
		{4, line{"# an old entry", false}},
		{5, line{`command = "mempalace-mcp"`, true}},
		{6, line{"", false}},
		{7, line{"env_vars = [" + nl + `  "MEMPALACE_PALACE_PATH",` + nl + "]   # multi-line array", true}},
		{8, line{"[mcp_servers.mempalace.env]" + nl + `X = "1"`, true}},
		{9, line{"[mcp_servers.mempalace.extra]", true}},
		{15, line{"# between" + nl + `Y = "2"`, true}},
		{10, line{"# belongs to what follows", false}},
		{11, line{"", false}},
		{12, line{"\t  # so does this", false}},
	} {
		if shape&(1<<o.bit) != 0 {
			lines = append(lines, o.line)
		}
	}
	last := 0
	for i, l := range lines {
		if l.kv {
			last = i
		}
	}
	for i, l := range lines {
		if i <= last {
			core += l.text + nl
		} else {
			tail += l.text + nl
		}
	}
	if shape&(1<<2) != 0 {
		indent = "  "
	}
	return indent, core, tail
}

// FuzzTOMLSet: a fuzzed prefix, a table the test writes (its shape fuzzed)
// and a fuzzed suffix from the next header on. Set must give exactly prefix
// + the new table + the comment lines after the old one + suffix; Delete
// exactly the parts without the table; an insert the old bytes followed by
// the table; each must read back with go-toml as it should.
func FuzzTOMLSet(f *testing.F) {
	prefixes := []string{"", " ", "\n", "a = 1", "a = 1\n", "model = \"o4-mini\"   # trailing comment\n\n", "# only a comment\r\n[a]\r\nb = 1\r\n", "[mcp_servers]\n", "[mcp_servers.other]\ncommand = \"x\"\n\n", "x = \"\"\"\n[mcp_servers.mempalace]\n\"\"\"\n"}
	suffixes := []string{"", "[profiles.fast]\nmodel = \"o3\"\n", "# this comment sits above the next table and belongs to it\n[profiles.fast]\nmodel = \"o3\"\n", "\r\n# c\r\n[a]\r\nb = 1\r\n", "# the end", "[mcp_servers.other]\nx = 1\n"}
	shapes := []uint16{0, 1<<4 | 1<<5 | 1<<7 | 1<<8 | 1<<10, 1<<5 | 1<<10 | 1<<11 | 1<<12, 1<<2 | 1<<9 | 1<<13 | 1<<15, 1 << 14, 3 | 1<<3 | 1<<4 | 1<<6}
	for i, p := range prefixes {
		for j, s := range suffixes {
			f.Add([]byte(p), shapes[(i+j)%len(shapes)], []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, prefix []byte, shape uint16, suffix []byte) {
		c := spliceCase{prefix: string(prefix), suffix: string(suffix)}
		if c.prefix != "" && !strings.HasSuffix(c.prefix, "\n") {
			c.prefix += "\n"
		}
		c.indent, c.core, c.tail = tableLines(shape)
		if shape&(1<<14) != 0 && c.tail == "" && c.suffix == "" {
			c.core = strings.TrimSuffix(strings.TrimSuffix(c.core, "\n"), "\r")
		}
		if c.usable() != "" {
			return
		}
		checkSplice(t, c, string(prefix))
	})
}

// Keys TOML cannot write bare are quoted, and read back the same.
func TestTOMLQuotesKeys(t *testing.T) {
	d, _ := ParseTOML(nil)
	v := []byte(`{"env":{"a.b":"1","c d":"2","ok_-9":"3"},"x y":true}`)
	if err := d.Set(v, "mcp_servers", "mem palace"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d.Bytes()), `[mcp_servers."mem palace"]`) || !strings.Contains(string(d.Bytes()), `"a.b" = "1"`) || !strings.Contains(string(d.Bytes()), `ok_-9 = "3"`) {
		t.Fatalf("%s", d.Bytes())
	}
	got, _ := d.Get("mcp_servers", "mem palace")
	if same, _ := fingerprint.Equal(got, v); !same {
		t.Fatalf("read back %s", got)
	}
	if ok, err := d.Delete("mcp_servers", "mem palace"); !ok || err != nil || len(d.Bytes()) != 0 {
		t.Fatalf("delete: %v %v %q", ok, err, d.Bytes())
	}
}

// An array of tables inside the entry ([[mcp_servers.mempalace.extra]]) is
// part of it, as a sub-table is: replaced and deleted with it, every
// other byte kept.
func TestTOMLSubArrayOfTablesIsPartOfTheTable(t *testing.T) {
	const head, tail = "model = \"o3\"\n\n", "[profiles.fast]\nmodel = \"o3\"\n"
	in := head + "[mcp_servers.mempalace]\ncommand = \"old\"\n[[mcp_servers.mempalace.extra]]\nx = 1\n[[mcp_servers.mempalace.extra]]\nx = 2\n" + tail
	d, err := ParseTOML([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Get("mcp_servers", "mempalace"); !strings.Contains(string(got), `"extra":[{"x":1},{"x":2}]`) {
		t.Fatalf("Get: %s", got)
	}
	if err := d.Set([]byte(`{"url":"u"}`), "mcp_servers", "mempalace"); err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.Bytes()), head+"[mcp_servers.mempalace]\nurl = \"u\"\n"+tail; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	d, _ = ParseTOML([]byte(in))
	if ok, err := d.Delete("mcp_servers", "mempalace"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if got := string(d.Bytes()); got != "model = \"o3\"\n"+tail {
		t.Fatalf("after delete:\n%s", got)
	}
	// With no [mcp_servers.mempalace] header, the table starts at "[[".
	d, _ = ParseTOML([]byte(head + "  [[mcp_servers.mempalace.extra]]\nx = 1\n" + tail))
	if err := d.Set([]byte(`{"url":"u"}`), "mcp_servers", "mempalace"); err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.Bytes()), head+"  [mcp_servers.mempalace]\nurl = \"u\"\n"+tail; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
