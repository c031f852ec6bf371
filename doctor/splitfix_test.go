package doctor

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/render"
)

// pasteByHand runs the command a finding's fix gives "by hand", as a user
// pasting it into sh would, in dir.
func pasteByHand(t *testing.T, f Finding, dir string) {
	t.Helper()
	paste(t, f.Fix, "by hand: `([^`]*)`", dir)
}

// paste runs the command the first group of pattern finds in fix through
// sh, in dir.
func paste(t *testing.T, fix, pattern, dir string) {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(fix)
	if m == nil {
		t.Fatalf("no command %s in the fix: %s", pattern, fix)
	}
	cmd := exec.Command("sh", "-c", m[1])
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the fix's command, pasted, failed: %v\n%s\n%s", err, m[1], out)
	}
}

// homedAt is a box whose HOME's name holds a space and a '#'.
func homedAt(t *testing.T) *box {
	b := newBox(t)
	b.home = filepath.Join(t.TempDir(), "x y#z")
	b.palace, b.opts.Home = filepath.Join(b.home, ".mempalace", "palace"), b.home
	must(t, os.MkdirAll(b.palace, 0o700))
	write(t, filepath.Join(b.home, ".mempalace", "config.json"), `{}`, 0o600)
	return b
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
	t.Run("kg-split", func(t *testing.T) {
		b := homedAt(t)
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
		b := homedAt(t)
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

// The other fixes that give a command with a path in it work when pasted
// under such a HOME too: env-permissions' chmod, proposed-pending's rm,
// an unusable outbox's mv (before, each split at the space).
func TestFixCommandsWithPathsPasteUnderAHomeWithSpaces(t *testing.T) {
	home := filepath.Join(t.TempDir(), "x y#z")
	t.Run("env-permissions", func(t *testing.T) {
		b := newBox(t)
		env := filepath.Join(home, "devbox", ".env")
		write(t, env, "MEMPALACE_REMOTE_TOKEN=abcdefgh12345\n", 0o644)
		b.opts.EnvFiles = []string{env}
		fs := b.run()
		only(t, fs, "error:env-permissions")
		paste(t, fs[0].Fix, "^(chmod .*)$", t.TempDir())
		if fi, err := os.Stat(env); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("after the fix: %v %v", fi.Mode(), err)
		}
	})
	t.Run("proposed-pending", func(t *testing.T) {
		b := homedAt(t)
		cfg := filepath.Join(b.home, ".claude.json")
		write(t, cfg, `{"mcpServers":{"mempalace":{"type":"stdio","command":"mempalace-mcp","args":["--palace","/data/mine"]}}}`, 0o644)
		b.env["MEMPALACE_REMOTE_URL"] = "http://127.0.0.1:1/mcp"
		b.env["MEMPALACE_REMOTE_TOKEN"] = "tok-0123456789abcdef"
		if _, _, err := render.Run(render.Options{Home: b.home, HomeFromFlag: true, Env: b.opts.Env, LookPath: b.opts.LookPath}, false); err != nil {
			t.Fatal(err)
		}
		delete(b.env, "MEMPALACE_REMOTE_URL") // opted out again: the proposal is stale
		delete(b.env, "MEMPALACE_REMOTE_TOKEN")
		got := CheckProposedPending(b.opts.withDefaults(), PlanRender(b.opts.withDefaults()))
		only(t, got, "info:proposed-pending")
		paste(t, got[0].Fix, "`(rm [^`]*)`", t.TempDir())
		if _, err := os.Stat(cfg + ".proposed"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the proposal is still there after the fix: %v", err)
		}
	})
	t.Run("outbox unusable", func(t *testing.T) {
		ob := filepath.Join(home, ".mempalace", "palace", "edge", "outbox.sqlite3")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			write(t, ob+suffix, "x", 0o600)
		}
		paste(t, unusableOutboxFix(ob), "move the file aside with its -wal and -shm, keeping them: `([^`]*)`", t.TempDir())
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if _, err := os.Stat(ob + ".broken" + suffix); err != nil {
				t.Errorf("after the fix: %v", err)
			}
		}
	})
	t.Run("palace damaged, on an edge", func(t *testing.T) {
		palace := filepath.Join(home, ".mempalace", "damaged palace")
		write(t, filepath.Join(palace, "edge", "outbox.sqlite3"), "x", 0o600)
		fix := damagedFix(State{Settings: ladder.Settings{Mode: ladder.Edge}, Palace: palace}, filepath.Join(palace, "chroma.sqlite3"))
		paste(t, fix, "then `([^`]*)` keeps the outbox", t.TempDir())
		if _, err := os.Stat(filepath.Join(palace, "edge", "outbox.sqlite3")); err != nil {
			t.Errorf("the outbox is not back in the emptied palace: %v", err)
		}
	})
}
