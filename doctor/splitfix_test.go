package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// pasteByHand runs the command a finding's fix gives "by hand", as a user
// pasting it into sh would, in dir.
func pasteByHand(t *testing.T, f Finding, dir string) {
	t.Helper()
	m := regexp.MustCompile("by hand: `([^`]*)`").FindStringSubmatch(f.Fix)
	if m == nil {
		t.Fatalf("no command by hand in the fix: %s", f.Fix)
	}
	cmd := exec.Command("sh", "-c", m[1])
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the fix's command, pasted, failed: %v\n%s\n%s", err, m[1], out)
	}
}

// sameFile fails unless link now leads to target.
func sameFile(t *testing.T, link, target string) {
	t.Helper()
	li, err1 := os.Stat(link)
	ti, err2 := os.Stat(target)
	if err1 != nil || err2 != nil || !os.SameFile(li, ti) {
		t.Fatalf("%s does not lead to %s after the fix (%v, %v)", link, target, err1, err2)
	}
}

// Under a HOME whose name holds a space and a '#', the split findings'
// commands by hand work when pasted: each path is one shell word (before,
// the space split it and the '#' began a comment).
func TestSplitFixCommandsPasteUnderAHomeWithSpaces(t *testing.T) {
	homed := func(t *testing.T) *box {
		b := newBox(t)
		b.home = filepath.Join(t.TempDir(), "x y#z")
		b.palace, b.opts.Home = filepath.Join(b.home, ".mempalace", "palace"), b.home
		must(t, os.MkdirAll(b.palace, 0o700))
		write(t, filepath.Join(b.home, ".mempalace", "config.json"), `{}`, 0o600)
		return b
	}
	t.Run("kg-split", func(t *testing.T) {
		b := homed(t)
		home, pal := filepath.Join(b.home, ".mempalace", "knowledge_graph.sqlite3"), filepath.Join(b.palace, "knowledge_graph.sqlite3")
		kg(t, home, 0)
		kg(t, pal, 1)
		fs := b.run()
		only(t, fs, "warn:kg-split")
		must(t, os.Remove(home)) // "after removing the empty one"
		pasteByHand(t, fs[0], t.TempDir())
		sameFile(t, home, pal)
	})
	t.Run("hallways-split", func(t *testing.T) {
		b := homed(t)
		b.palace = filepath.Join(b.home, "palaces", "main")
		b.env["MEMPALACE_PALACE_PATH"] = b.palace
		legacy, configured := filepath.Join(b.home, ".mempalace", "hallways.json"), filepath.Join(b.home, "palaces", "hallways.json")
		must(t, os.MkdirAll(b.palace, 0o700))
		write(t, legacy, hallwaysJSON(2), 0o600)
		fs := b.run()
		only(t, fs, "warn:hallways-split")
		pasteByHand(t, fs[0], t.TempDir())
		sameFile(t, legacy, configured)
	})
}
