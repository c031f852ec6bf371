package merge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fingerprint"
)

// The three rungs' entries for Continue (a named list item) and Goose (a
// mapping member), shaped as the harness records write them.
var (
	yamlRungs = map[string][][]byte{
		"name": {
			[]byte(`{"name": "mempalace", "command": "mempalace-mcp"}`),
			[]byte(`{"name": "mempalace", "type": "streamable-http", "url": "https://palace.example.org/mcp", "requestOptions": {"headers": {"Authorization": "Bearer ${{ secrets.MEMPALACE_REMOTE_TOKEN }}"}}}`),
			[]byte(`{"name": "mempalace", "command": "devbox-config", "args": ["edge"], "env": {"MEMPALACE_EDGE_HARNESS": "continue"}}`),
		},
		"": {
			[]byte(`{"name": "mempalace", "type": "stdio", "cmd": "mempalace-mcp", "args": [], "enabled": true, "timeout": 300}`),
			[]byte(`{"name": "mempalace", "type": "streamable_http", "uri": "https://palace.example.org/mcp", "headers": {"Authorization": "Bearer ${MEMPALACE_REMOTE_TOKEN}"}, "enabled": true}`),
			[]byte(`{"name": "mempalace", "type": "stdio", "cmd": "devbox-config", "args": ["edge"], "envs": {"MEMPALACE_EDGE_HARNESS": "goose"}, "enabled": true}`),
		},
	}
	yamlKeys = map[string]string{"name": "mcpServers", "": "extensions"}
)

// yamlSeeds are configs of the kind people keep: comments everywhere,
// compact and indented sequences, anchors, CRLF, an empty collection, a
// null parent, a document marker, directives (%YAML 1.2, which Continue's
// cn loads).
var yamlSeeds = []string{
	"",
	"# only a comment\n",
	"name: my config # top\nversion: 1.0.0\nschema: v1\n\n# models first\nmodels:\n  - name: gpt # m\n    provider: openai\n    model: gpt-4o\n\nmcpServers:\n  # the memory server\n  - name: memory # mine\n    command: npx\n    args: [-y, \"@modelcontextprotocol/server-memory\"]\n  # trailing note\n\n# rules\nrules: []\n",
	"name: c\nmcpServers:\n- name: memory\n  command: npx\n- name: other\n  url: http://x/mcp\nrules:\n- be nice\n",
	"mcpServers: []\nname: c\n",
	"mcpServers:\nname: c\n",
	"extensions:\n  developer:\n    bundled: true\n    enabled: true # keep\n    name: developer\n    timeout: 300\n    type: builtin\n  # the memory one\n  memory:\n    cmd: npx\n    args:\n    - -y\n    - \"@modelcontextprotocol/server-memory\"\n    enabled: true\n    type: stdio\nGOOSE_MODEL: gpt-4o\nGOOSE_PROVIDER: openai\n",
	"extensions: {}\n",
	"base: &b\n  enabled: true\nextensions:\n  dev: *b\n",
	"---\nname: c\r\nmcpServers:\r\n  - name: memory\r\n    command: npx\r\n",
	"%YAML 1.2\n---\nname: c\nmcpServers:\n  - name: memory\n    command: npx\n",
	"# a comment first\r\n%YAML 1.1\r\n%TAG !e! tag:example.com,2000:\r\n--- # the config\r\nextensions:\r\n  memory:\r\n    cmd: npx\r\n",
	"extensions:\n    indented4:\n        cmd: x\nmcpServers:\n    -   name: four\n        command: y\n",
	"extensions:\n  ? dev\n  : enabled: true\n    cmd: x\n",
	"mcpServers:\n  - name: mempalace\n    command: old # ours\n  - name: z\n    command: z\nextensions:\n  mempalace:\n    cmd: old\n",
}

