package render

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/joakimp/devbox-config/filewrite"
)

// A config whose owner render's user could not keep (not root, another
// user's file: a root-owned 0644 ~/.claude.json in the user's own home)
// is left alone when the plan is made, as a read-only one is: no backup,
// no record, no .proposed, not even with --dry-run, and one warning that
// names the file once with its owner, its mode and the fix (attack27
// f_owner: render wrote the .bak and the pending record, then filewrite
// refused with "write P: P belongs to root …"). The user is injected.
func TestAConfigWhoseOwnerCannotBeKeptIsLeftAlone(t *testing.T) {
	home := t.TempDir()
	os.Mkdir(filepath.Join(home, ".claude"), 0o755)
	file := filepath.Join(home, ".claude.json")
	os.WriteFile(file, []byte("{\"mcpServers\": {}}\n"), 0o644)
	fi, _ := os.Stat(file)
	st := fi.Sys().(*syscall.Stat_t)
	owner := filewrite.OwnerName(int(st.Uid))
	listing := func() []string {
		es, _ := os.ReadDir(home)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	before := listing()
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	o := opts(home, remote)
	o.Targets = []string{TargetClaudeCode}
	o.Sys = OS{WriteOptions: []filewrite.Option{filewrite.AsUser(int(st.Uid)+4242, int(st.Gid)+4242)}}
	for _, dry := range []bool{true, false} {
		res, _, err := Run(o, dry)
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.Action != ActionSkipped || len(r.Warnings) != 1 {
			t.Fatalf("dry run %v: %s, warnings %q, want skipped with one warning", dry, r.Action, r.Warnings)
		}
		w := r.Warnings[0]
		if strings.Count(w, file) != 1 || !strings.Contains(w, owner) || !strings.Contains(w, "mode 0644") ||
			!strings.Contains(w, "left alone") || !strings.Contains(w, "fix: ") || !strings.Contains(w, "chown") {
			t.Errorf("dry run %v: warning %q, want the file named once, its owner, its mode and the fix", dry, w)
		}
		if got := listing(); !slices.Equal(got, before) {
			t.Errorf("dry run %v: the home holds %q, want %q: nothing written for the target", dry, got, before)
		}
		if b, _ := os.ReadFile(file); string(b) != "{\"mcpServers\": {}}\n" {
			t.Errorf("dry run %v: the config changed: %s", dry, b)
		}
	}
	// Its own owner's render updates it.
	o.Sys = OS{WriteOptions: []filewrite.Option{filewrite.AsUser(int(st.Uid), int(st.Gid))}}
	res, _, _ := Run(o, false)
	if r := res[0]; r.Action == ActionSkipped {
		t.Errorf("the owner's own config: skipped: %q", r.Warnings)
	}
}
