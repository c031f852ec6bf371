package render

import (
	"os"
	"path/filepath"
	"testing"
)

// Amp reads settings.json, else settings.jsonc: with only settings.jsonc,
// the not-opted-in report names it, the file render edits once opted in
// (attack121 F2: it named a settings.json that does not exist).
func TestNotOptedInNamesTheFileTheHarnessReads(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "amp")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "settings.jsonc"), []byte("{\n  // mine\n}\n"), 0o644)
	for _, env := range []map[string]string{nil, {"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}} {
		res, _, err := Run(opts(home, env), true)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Target == "amp" && r.File != filepath.Join(dir, "settings.jsonc") {
				t.Errorf("variables %v: amp %s names %s", env != nil, r.Action, r.File)
			}
		}
	}
}