func TestYAMLRefusesWhatItCannotSplice(t *testing.T) {
	for _, c := range []struct{ in, listKey, key, want string }{
		{"mcpServers: [{name: a}]\n", "name", "mcpServers", "line 1, column 13: mcpServers is written in flow style ({…} or […]); render edits only block style (fix: rewrite it as a block"},
		{"{extensions: {}}\n", "", "extensions", "line 1, column 1: the document is written in flow style"},
		{"extensions: {a: {cmd: x}}\n", "", "extensions", "line 1, column 13: extensions is written in flow style"},
		{"mcpServers:\n  memory:\n    command: x\n", "name", "mcpServers", "is a mapping, not the list"},
		{"extensions:\n  - a\n", "", "extensions", "is not a mapping"},
		{"- a\n", "", "extensions", "top-level value is not a mapping"},
		{"a: 1\n---\nb: 2\n", "", "extensions", "line 2, column 1: a second YAML document"},
		{"a: [1,\n", "", "extensions", "line "},
	} {
		d, err := ParseYAML([]byte(c.in), c.listKey)
		if err == nil {
			err = d.Set([]byte(`{"name": "mempalace"}`), c.key, "mempalace")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

func TestYAMLDuplicates(t *testing.T) {
	d, err := ParseYAML([]byte("mcpServers:\n  - name: mempalace\n  - name: mempalace\n"), "name")
	if err != nil {
		t.Fatal(err)
	}
	if dup := d.Duplicates("mcpServers", "mempalace"); dup == nil || dup.Line != 3 {
		t.Fatalf("duplicate item not reported: %v", dup)
	}
}

// Inserting into a compact sequence (items at the key's indentation) and
// into an indented one keeps the neighbours' style and bytes.
func TestYAMLInsertKeepsStyle(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"mcpServers:\n- name: memory\n  command: npx\nrules: []\n",
			"mcpServers:\n- name: memory\n  command: npx\n- name: mempalace\n  command: mempalace-mcp\nrules: []\n"},
		{"mcpServers:\n    -   name: four\n        command: y\n",
			"mcpServers:\n    -   name: four\n        command: y\n    - name: mempalace\n      command: mempalace-mcp\n"},
		{"mcpServers: [] # none yet\nname: c\n",
			"mcpServers: # none yet\n  - name: mempalace\n    command: mempalace-mcp\nname: c\n"},
		{"name: c", "name: c\nmcpServers:\n  - name: mempalace\n    command: mempalace-mcp"},
		{"name: c\r\n", "name: c\r\nmcpServers:\r\n  - name: mempalace\r\n    command: mempalace-mcp\r\n"},
	} {
		d, err := ParseYAML([]byte(c.in), "name")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Set(yamlRungs["name"][0], "mcpServers", "mempalace"); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := string(d.Bytes()); got != c.want {
			t.Errorf("%q:\ngot  %q\nwant %q", c.in, got, c.want)
		}
	}
}

// Goose's entry is added beside another extension written as a ? complex
// key, indented as that entry's "?", not as its key after it (attack98
// F5: refused as an edit that "would not read back (please report)").
func TestYAMLInsertBesideAComplexKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"extensions:\n  ? dev\n  : enabled: true\n    cmd: x\n",
			"extensions:\n  ? dev\n  : enabled: true\n    cmd: x\n  mempalace:\n    name: mempalace\n    cmd: mempalace-mcp\n"},
		{"extensions:\n  ?\n    dev\n  : cmd: x\n",
			"extensions:\n  ?\n    dev\n  : cmd: x\n  mempalace:\n    name: mempalace\n    cmd: mempalace-mcp\n"},
		{"extensions:\n    # why?\n    dev: {cmd: x}\n",
			"extensions:\n    # why?\n    dev: {cmd: x}\n    mempalace:\n      name: mempalace\n      cmd: mempalace-mcp\n"},
	} {
		d, err := ParseYAML([]byte(c.in), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Set([]byte(`{"name": "mempalace", "cmd": "mempalace-mcp"}`), "extensions", "mempalace"); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := string(d.Bytes()); got != c.want {
			t.Errorf("%q:\ngot  %q\nwant %q", c.in, got, c.want)
		}
	}
}

// FuzzYAMLRoundTrip is FuzzRoundTrip for YAML: set the entry for
// solitary, remote, edge, solitary and remote again.
//   - Every result parses and holds the entry as set; every comment of the
//     input is still in the file.
//   - Everything outside the entry is identical across renditions (the
//     entry removed, all renditions give the same bytes), and coming back
//     to a rung gives back its exact bytes; setting it again changes
//     nothing.
//   - Removing an entry inserted into a non-empty parent gives back the
//     input exactly.
func FuzzYAMLRoundTrip(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, list bool) {
		listKey := ""
		if list {
			listKey = "name"
		}
		key, rungs := yamlKeys[listKey], yamlRungs[listKey]
		d, err := ParseYAML(in, listKey)
		if err != nil {
			return
		}
		if _, err := d.Get(key, "mempalace"); err != nil || d.Duplicates(key, "mempalace") != nil {
			return
		}
		had, _ := d.Has(key, "mempalace")
		parent, _ := d.Get(key)
		parentFull := len(parent) > 2 && (parent[0] == '[' || parent[0] == '{') && !had
		var renditions [][]byte
		var outside []byte
		for i, e := range [][]byte{rungs[0], rungs[1], rungs[2], rungs[0], rungs[1]} {
			if err := d.Set(e, key, "mempalace"); err != nil {
				if i == 0 {
					return // refused before any edit (flow style, a scalar parent…)
				}
				t.Fatalf("rung %d: Set: %v\n%q", i, err, d.Bytes())
			}
			out := d.Bytes()
			got, err := d.Get(key, "mempalace")
			if err != nil {
				t.Fatalf("rung %d: %v\n%s", i, err, out)
			}
			if same, _ := fingerprint.Equal(got, e); !same {
				t.Fatalf("rung %d: entry reads back as %s, want %s:\n%s", i, got, e, out)
			}
			if !had {
				for _, c := range yamlComments(in) {
					if !bytes.Contains(out, c) {
						t.Fatalf("rung %d: comment %q lost:\n%q\n%q", i, c, in, out)
					}
				}
			}
			again, _ := ParseYAML(out, listKey)
			if err := again.Set(e, key, "mempalace"); err != nil || !bytes.Equal(again.Bytes(), out) {
				t.Fatalf("rung %d: a second Set changed the bytes (%v):\n%q\n%q", i, err, out, again.Bytes())
			}
			if _, err := again.Delete(key, "mempalace"); err != nil {
				t.Fatalf("rung %d: Delete: %v\n%q", i, err, out)
			}
			if i == 0 {
				outside = again.Bytes()
			} else if !bytes.Equal(again.Bytes(), outside) {
				t.Fatalf("rung %d: bytes outside the entry changed:\n%q\n%q", i, outside, again.Bytes())
			}
			renditions = append(renditions, out)
		}
		if !bytes.Equal(renditions[3], renditions[0]) || !bytes.Equal(renditions[4], renditions[1]) {
			t.Fatalf("coming back to a rung gave other bytes:\n%q\n%q", renditions[0], renditions[3])
		}
		if parentFull && !bytes.Equal(outside, in) {
			t.Fatalf("removing the inserted entry did not give back the input:\n%q\n%q", in, outside)
		}
	})
}

