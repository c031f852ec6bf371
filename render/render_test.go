package render

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/merge"
)

// Target names the tests use (the names themselves live in the harness
// records).
const (
	TargetOpencode   = "opencode"
	TargetPi         = "pi"
	TargetClaudeCode = "claude-code"
	TargetCodex      = "codex"
	TargetGemini     = "gemini"
	TargetCursor     = "cursor"
	TargetVSCode     = "vscode"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func found(string) (string, error) { return "/usr/bin/mempalace-mcp", nil }

func opts(home string, env map[string]string) Options {
	return Options{Home: home, HomeFromFlag: true, Env: envOf(env), LookPath: found}
}

// Two containers starting on one config volume at the same moment, with
// different environments, must not interleave: whichever ran last, the file
// parses, holds one entry, and the record describes exactly that entry.
func TestConcurrentRendersDoNotInterleave(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "opencode.jsonc"), []byte("{\n  // shared volume\n  \"theme\": \"x\"\n}\n"), 0o644)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			env := map[string]string{"MEMPALACE_REMOTE_URL": fmt.Sprintf("https://p%d.example.org/mcp", i), "MEMPALACE_REMOTE_TOKEN": "t"}
			if i%3 == 0 {
				env = nil
			}
			if _, _, err := Run(opts(home, env), false); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	data, err := os.ReadFile(filepath.Join(dir, "opencode.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := merge.ParseDoc(data)
	if err != nil {
		t.Fatalf("file does not parse after concurrent renders: %v\n%s", err, data)
	}
	live, _ := doc.Get("mcp", "mempalace")
	stateBytes, _ := os.ReadFile(filepath.Join(dir, fingerprint.StateFile))
	state, err := fingerprint.ParseState(stateBytes)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fingerprint.Of(live)
	if state.Targets["opencode"].Fingerprint != want {
		t.Fatalf("record %s does not describe the entry left in the file (%s):\n%s", state.Targets["opencode"].Fingerprint, want, data)
	}
	if !strings.Contains(string(data), "// shared volume") || strings.Count(string(data), `"mempalace"`) != 1 {
		t.Fatalf("file mangled:\n%s", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "opencode.jsonc.proposed")); err == nil {
		t.Fatal("a .proposed appeared: one render mistook another's write for a user edit")
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp*"))
	if len(leftovers) > 0 {
		t.Fatalf("temp files left: %v", leftovers)
	}
}

// failingSys fails writes to one file name.
type failingSys struct {
	OS
	failOn string
}

func (f failingSys) WriteFile(name string, old, data []byte, perm fs.FileMode) (filewrite.Result, error) {
	if strings.HasSuffix(name, f.failOn) {
		return filewrite.Result{}, errors.New("disk full")
	}
	return f.OS.WriteFile(name, old, data, perm)
}

func (f failingSys) WriteOwn(name string, data []byte, perm fs.FileMode) error {
	if strings.HasSuffix(name, f.failOn) {
		return errors.New("disk full")
	}
	return f.OS.WriteOwn(name, data, perm)
}

// A write that fails loses nothing: the config keeps its bytes, no record
// claims the write, and the run reports the target as skipped (exit 0).
func TestFailedWriteLosesNothing(t *testing.T) {
	for _, failOn := range []string{"opencode.jsonc", fingerprint.StateFile} {
		home := t.TempDir()
		dir := filepath.Join(home, ".config", "opencode")
		os.MkdirAll(dir, 0o755)
		orig := []byte("{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n")
		os.WriteFile(filepath.Join(dir, "opencode.jsonc"), orig, 0o644)
		o := opts(home, nil)
		o.Sys = failingSys{failOn: failOn}
		res, _, err := Run(o, false)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Action != ActionSkipped || !strings.Contains(strings.Join(res[0].Warnings, " "), "disk full") {
			t.Fatalf("fail on %s: result %+v", failOn, res[0])
		}
		got, _ := os.ReadFile(filepath.Join(dir, "opencode.jsonc"))
		// A record may name the write as pending, never as done.
		stateBytes, _ := os.ReadFile(filepath.Join(dir, fingerprint.StateFile))
		state, _ := fingerprint.ParseState(stateBytes)
		if failOn == "opencode.jsonc" && (string(got) != string(orig) || state.Targets["opencode"].Fingerprint != "") {
			t.Fatalf("fail on config: file changed or record claims the write:\n%s\n%s", got, stateBytes)
		}
		// The next start, with the disk fixed, completes the job.
		if res, _, _ := Run(opts(home, nil), false); res[0].Kept() {
			t.Fatalf("recovery run: %+v", res[0])
		}
		if _, err := os.Stat(filepath.Join(dir, "opencode.jsonc.proposed")); err == nil {
			t.Fatalf("fail on %s: recovery mistook our own write for a user edit", failOn)
		}
	}
}

// --dry-run reads and plans only: nothing on disk changes.
func TestDryRunWritesNothing(t *testing.T) {
	home := t.TempDir()
	res, _, err := Run(opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp"}), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Changes) != 2 || res[0].Action != ActionCreate {
		t.Fatalf("dry run planned %+v", res[0])
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 0 {
		t.Fatalf("dry run created %v", entries)
	}
}

// Running as root in an entrypoint, a rewrite keeps the file's owner and
// mode, and a new file belongs to its directory's owner.
func TestOwnerAndModeKept(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give files away")
	}
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	os.MkdirAll(dir, 0o755)
	os.Chown(dir, 1234, 1234)
	f := filepath.Join(dir, "opencode.jsonc")
	os.WriteFile(f, []byte("{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n"), 0o640)
	os.Chown(f, 1000, 1001)
	if _, _, err := Run(opts(home, nil), false); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(f)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1000 || st.Gid != 1001 || fi.Mode().Perm() != 0o640 {
		t.Fatalf("owner %d:%d mode %o after rewrite", st.Uid, st.Gid, fi.Mode().Perm())
	}
	sfi, _ := os.Stat(filepath.Join(dir, fingerprint.StateFile))
	if s := sfi.Sys().(*syscall.Stat_t); s.Uid != 1234 {
		t.Fatalf("new record owned by %d, want the directory's owner", s.Uid)
	}
}

// The harnesses that write their own file under <file>.lock (pi and
// Claude Code, both through proper-lockfile): a held lock skips the target
// with a message naming the harness and writes nothing; a lock older than
// the stale bound (the harness crashed holding it) is taken over, the
// entry written, and the lock gone afterwards, as proper-lockfile does.
func TestHarnessLockHeldAndStale(t *testing.T) {
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	for _, c := range []struct {
		target, owner string
		file          func(home string) string
		setUp         func(home string)
	}{
		{TargetPi, "pi", func(h string) string { return filepath.Join(h, ".pi", "agent", "settings.json") }, func(h string) {
			os.MkdirAll(filepath.Join(h, ".pi", "agent"), 0o755)
			os.WriteFile(filepath.Join(h, ".pi", "agent", "settings.json"), []byte("{}\n"), 0o644)
		}},
		{TargetClaudeCode, "Claude Code", func(h string) string { return filepath.Join(h, ".claude.json") }, func(h string) {
			os.MkdirAll(filepath.Join(h, ".claude"), 0o755)
			os.WriteFile(filepath.Join(h, ".claude.json"), []byte("{\"numStartups\": 3}\n"), 0o644)
		}},
	} {
		t.Run(c.target, func(t *testing.T) {
			home := t.TempDir()
			c.setUp(home)
			file := c.file(home)
			lock := file + ".lock"
			before, _ := os.ReadFile(file)
			o := opts(home, remote)
			o.Targets = []string{c.target}
			o.Sys = OS{OwnerLockRetries: 2, OwnerLockStale: time.Minute}

			if err := os.Mkdir(lock, 0o755); err != nil {
				t.Fatal(err)
			}
			res, _, err := Run(o, false)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(file)
			if res[0].Action != ActionSkipped || !strings.Contains(strings.Join(res[0].Warnings, " "), "("+c.owner+" writing its file?)") || string(after) != string(before) {
				t.Fatalf("held lock: action %s, warnings %q, file changed %v", res[0].Action, res[0].Warnings, string(after) != string(before))
			}

			old := time.Now().Add(-2 * time.Minute)
			os.Chtimes(lock, old, old)
			res, _, err = Run(o, false)
			if err != nil {
				t.Fatal(err)
			}
			after, _ = os.ReadFile(file)
			if res[0].Action == ActionSkipped || string(after) == string(before) {
				t.Fatalf("stale lock: action %s, warnings %q: the crashed holder's lock was not taken over", res[0].Action, res[0].Warnings)
			}
			if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the lock is still there after render: %v", err)
			}
		})
	}
}

// A lock path that is no lock (a dangling symlink, a link to a directory,
// a FIFO) is named as such with the fix, by the dry run too (doctor's
// render-refuses), and left, whatever its age: neither Claude Code nor
// render can lock the file while it is there, and it is no one's lock to
// remove. Before, render retried, said "held by another writer" with no
// fix at every start, and took a link to an old directory for a stale lock
// and removed it. attack114 F4.
func TestHarnessLockThatIsNoLockIsNamed(t *testing.T) {
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	for name, c := range map[string]struct {
		set  func(lock, elsewhere string) error
		what string
		rm   string
	}{
		"dangling link": {func(l, _ string) error { return os.Symlink("/nonexistent/x", l) }, "a dangling symlink (to /nonexistent/x)", "rm "},
		// attack117 F4: a loop was called "a dangling symlink".
		"link to itself":      {func(l, _ string) error { return os.Symlink(filepath.Base(l), l) }, "a symlink to .claude.json.lock that leads back to itself (a loop of links)", "rm "},
		"link to a directory": {func(l, e string) error { return os.Symlink(e, l) }, "a symlink to ", "rm "},
		"FIFO":                {func(l, _ string) error { return syscall.Mkfifo(l, 0o644) }, "a FIFO", "rm "},
		// attack116 F1: the dry run (doctor) said render would write it.
		"directory with a file in it": {func(l, _ string) error {
			if err := os.Mkdir(l, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(l, "x"), nil, 0o644)
		}, "a directory with files in it", "rm -r "},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
			file := filepath.Join(home, ".claude.json")
			os.WriteFile(file, []byte("{\"numStartups\": 3}\n"), 0o644)
			lock := file + ".lock"
			if err := c.set(lock, t.TempDir()); err != nil {
				t.Fatal(err)
			}
			o := opts(home, remote)
			o.Targets = []string{TargetClaudeCode}
			o.Sys = OS{OwnerLockRetries: 2, OwnerLockStale: time.Nanosecond} // any lock is stale
			for _, dry := range []bool{true, false} {
				res, _, err := Run(o, dry)
				if err != nil {
					t.Fatal(err)
				}
				w := strings.Join(res[0].Warnings, "\n")
				if res[0].Action != ActionSkipped || !strings.Contains(w, lock+": it is "+c.what) ||
					!strings.Contains(w, "(fix: "+c.rm+lock+" if no Claude Code is running)") || strings.Contains(w, "held by another writer") {
					t.Errorf("dry run %v: action %s, warnings %q: want the lock named as %q with the fix", dry, res[0].Action, w, c.what)
				}
			}
			// the lock itself, should the path appear between plan and lock
			if unlock, err := o.Sys.LockOwner(file, "Claude Code"); err == nil || !strings.Contains(err.Error(), c.what) {
				t.Errorf("LockOwner: %v, want the lock named as %q", err, c.what)
				if unlock != nil {
					unlock()
				}
			}
			if after, _ := os.ReadFile(file); string(after) != "{\"numStartups\": 3}\n" {
				t.Errorf("%s written: %s", file, after)
			}
			if _, err := os.Lstat(lock); err != nil {
				t.Errorf("the lock path was removed: %v", err)
			}
		})
	}
}

// A harness's directory that is a link leading back to itself is called
// a loop, and the fix is not to create the directory it points to
// (attack117 F4: "a dangling symlink").
func TestALoopOfLinksInTheWayIsCalledALoop(t *testing.T) {
	home := t.TempDir()
	if err := os.Symlink(".codex", filepath.Join(home, ".codex")); err != nil {
		t.Fatal(err)
	}
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{TargetCodex}
	res, _, err := Run(o, true)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(res[0].Warnings, "\n")
	if res[0].Action != ActionSkipped || !strings.Contains(w, ".codex is a symlink to .codex that leads back to itself (a loop of links), not a directory") ||
		!strings.Contains(w, "(fix: remove the link") {
		t.Errorf("action %s, warnings %q: want the link named as a loop, with the fix", res[0].Action, w)
	}
}
