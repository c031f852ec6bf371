package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A value on the entry's path that is not an object (a null "mcp", a
// string "mcpServers", a file that holds an array; in YAML, a scalar where
// a mapping or a list of named items goes) is named as every other
// config mistake is, FILE:LINE:COLUMN: what (fix: how), at the value. It
// read "FILE: line 3, column 10: mcp is null, not an object" with no fix
// (YAML: "FILE: line 2: extensions is not a mapping; …"), and a file
// holding an array read "FILE: <nil>; …". Nothing is written.
func TestAValueThatIsNotAnObjectIsNamedAtItsPlace(t *testing.T) {
	for _, c := range []struct {
		target, file, in string
		at, what, fix    string
	}{
		{"opencode", ".config/opencode/opencode.jsonc", "{\n  \"mcp\": null\n}\n", "2:10", "mcp is null, not an object", "make mcp an object"},
		{"claude-code", ".claude.json", "{\"mcpServers\": [1]}\n", "1:16", "mcpServers is an array, not an object", "make mcpServers an object"},
		{"opencode", ".config/opencode/opencode.jsonc", "\n [1]\n", "2:2", "the top-level value is an array, not an object", "make the file one object"},
		{"goose", ".config/goose/config.yaml", "a: 1\nextensions: 3\n", "2:13", "extensions is not a mapping; render cannot add mempalace to it", "make extensions a mapping"},
		{"continue", ".continue/config.yaml", "name: x\nversion: 1\nmcpServers:\n  a: 1\n", "4:3", "mcpServers is a mapping, not the list of named items it should be; render cannot add mempalace to it", "make mcpServers a list"},
	} {
		home := t.TempDir()
		path := filepath.Join(home, c.file)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.MkdirAll(filepath.Join(home, ".claude"), 0o755) // Claude Code is set up
		os.WriteFile(path, []byte(c.in), 0o644)
		env := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
		o := opts(home, env)
		o.Targets = []string{c.target}
		results, _, err := Run(o, false)
		if err != nil {
			t.Fatal(err)
		}
		want := path + ":" + c.at + ": " + c.what + "; nothing written (fix: " + c.fix
		if len(results) != 1 || results[0].Action != ActionSkipped || len(results[0].Warnings) == 0 ||
			!strings.HasPrefix(results[0].Warnings[len(results[0].Warnings)-1], want) ||
			!strings.HasSuffix(results[0].Warnings[len(results[0].Warnings)-1], "; then run render again)") {
			t.Errorf("%s %q: got %+v\nwant a warning starting %q, ending with the fix", c.target, c.in, results, want)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, []byte(c.in)) {
			t.Errorf("%s %q: the file became %q", c.target, c.in, got)
		}
	}
}
