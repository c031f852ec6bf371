package render

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/fingerprint"
)

// runWithin runs render and fails the test if it blocks: a FIFO in place
// of a config used to block the container start forever. The limit only
// detects a hang; it is not a timing target.
func runWithin(t *testing.T, o Options) []Result {
	t.Helper()
	type out struct {
		res []Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, _, err := Run(o, false)
		done <- out{res, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.res
	case <-time.After(20 * time.Second):
		t.Fatal("render blocked on a special file")
		return nil
	}
}

// specialFile makes a non-regular file at path of the given kind and
// returns a check that it is still that kind.
func specialFile(t *testing.T, path, kind string) func() bool {
	t.Helper()
	var want fs.FileMode
	switch kind {
	case "character device":
		// A node of our own (as /dev/null: 1,3), so a regression replaces
		// a file in the test's directory, not the machine's /dev/null.
		if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("cannot make a device node (not root?): %v", err)
		}
		want = fs.ModeCharDevice | fs.ModeDevice
	case "FIFO":
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
		want = fs.ModeNamedPipe
	case "socket":
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		want = fs.ModeSocket
	case "directory":
		os.Mkdir(path, 0o755)
		want = fs.ModeDir
	}
	return func() bool {
		fi, err := os.Lstat(path)
		return err == nil && fi.Mode().Type() == want
	}
}

// Issue 15 item 2: a config, the record or a sidecar that is a device,
// FIFO, socket or directory (directly or through a symlink) is skipped
// with a warning naming it; it is never replaced, never blocks, and no
// backup of it appears.
func TestSpecialFilesAreSkipped(t *testing.T) {
	for _, kind := range []string{"character device", "FIFO", "socket", "directory"} {
		for _, where := range []string{"opencode.jsonc", "symlinked opencode.jsonc", fingerprint.StateFile, "opencode.jsonc.proposed", "pi settings.json"} {
			t.Run(kind+" as "+where, func(t *testing.T) {
				// short: a socket's path must fit in 108 bytes
				home, err := os.MkdirTemp("", "rs")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(home) })
				dir := filepath.Join(home, ".config", "opencode")
				pidir := filepath.Join(home, ".pi", "agent")
				os.MkdirAll(dir, 0o755)
				os.MkdirAll(pidir, 0o755)
				target, node := TargetOpencode, ""
				switch where {
				case "opencode.jsonc":
					node = filepath.Join(dir, "opencode.jsonc")
				case "symlinked opencode.jsonc":
					node = filepath.Join(home, "elsewhere")
					os.Symlink(node, filepath.Join(dir, "opencode.jsonc"))
				case "pi settings.json":
					target, node = TargetPi, filepath.Join(pidir, "settings.json")
				default:
					// an edited entry, so the sidecar is read and written
					os.WriteFile(filepath.Join(dir, "opencode.jsonc"), []byte(`{"mcp": {"mempalace": {"type": "local", "command": ["mine"]}}}`), 0o644)
					node = filepath.Join(dir, where)
				}
				same := specialFile(t, node, kind)
				o := opts(home, nil)
				o.Targets = []string{target}
				res := runWithin(t, o)
				if res[0].Action != ActionSkipped {
					t.Fatalf("action %s, want skipped: %+v", res[0].Action, res[0])
				}
				warn := strings.Join(res[0].Warnings, "\n")
				if !strings.Contains(warn, node) || !strings.Contains(warn, "a "+kind+", not a regular file") {
					t.Fatalf("warning does not name %s as a %s: %q", node, kind, warn)
				}
				if !same() {
					t.Fatalf("%s is no longer a %s", node, kind)
				}
				for _, d := range []string{dir, pidir, home} {
					entries, _ := os.ReadDir(d)
					for _, e := range entries {
						if strings.Contains(e.Name(), ".bak.") || strings.Contains(e.Name(), ".tmp") {
							t.Errorf("%s appeared in %s", e.Name(), d)
						}
					}
				}
			})
		}
	}
}

// killPoints is a file system whose writes stop at the n-th step of
// filewrite (temp file written; renamed), as a kill there would.
type killPoints struct {
	OS
	steps *int
	at    int
}

