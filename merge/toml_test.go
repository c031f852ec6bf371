package merge

import (
	"bytes"
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
// with the line, never rewritten.
func TestTOMLRefusesOtherForms(t *testing.T) {
	for in, want := range map[string]string{
		"mcp_servers.mempalace.command = \"x\"\n":                                             "dotted keys (line 1)",
		"[mcp_servers]\nmempalace = { command = \"x\" }\n":                                    "inline table or dotted keys (line 2)",
		"[mcp_servers.mempalace]\nurl = \"u\"\n[a]\n[mcp_servers.mempalace.env]\nA = \"1\"\n": "split into parts",
		"[[mcp_servers.mempalace]]\nurl = \"u\"\n":                                            "array of tables",
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

// FuzzTOMLSet: on any TOML the splice accepts, the output parses, holds the
// value, keeps every byte outside the table, changes no other key, and
// Delete leaves the other keys as they were.
func FuzzTOMLSet(f *testing.F) {
	for _, s := range []string{"", "a = 1\n", codexConfig, "[mcp_servers.mempalace]\r\nurl = 'x' # c\r\n", "x = \"\"\"\n[mcp_servers.mempalace]\n\"\"\"\n", "[mcp_servers]\n[mcp_servers.mempalace]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ParseTOML(in)
		if err != nil {
			return
		}
		start, end, found, err := d.span([]string{"mcp_servers", "mempalace"})
		if err != nil {
			return
		}
		before := withoutEntry(t, in)
		if err := d.Set(tomlEntry, "mcp_servers", "mempalace"); err != nil {
			return // e.g. mcp_servers is an inline table: nothing written
		}
		out := d.Bytes()
		if found {
			if !bytes.HasPrefix(out, in[:start]) || !bytes.HasSuffix(out, in[end:]) {
				t.Fatalf("bytes outside the table changed:\n%q\n%q", in, out)
			}
		} else if !bytes.HasPrefix(out, in) {
			t.Fatalf("insert changed existing bytes:\n%q\n%q", in, out)
		}
		got, _ := d.Get("mcp_servers", "mempalace")
		if same, _ := fingerprint.Equal(got, tomlEntry); !same {
			t.Fatalf("read back %s from %q", got, out)
		}
		if after := withoutEntry(t, out); !reflect.DeepEqual(before, after) {
			t.Fatalf("other keys changed:\n%v\n%v", before, after)
		}
		again := d.Bytes()
		if err := d.Set(tomlEntry, "mcp_servers", "mempalace"); err != nil || !bytes.Equal(d.Bytes(), again) {
			t.Fatalf("a second Set changed the file: %v\n%q\n%q", err, again, d.Bytes())
		}
		if _, err := d.Delete("mcp_servers", "mempalace"); err != nil {
			t.Fatal(err)
		}
		if after := withoutEntry(t, d.Bytes()); !reflect.DeepEqual(before, after) {
			t.Fatalf("delete changed other keys:\n%v\n%v", before, after)
		}
	})
}

func withoutEntry(t *testing.T, b []byte) map[string]any {
	m := map[string]any{}
	if err := toml.Unmarshal(b, &m); err != nil {
		t.Fatalf("does not parse: %v\n%q", err, b)
	}
	if s, ok := m["mcp_servers"].(map[string]any); ok {
		delete(s, "mempalace")
		if len(s) == 0 {
			delete(m, "mcp_servers")
		}
	}
	return m
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
