package render

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A target --target names, with no MEMPALACE_* variables and
// mempalace-mcp nowhere, cannot get the stdio entry the user asked for: it
// is skipped (so --strict fails) with the reason and the fix, and its file
// is left as it is. It was "unchanged", with no word of the harness
// (attack121 F1). Unnamed, the same start stays quiet (R5).
func TestNamedTargetWithoutTheServerIsSkipped(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, ".claude.json")
	os.WriteFile(file, []byte(`{"numStartups":3}`), 0o600)
	o := opts(home, nil)
	o.LookPath = func(string) (string, error) { return "", errors.New("not found") }
	o.Targets = []string{TargetClaudeCode}
	res, _, err := Run(o, false)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	warn := strings.Join(r.Warnings, "\n")
	if r.Action != ActionSkipped || !r.Kept() || r.File != file {
		t.Errorf("action %q, file %s, want skipped %s", r.Action, r.File, file)
	}
	if !strings.Contains(warn, file+": no local mempalace entry was written: mempalace-mcp is not on PATH") || !strings.Contains(warn, "fix: pip install mempalace, or put mempalace-mcp on render's PATH") {
		t.Errorf("the warning does not say why and the fix:\n%s", warn)
	}
	if b, _ := os.ReadFile(file); string(b) != `{"numStartups":3}` {
		t.Errorf("the file is now %s", b)
	}
	o.Targets = nil
	res, _, _ = Run(o, false)
	for _, r := range res {
		if r.Action == ActionSkipped {
			t.Errorf("unnamed, %s is skipped: %v", r.Target, r.Warnings)
		}
	}
}