var errKilled = errors.New("killed")

func newKillPoints(at int) killPoints {
	k := killPoints{steps: new(int), at: at}
	k.OS.WriteOptions = []filewrite.Option{filewrite.WithFault(func(string) error {
		*k.steps++
		if *k.steps == k.at {
			return errKilled
		}
		return nil
	})}
	return k
}

// Issue 15 item 5: killed at any step of a rung change (every temp file
// written, every rename), the next start — with yet another environment —
// recognises the file as either the old or the new rendition and applies
// the environment: no "kept your edit", no .proposed.
func TestKillAtAnyPointThenNextStartProceeds(t *testing.T) {
	remote := func(host string) map[string]string {
		return map[string]string{"MEMPALACE_REMOTE_URL": "https://" + host + "/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	}
	killed := 0
	for at := 1; ; at++ {
		home := t.TempDir()
		dir := filepath.Join(home, ".config", "opencode")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "opencode.jsonc"), []byte("{\n  // mine\n  \"theme\": \"x\"\n}\n"), 0o644)
		if res, _, _ := Run(opts(home, remote("a.example.org")), false); res[0].Kept() {
			t.Fatal(res[0])
		}
		o := opts(home, remote("b.example.org"))
		k := newKillPoints(at)
		o.Sys = k
		res, _, _ := Run(o, false)
		if *k.steps < at { // the run finished before step at: every point tried
			break
		}
		killed++
		if res[0].Action != ActionSkipped {
			t.Fatalf("kill at step %d: action %s", at, res[0].Action)
		}
		for i, host := range []string{"c.example.org", "b.example.org"} {
			res, _, _ = Run(opts(home, remote(host)), false)
			if res[0].Kept() {
				t.Fatalf("kill at step %d, start %d: %s (%v)", at, i+1, res[0].Action, res[0].Warnings)
			}
			data, _ := os.ReadFile(filepath.Join(dir, "opencode.jsonc"))
			if !bytes.Contains(data, []byte(host)) || !bytes.Contains(data, []byte("// mine")) {
				t.Fatalf("kill at step %d, start %d: file\n%s", at, i+1, data)
			}
			if _, err := os.Stat(filepath.Join(dir, "opencode.jsonc.proposed")); err == nil {
				t.Fatalf("kill at step %d: a .proposed appeared", at)
			}
		}
	}
	if killed < 6 {
		t.Fatalf("only %d kill points exercised", killed)
	}
}

// Issue 15 item 10: when the rename fails as on a bind-mounted file
// (EBUSY) or the config is hard-linked, the same inode is written in place
// after a backup, the log says so, and the next start writes nothing.
func TestInPlaceWhenRenameCannotWork(t *testing.T) {
	for _, how := range []string{"EBUSY", "EXDEV", "hard link"} {
		t.Run(how, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, ".config", "opencode")
			os.MkdirAll(dir, 0o755)
			file := filepath.Join(dir, "opencode.jsonc")
			orig := []byte("{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n")
			os.WriteFile(file, orig, 0o640)
			other := filepath.Join(home, "dotfiles-copy.jsonc")
			sys := OS{}
			switch how {
			case "hard link":
				os.Link(file, other)
			default:
				errno := map[string]syscall.Errno{"EBUSY": syscall.EBUSY, "EXDEV": syscall.EXDEV}[how]
				sys.WriteOptions = []filewrite.Option{filewrite.WithRename(func(o, n string) error {
					if n == file {
						return &os.LinkError{Op: "rename", Old: o, New: n, Err: errno}
					}
					return os.Rename(o, n)
				})}
			}
			before, _ := os.Stat(file)
			var logs bytes.Buffer
			for i, env := range []map[string]string{nil, {"MEMPALACE_REMOTE_URL": "https://p/mcp"}, {"MEMPALACE_REMOTE_URL": "https://p/mcp"}} {
				o := opts(home, env)
				o.Sys, o.Log = sys, slog.New(slog.NewTextHandler(&logs, nil))
				res, _, _ := Run(o, false)
				want := []string{"insert", "replace", "unchanged"}[i]
				if res[0].Action != want {
					t.Fatalf("start %d: action %s, want %s (%v)", i+1, res[0].Action, want, res[0].Warnings)
				}
			}
			after, _ := os.Stat(file)
			data, _ := os.ReadFile(file)
			if !os.SameFile(before, after) || after.Mode().Perm() != 0o640 || !bytes.Contains(data, []byte(`"url": "https://p/mcp"`)) {
				t.Fatalf("same inode %v, mode %o, content\n%s", os.SameFile(before, after), after.Mode().Perm(), data)
			}
			if how == "hard link" {
				if od, _ := os.ReadFile(other); !bytes.Equal(od, data) {
					t.Fatal("the other hard link does not see the change")
				}
			}
			if !strings.Contains(logs.String(), "wrote the file in place") {
				t.Fatalf("the log does not say the file was written in place:\n%s", logs.String())
			}
			baks, _ := filepath.Glob(file + ".bak.*")
			if len(baks) != 2 {
				t.Fatalf("%d backups after two writes and one no-op start, want 2: %v", len(baks), baks)
			}
			first, _ := os.ReadFile(baks[0])
			if !bytes.Equal(first, orig) {
				t.Fatalf("first backup is not the original:\n%s", first)
			}
		})
	}
}

