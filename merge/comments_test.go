package merge

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tailscale/hujson"
)

// Comments the user wrote around the spot where the entry goes: an insert
// never puts the entry inside one, and removing the entry again gives back
// the original bytes exactly (a comment attached to a neighbour stays with
// it). Each case failed before the splice was comment-aware.
func TestInsertAndRemoveRespectComments(t *testing.T) {
	cases := []struct {
		name, in string
		path     []string
	}{
		{"block comment starting on the top brace's line", "{ /* my settings\n     for work */\n  \"theme\": \"x\"\n}\n", []string{"mcp", "mempalace"}},
		{"block comment the only thing in mcp", "{\n  \"mcp\": { /* servers\n  go here */ }\n}\n", []string{"mcp", "mempalace"}},
		{"block comment spanning lines before the only member of mcp", "{\n  \"mcp\": { /* a\n     b */\n    \"other\": {\"type\": \"local\"}\n  }\n}\n", []string{"mcp", "mempalace"}},
		{"comment before a neighbour on one line", "{\"mcp\": { /* keep me */ \"other\": {\"type\": \"local\"} }}\n", []string{"mcp", "mempalace"}},
		{"line comment on the brace's line", "{ // top\n  \"mcp\": { // servers\n    \"other\": 1\n  }\n}\n", []string{"mcp", "mempalace"}},
		{"trailing spaces after the brace", "{\n  \"mcp\": {   \n    \"other\": 1\n  }\n}\n", []string{"mcp", "mempalace"}},
		{"comment with a fake newline marker", "{\n  \"mcp\": { /* \" // not a comment end */\n    \"other\": 1\n  }\n}\n", []string{"mcp", "mempalace"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDoc([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			parentExisted, _ := d.Has(c.path[:len(c.path)-1]...)
			if err := d.Set(entry, c.path...); err != nil {
				t.Fatal(err)
			}
			out := d.Bytes()
			// Standard JSON of the result must hold the entry: if it went
			// into a comment, Standardize drops it.
			std, err := hujson.Standardize(bytes.Clone(out))
			if err != nil {
				t.Fatalf("result does not parse: %v\n%s", err, out)
			}
			v, _ := hujson.Parse(std)
			if v.Find("/"+strings.Join(c.path, "/")+"/type") == nil {
				t.Fatalf("the entry is not in the parsed result (spliced into a comment?):\n%s", out)
			}
			for _, comment := range comments(c.in) {
				if !strings.Contains(string(out), comment) {
					t.Fatalf("comment %q lost or split:\n%s", comment, out)
				}
			}
			if ok, err := d.Delete(c.path...); err != nil || !ok {
				t.Fatalf("Delete = %v, %v", ok, err)
			}
			if !parentExisted { // Set created it: take it away too
				d.Delete(c.path[:len(c.path)-1]...)
			}
			if got := string(d.Bytes()); got != c.in {
				t.Fatalf("insert then remove changed the file:\ngot  %q\nwant %q", got, c.in)
			}
		})
	}
}

// comments returns the comments of src, as written.
func comments(src string) []string {
	var out []string
	v, err := hujson.Parse([]byte(src))
	if err != nil {
		return nil
	}
	for x := range v.All() {
		for _, extra := range []hujson.Extra{x.BeforeExtra, x.AfterExtra} {
			s := string(extra)
			for {
				i := strings.Index(s, "/")
				if i < 0 || i+1 >= len(s) {
					break
				}
				end := len(s)
				switch s[i+1] {
				case '*':
					end = i + 2 + strings.Index(s[i+2:], "*/") + 2
				case '/':
					if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
						end = i + j
					}
				}
				out = append(out, s[i:end])
				s = s[end:]
			}
		}
	}
	return out
}

// What opencode accepts, ParseDoc accepts, and an edit keeps: a UTF-8 byte
// order mark and a last-line // comment without a final newline.
func TestBOMAndFinalCommentKept(t *testing.T) {
	for _, in := range []string{
		"\ufeff{\n  \"theme\": \"x\"\n}\n",
		"{\n  \"theme\": \"x\"\n}\n// the end",
		"\ufeff{\"theme\": \"x\"} // the end",
	} {
		d, err := ParseDoc([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if err := d.Set(entry, "mcp", "mempalace"); err != nil {
			t.Fatal(err)
		}
		out := string(d.Bytes())
		if strings.HasPrefix(in, "\ufeff") != strings.HasPrefix(out, "\ufeff") || strings.Count(out, "\ufeff") > 1 {
			t.Errorf("%q: byte order mark not kept as it was:\n%q", in, out)
		}
		if strings.HasSuffix(in, "the end") && !strings.HasSuffix(out, "// the end") {
			t.Errorf("%q: final comment changed:\n%q", in, out)
		}
		if ok, _ := d.Delete("mcp", "mempalace"); !ok {
			t.Fatal("no entry to delete")
		}
	}
}

// A value of the wrong type on the path is named with its line and
// column, and how to correct it (render adds the file's name).
func TestNotObjectNamesLineAndColumn(t *testing.T) {
	for in, want := range map[string]string{
		"{\n  \"mcp\": null\n}":         "line 2, column 10: mcp is null, not an object (fix: make mcp an object, {...}, or remove it)",
		"{\n  \"mcp\": [1]\n}":          "line 2, column 10: mcp is an array, not an object (fix: make mcp an object, {...}, or remove it)",
		"{\n  \"mcp\": \"x\"\n}":        "line 2, column 10: mcp is a string, not an object (fix: make mcp an object, {...}, or remove it)",
		"{\"mcp\": {\"mempalace\": 1}}": "",
	} {
		d, err := ParseDoc([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Get("mcp", "mempalace")
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", in, err)
			}
			continue
		}
		if err == nil || err.Error() != want {
			t.Errorf("%q: err = %v, want %q", in, err, want)
		}
	}
	if _, err := ParseDoc([]byte("\n [1]")); err == nil || err.Error() != "line 2, column 2: the top-level value is an array, not an object (fix: make the file one object, {...})" || !errors.Is(err, ErrNotObject) {
		t.Errorf("top-level array: %v", err)
	}
}

// RestoreEmpty gives an empty map back the text it had before an insert
// only where what is there now differs from it in white space (JSON) or
// in how the empty value is written (YAML): a comment added since stays.
func TestRestoreEmpty(t *testing.T) {
	for _, c := range []struct{ in, was, want string }{
		{"{\n}\n", "{}", "{}\n"},
		{"{\"mcp\":{\n}}", "{ }", "{\"mcp\":{ }}"},
		{"{\n  // mine\n}\n", "{}", "{\n  // mine\n}\n"},
		{"{\"a\": 1}", "{}", "{\"a\": 1}"},
	} {
		d, err := ParseDoc([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		path := []string{}
		if strings.Contains(c.in, "mcp") {
			path = []string{"mcp"}
		}
		if _, err := d.RestoreEmpty(c.was, path...); err != nil || string(d.Bytes()) != c.want {
			t.Errorf("JSON %q with %q: %q, %v; want %q", c.in, c.was, d.Bytes(), err, c.want)
		}
	}
	for _, c := range []struct{ in, was, want string }{
		{"a: 1\nextensions: {}\n", "extensions:", "a: 1\nextensions:\n"},
		{"extensions: {}  # none\r\n", "extensions: ~ # none", "extensions: ~ # none\r\n"},
		{"extensions: {} # mine\n", "extensions:", "extensions: {} # mine\n"},
		{"extensions:\n  a: 1\n", "extensions:", "extensions:\n  a: 1\n"},
		{"mcpServers: []\n", "mcpServers: [ ]", "mcpServers: [ ]\n"},
	} {
		d, err := ParseYAML([]byte(c.in), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.RestoreEmpty(c.was, strings.Fields(strings.Split(c.was, ":")[0])...); err != nil || string(d.Bytes()) != c.want {
			t.Errorf("YAML %q with %q: %q, %v; want %q", c.in, c.was, d.Bytes(), err, c.want)
		}
	}
}
