package edge

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
)

// An edge started to replicate but without MEMPALACE_REMOTE_URL (a
// harness that lost the variable: Cline's hub started before the opt-in,
// a client that starts stdio servers with a minimal environment) writes
// replicated wings into the local palace, and nothing ever queues them:
// it says so at WARN, with the fix, where render's edge entry started it
// (MEMPALACE_EDGE_HARNESS) or the palace has an edge/ outbox. R1 (no
// MEMPALACE_* at all) is as before: INFO, nothing written. Before, every
// case was the INFO line alone (attack101 F3).
func TestPassThroughWarnsWhereWritesShouldReplicate(t *testing.T) {
	for _, c := range []struct {
		name   string
		env    []string // besides HOME
		outbox bool
		warns  bool
	}{
		{"render's edge entry", []string{ladder.EnvEdgeHarness + "=claude-code"}, false, true},
		{"an outbox, some MEMPALACE_* set", []string{ladder.EnvAgentName + "=me"}, true, true},
		{"R1: no MEMPALACE_* at all, an outbox", nil, true, false},
		{"R1: no MEMPALACE_* at all", nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			env := append([]string{"HOME=" + home}, c.env...)
			s, _, err := ladder.ResolveEdge(func(k string) (string, bool) {
				for _, kv := range env {
					if v, ok := strings.CutPrefix(kv, k+"="); ok {
						return v, true
					}
				}
				return "", false
			}, exec.LookPath)
			if err != nil {
				t.Fatal(err)
			}
			if c.outbox {
				os.MkdirAll(filepath.Join(s.Palace, "edge"), 0o700)
			}
			outbox := filepath.Join(s.Palace, "edge")
			before := tree(t, outbox)
			h := start(t, harnessOpts{passThrough: true, palace: s.Palace, beforeServe: func(e *Edge) { e.cfg.OptedIn = OptedIn(s, env) }})
			h.call("add_drawer", map[string]any{"wing": "wing_claude", "room": "r", "content": "written while the URL was missing"})
			logs := h.logs.String()
			warned := strings.Contains(logs, "level=WARN") && strings.Contains(logs, "will not be replicated") && strings.Contains(logs, "devbox-config join")
			if warned != c.warns {
				t.Errorf("warned %v, want %v:\n%s", warned, c.warns, logs)
			}
			if !c.warns {
				if strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "transparent pass-through") {
					t.Errorf("R1 logs changed:\n%s", logs)
				}
				if after := tree(t, outbox); after != before {
					t.Errorf("R1 wrote the edge's state: before %q, after %q", before, after)
				}
			}
		})
	}
}

// tree lists the paths under dir ("" when it does not exist).
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			b.WriteString(p + "\n")
		}
		return nil
	})
	return b.String()
}
