package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A YAML config that does not parse is named as every other config
// mistake is, FILE:LINE:COLUMN: what (fix: how), at the place a person
// must edit: the tab, the [ or { never closed, the quote never closed.
// Nothing is written: the file keeps its bytes and no other file appears.
// yamlFixes are the fixes of the mistakes that have their own, not the
// usual one about indentation and quotes (attack96 F5, F6).
var yamlFixes = map[string]string{
	"byte 0xFF is not UTF-8":                           "retype the character there, or convert the file to UTF-8",
	`"name" is named twice (first at line 1)`:          "keep one, merging the two by hand; then run render again",
	"extensions.mempalace does not start its own line": "write it as mempalace: on a line of its own",
}

func TestYAMLParseErrorsNameLineAndColumn(t *testing.T) {
	for _, c := range []struct {
		target, in string
		at         string // LINE:COLUMN
		what       string
	}{
		{"goose", "extensions:\n  foo:\n\tbar: 1\n", "3:1", "found character that cannot start any token"},
		{"goose", "extensions:\n  foo: [1, 2\n  bar: 3\n", "2:8", "did not find expected ',' or ']'"},
		{"goose", "a: {b: 1\nextensions: 2\n", "1:4", "did not find expected ',' or '}'"},
		{"goose", "key: value\n\tother: 1\n", "2:1", "found a tab character that violates indentation"},
		{"goose", "a: 1\n b: 2\n", "2:3", "mapping values are not allowed in this context"},
		{"goose", "extensions:\n  a: 1\n b: 2\n", "3:2", "did not find expected key"},
		{"goose", "a: 'x\nb: 2\n", "1:4", "found unexpected end of stream"},
		{"goose", "a: @x\n", "1:4", "found character that cannot start any token"},
		{"goose", "a: b: c\n", "1:5", "mapping values are not allowed in this context"},
		{"goose", "a: *nope\n", "1:4", "unknown anchor 'nope' referenced"},
		{"goose", "a: 1\n---\nb: 2\n", "2:1", "a second YAML document"},
		{"goose", "a: 1\r\nb: 2\rc: 3\r\n", "2:5", "a carriage return without a line feed"},
		{"goose", "\n- a\n", "2:1", "the top-level value is not a mapping"},
		{"continue", "name: x\nmcpServers:\n  - name: y\n   command: z\n", "4:4", "did not find expected '-' indicator"},
		{"continue", "name: \"x\nmcpServers: []\n", "1:7", "found unexpected end of stream"},
		{"continue", "name: a\nversion: 1\nmcpServers:\n  - name: mine\n    command: \"\xff\"\n", "5:15", "byte 0xFF is not UTF-8"},
		{"continue", "name: \"caf\xe9\"\nversion: 1\n", "1:11", "byte 0xE9 is not UTF-8"},
		{"continue", "name: me\nname: you\nversion: 1\n", "2:1", `"name" is named twice (first at line 1)`},
		{"continue", "name: me\nversion: 1\nmodels:\n  - name: a\n    name: b\n", "5:5", `"models.0.name" is named twice`},
		{"goose", "extensions:\n  other:\n    cmd: x\n    cmd: y\n", "4:5", `"extensions.other.cmd" is named twice`},
		{"goose", "extensions:\n  other:\n    bearer_token_env_var: x\n    bearer_token_env_var: y\n", "4:5", `"extensions.other.bearer_token_env_var" is named twice`}, // a long key that is a name is named
		{"continue", "name: a\nversion: 1\nb1: &b1 {p: 1}\nb2: &b2 {q: 2}\nx:\n  <<: *b1\n  <<: *b2\n", "7:3", `"x.<<" is named twice (first at line 6)`},
		{"goose", "extensions:\n  ? mempalace\n  : cmd: x\n", "2:5", "extensions.mempalace does not start its own line"},
	} {
		home := t.TempDir()
		file := map[string]string{"goose": ".config/goose/config.yaml", "continue": ".continue/config.yaml"}[c.target]
		path := filepath.Join(home, file)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(c.in), 0o644)
		env := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
		o := opts(home, env)
		o.Targets = []string{c.target}
		results, _, err := Run(o, false)
		if err != nil {
			t.Fatal(err)
		}
		want := path + ":" + c.at + ": " + c.what
		if len(results) != 1 || results[0].Action != ActionSkipped || len(results[0].Warnings) == 0 ||
			!strings.HasPrefix(results[0].Warnings[len(results[0].Warnings)-1], want) ||
			!strings.Contains(results[0].Warnings[len(results[0].Warnings)-1], "nothing written (fix: ") {
			t.Errorf("%s %q: got %+v\nwant a warning starting %q, saying nothing was written and the fix", c.target, c.in, results, want)
		}
		if fix, ok := yamlFixes[c.what]; ok && len(results) == 1 && len(results[0].Warnings) > 0 && !strings.Contains(results[0].Warnings[len(results[0].Warnings)-1], "(fix: "+fix) {
			t.Errorf("%s %q: %q, want the fix %q", c.target, c.in, results[0].Warnings, fix)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, []byte(c.in)) {
			t.Errorf("%s %q: the file became %q", c.target, c.in, got)
		}
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Errorf("%s %q: files beside it: %v", c.target, c.in, entries)
		}
	}
}

// Goose's config with another extension written as a ? complex key gets
// its entry beside it, the rest of the file kept (attack98 F5: skipped,
// "the edit would not read back as written (please report)").
func TestGooseEntryIsAddedBesideAComplexKey(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".config/goose/config.yaml")
	in := "extensions:\n  ? dev\n  : enabled: true\n    cmd: x\n"
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte(in), 0o644)
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{"goose"}
	results, _, err := Run(o, false)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if len(results) != 1 || results[0].Action == ActionSkipped || len(results[0].Warnings) != 0 ||
		!strings.HasPrefix(string(got), in+"  mempalace:\n") {
		t.Errorf("got %+v, the file %q; want the entry added after dev's, at its indentation", results, got)
	}
}