// yamlComments are the input's comment texts ("# …" to the line's end).
func yamlComments(in []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(in, []byte("\n")) {
		if i := bytes.Index(l, []byte(" #")); i >= 0 {
			out = append(out, bytes.TrimRight(l[i+1:], "\r"))
		} else if t := bytes.TrimLeft(l, " "); bytes.HasPrefix(t, []byte("#")) {
			out = append(out, bytes.TrimRight(t, "\r"))
		}
	}
	return out
}

// Indirect finds the entry behind an alias or a merge key, and only it.
func TestYAMLIndirect(t *testing.T) {
	for _, c := range []struct {
		src, listKey string
		path         []string
		line, col    int // 0: none
	}{
		{"m: &m\n  name: mempalace\nmcpServers:\n  - *m\n", "name", []string{"mcpServers", "mempalace"}, 4, 5},
		{"m: &m\n  name: mempalace\nmcpServers:\n  - <<: *m\n    command: x\n", "name", []string{"mcpServers", "mempalace"}, 4, 5},
		{"m: &m\n  name: other\nmcpServers:\n  - *m\n", "name", []string{"mcpServers", "mempalace"}, 0, 0},
		{"b: &b\n  mempalace: {cmd: x}\nextensions:\n  <<: *b\n", "", []string{"extensions", "mempalace"}, 4, 3},
		{"b: &b\n  mempalace: {cmd: x}\nc: &c\n  other: {}\nextensions:\n  <<: [*c, *b]\n", "", []string{"extensions", "mempalace"}, 6, 3},
		{"b: &b\n  mempalace: {cmd: x}\nextensions:\n  <<: *b\n  mempalace: {cmd: y}\n", "", []string{"extensions", "mempalace"}, 0, 0},
		{"b: &b\n  other: {cmd: x}\nextensions:\n  <<: *b\n", "", []string{"extensions", "mempalace"}, 0, 0},
		{"b: &b\n  other: {cmd: x}\nextensions: *b\n", "", []string{"extensions", "mempalace"}, 3, 13},
	} {
		d, err := ParseYAML([]byte(c.src), c.listKey)
		if err != nil {
			t.Fatal(err)
		}
		e := d.Indirect(c.path...)
		switch {
		case c.line == 0 && e != nil:
			t.Errorf("%q: want none, got %d:%d", c.src, e.Line, e.Col)
		case c.line != 0 && (e == nil || e.Line != c.line || e.Col != c.col):
			t.Errorf("%q: want %d:%d, got %+v", c.src, c.line, c.col, e)
		}
	}
}

// A document with directives (%YAML 1.2, which Continue's cn loads, or a
// %TAG) and its --- marker is one document: render edits it, the
// directives and the marker stay byte for byte, and removing the entry
// gives the file back.
func TestYAMLDirectives(t *testing.T) {
	for _, in := range []string{
		"%YAML 1.2\n---\nname: c\nmcpServers:\n  - name: memory\n    command: npx\n",
		"# mine\r\n%YAML 1.1\r\n%TAG !e! tag:example.com,2000:\r\n--- # the config\r\nname: c\r\nmcpServers:\r\n  - name: memory\r\n    command: npx\r\n",
	} {
		d, err := ParseYAML([]byte(in), "name")
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if err := d.Set(yamlRungs["name"][1], "mcpServers", "mempalace"); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		head := in[:strings.Index(in, "name: c")]
		if out := string(d.Bytes()); !strings.HasPrefix(out, head) || !strings.Contains(out, "- name: mempalace") {
			t.Fatalf("%q became %q", in, out)
		}
		if ok, err := d.Delete("mcpServers", "mempalace"); !ok || err != nil || string(d.Bytes()) != in {
			t.Fatalf("%q: removing the entry gave %q (%v %v)", in, d.Bytes(), ok, err)
		}
	}
}