// Fault hooks count: a kill point test that never kills proves nothing.
func TestKillPointsCount(t *testing.T) {
	k := newKillPoints(2)
	p := filepath.Join(t.TempDir(), "f")
	if _, err := k.WriteFile(p, nil, []byte("x"), 0o644); !errors.Is(err, errKilled) || *k.steps != 2 {
		t.Fatal(fmt.Sprint("steps ", *k.steps, " err ", err))
	}
}

// attack96 F4: a save to the harness config between render's read and its
// write (an editor, or the harness rewriting its own file) is kept:
// nothing is written to it, render says so, and the next run writes the
// entry into the saved file.
func TestSaveWhileRenderRunsIsKept(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	file := filepath.Join(dir, "opencode.jsonc")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(file, []byte("{\n  \"mcp\": {}\n}\n"), 0o644)
	const saved = "{\"mcp\": {}, \"USER_EDIT\": true}\n"
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{TargetOpencode}
	saves := 0
	o.Sys = OS{WriteOptions: []filewrite.Option{filewrite.WithFault(func(step string) error {
		if step == filewrite.StepTempWritten && saves == 0 { // the .bak's temp file, written before the config's
			saves++
			os.WriteFile(file, []byte(saved), 0o644)
		}
		return nil
	})}}
	res, _, _ := Run(o, false)
	if got, _ := os.ReadFile(file); string(got) != saved {
		t.Fatalf("the save made while render ran is lost:\n%s", got)
	}
	if !res[0].Kept() || !strings.Contains(strings.Join(res[0].Warnings, "\n"), file+": it changed while render ran") ||
		!strings.Contains(strings.Join(res[0].Warnings, "\n"), "(fix: run render again)") {
		t.Fatalf("action %s, warnings %q", res[0].Action, res[0].Warnings)
	}
	// review30 F6: the record does not say render was about to write a
	// value it never wrote, and the .bak it made first is told.
	if rec, _ := os.ReadFile(filepath.Join(dir, fingerprint.StateFile)); bytes.Contains(rec, []byte(`"pending"`)) {
		t.Errorf("the record still names the value never written as pending:\n%s", rec)
	}
	if !strings.Contains(strings.Join(res[0].Warnings, "\n"), ".bak") {
		t.Errorf("the .bak left is not told: %q", res[0].Warnings)
	}
	o.Sys = nil
	if res, _, _ = Run(o, false); res[0].Kept() {
		t.Fatalf("again: %s %q", res[0].Action, res[0].Warnings)
	}
	if got, _ := os.ReadFile(file); !bytes.Contains(got, []byte("USER_EDIT")) || !bytes.Contains(got, []byte("p.example.org")) {
		t.Fatalf("again: file\n%s", got)
	}
}
