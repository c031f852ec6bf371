package filewrite

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriteReplacesAndKeepsMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	os.WriteFile(p, []byte("old"), 0o640)
	res, err := Write(p, []byte("new"), 0o644)
	if err != nil || res.InPlace {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	got, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(got) != "new" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("content %q mode %o", got, fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestWriteFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	link := filepath.Join(dir, "link.json")
	os.WriteFile(real, []byte("old"), 0o644)
	os.Symlink("real.json", link)
	if _, err := Write(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced by a file")
	}
	if got, _ := os.ReadFile(real); string(got) != "new" {
		t.Fatalf("real file = %q", got)
	}
}

// Every kind of special file is refused, by name, and left as it was.
func TestSpecialFilesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	devlink := filepath.Join(dir, "null")
	os.Symlink("/dev/null", devlink)
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	for path, kind := range map[string]string{fifo: "FIFO", sock: "socket", devlink: "character device", sub: "directory"} {
		done := make(chan error, 2)
		go func() {
			_, err := Write(path, []byte("x"), 0o644)
			done <- err
			_, err = ReadRegular(path, 1<<20)
			done <- err
		}()
		for i := 0; i < 2; i++ {
			select {
			case err := <-done:
				var nr *NotRegularError
				if !errors.As(err, &nr) || nr.Kind != kind || nr.Path != path {
					t.Errorf("%s: err = %v, want a NotRegularError for a %s", path, err, kind)
				}
			case <-time.After(10 * time.Second): // a hang detector, not a timing target
				t.Fatalf("%s: blocked", path)
			}
		}
	}
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatal("/dev/null is no longer a device")
	}
}

func TestReadRegularBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	os.WriteFile(p, make([]byte, 100), 0o644)
	if _, err := ReadRegular(p, 99); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if b, err := ReadRegular(p, 100); err != nil || len(b) != 100 {
		t.Fatalf("ReadRegular = %d bytes, %v", len(b), err)
	}
}

// A rename that fails as on a bind-mounted file (EBUSY) or across devices
// (EXDEV) falls back to writing the same inode, and says so.
func TestRenameFailureWritesInPlace(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EBUSY, syscall.EXDEV} {
		dir := t.TempDir()
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte("a longer old content"), 0o600)
		before, _ := os.Stat(p)
		res, err := Write(p, []byte("new"), 0o644, WithRename(func(o, n string) error {
			return &os.LinkError{Op: "rename", Old: o, New: n, Err: errno}
		}))
		if err != nil || !res.InPlace {
			t.Fatalf("%v: Write = %+v, %v", errno, res, err)
		}
		after, _ := os.Stat(p)
		got, _ := os.ReadFile(p)
		if string(got) != "new" || !os.SameFile(before, after) || after.Mode().Perm() != 0o600 {
			t.Fatalf("%v: content %q, same inode %v, mode %o", errno, got, os.SameFile(before, after), after.Mode().Perm())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("%v: temp file left: %v", errno, entries)
		}
	}
}

// Another rename error is returned, not swallowed, and the file is kept.
func TestRenameErrorReturned(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte("old"), 0o644)
	_, err := Write(p, []byte("new"), 0o644, WithRename(func(o, n string) error { return syscall.EIO }))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("content %q", got)
	}
}

// A hard-linked file is written in place so every link sees the change.
func TestHardLinkKept(t *testing.T) {
	dir := t.TempDir()
	p, q := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(p, []byte("old"), 0o644)
	os.Link(p, q)
	res, err := Write(p, []byte("new"), 0o644)
	if err != nil || !res.InPlace {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(q); string(got) != "new" {
		t.Fatalf("other link reads %q", got)
	}
}

func TestReadOnlyDirErrorNamesDir(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	_, err := Write(filepath.Join(dir, "c.json"), []byte("x"), 0o644)
	if err == nil || !strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), ".tmp-") {
		t.Fatalf("err = %v, want one naming %s and no temp file", err, dir)
	}
}

// A kill after the temp file was written leaves it; CleanStale removes it
// once it is old, and nothing of another name or another target.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	killed := errors.New("killed")
	if _, err := Write(p, []byte("x"), 0o644, WithFault(func(step string) error {
		if step == StepTempWritten {
			return killed
		}
		return nil
	})); !errors.Is(err, killed) {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, ".c.json.tmp-*"))
	if len(matches) != 1 {
		t.Fatalf("temp files after the kill: %v", matches)
	}
	keep := []string{".c.json.tmp-1", ".c.json.tmpfoo", ".other.json.tmp-0123456789abcdef", "c.json.tmp-0123456789abcdef", ".c.json.tmp-0123456789ABCDEF"}
	old := time.Now().Add(-2 * time.Minute)
	for _, k := range keep {
		os.WriteFile(filepath.Join(dir, k), nil, 0o644)
		os.Chtimes(filepath.Join(dir, k), old, old)
	}
	legacy := filepath.Join(dir, ".c.json.tmp2718281828")
	os.WriteFile(legacy, nil, 0o644)
	os.Chtimes(legacy, old, old)
	fresh := filepath.Join(dir, TempName("c.json"))
	os.WriteFile(fresh, nil, 0o644)
	if err := CleanStale(dir, "c.json", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(matches[0]); err != nil {
		t.Fatal("a temp file younger than a minute was removed")
	}
	os.Chtimes(matches[0], old, old)
	if err := CleanStale(dir, "c.json", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(matches[0]); err == nil {
		t.Fatal("stale temp file kept")
	}
	if _, err := os.Stat(legacy); err == nil {
		t.Fatal("stale temp file of the earlier writer kept")
	}
	for _, k := range append(keep, filepath.Base(fresh)) {
		if _, err := os.Stat(filepath.Join(dir, k)); err != nil {
			t.Errorf("%s removed", k)
		}
	}
}

// Owned: a symlink at the path is refused, named, and left as it is with
// the file it points to; a hard-linked file is replaced, its other name
// keeping the old bytes.
func TestOwnedNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	link := filepath.Join(dir, "record.json")
	os.Symlink(victim, link)
	_, err := Write(link, []byte("new"), 0o644, Owned())
	var nr *NotRegularError
	if !errors.As(err, &nr) || nr.Path != link || nr.Kind != "symlink" {
		t.Fatalf("Write over a symlink = %v, want a NotRegularError naming it", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Fatalf("written through the link: %q", got)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	other := filepath.Join(t.TempDir(), "other")
	os.WriteFile(other, []byte("mine"), 0o640)
	hard := filepath.Join(dir, "proposed")
	if err := os.Link(other, hard); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	res, err := Write(hard, []byte("new"), 0o644, Owned())
	if err != nil || res.InPlace {
		t.Fatalf("Write over a hard link = %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(other); string(got) != "mine" {
		t.Fatalf("written in place through the other name: %q", got)
	}
	if got, _ := os.ReadFile(hard); string(got) != "new" {
		t.Fatalf("the owned file holds %q", got)
	}
	if fi, _ := os.Stat(hard); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %o, want the replaced file's 0640", fi.Mode().Perm())
	}
}

// A file whose owner a rename cannot keep (run as another, non-root user:
// a root-owned config in the user's writable directory) is never replaced
// by a rename that would make it the user's: it is left alone, whatever
// its mode, with a *NotWritableError naming it, its owner and the fix
// (attack27 f_owner: root 0644 became the user's, the entry added). The
// user is injected (AsUser).
func TestForeignOwnerLeftAlone(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	os.WriteFile(p, []byte("old"), 0o644)
	if os.Geteuid() == 0 {
		os.Chown(p, 4242, 4242) // a user's file: uid 0 is root, who keeps any owner
	}
	fi, _ := os.Stat(p)
	st := fi.Sys().(*syscall.Stat_t)
	for _, u := range []Option{AsUser(int(st.Uid)+1, int(st.Gid)), AsUser(int(st.Uid), int(st.Gid)+1)} {
		for _, mode := range []os.FileMode{0o644, 0o666} {
			os.Chmod(p, mode)
			_, err := Write(p, []byte("new"), 0o600, u)
			var nw *NotWritableError
			if !errors.As(err, &nw) || nw.Path != p || !strings.Contains(err.Error(), "left alone") ||
				!strings.Contains(err.Error(), "chown") || !strings.Contains(err.Error(), OwnerName(int(st.Uid))) {
				t.Errorf("mode %o: %v, want a *NotWritableError naming the file, its owner and the fix", mode, err)
			}
			if err := CheckOwner(p, u); !errors.As(err, &nw) {
				t.Errorf("mode %o: CheckOwner: %v, want the *NotWritableError Write returns", mode, err)
			}
			if b, _ := os.ReadFile(p); string(b) != "old" {
				t.Errorf("mode %o: written: %q", mode, b)
			}
		}
	}
	if err := CheckOwner(p, AsUser(int(st.Uid), int(st.Gid))); err != nil {
		t.Errorf("CheckOwner of the owner's own file: %v", err)
	}
	if err := CheckOwner(filepath.Join(dir, "new.json"), AsUser(int(st.Uid)+1, int(st.Gid)+1)); err != nil {
		t.Errorf("CheckOwner of a new file: %v", err)
	}
	if res, err := Write(p, []byte("own"), 0o600, AsUser(int(st.Uid), int(st.Gid))); err != nil || res.InPlace {
		t.Errorf("the owner's own file: %+v, %v, want replaced by rename", res, err)
	}
	if _, err := Write(filepath.Join(dir, "new.json"), []byte("x"), 0o600, AsUser(int(st.Uid)+1, int(st.Gid)+1)); err != nil {
		t.Errorf("a new file: %v", err)
	}
}

// An owned file a looser mode left (a record an older render wrote 0644)
// is narrowed to perm when written, a stricter one kept: never widened.
func TestOwnedNarrowsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "record.json")
	for _, c := range []struct{ had, want os.FileMode }{{0o644, 0o600}, {0o400, 0o400}, {0o600, 0o600}} {
		os.WriteFile(p, []byte("old"), 0o600)
		os.Chmod(p, c.had)
		if _, err := Write(p, []byte("new"), 0o600, Owned()); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != c.want {
			t.Errorf("had %o: mode %o, want %o", c.had, fi.Mode().Perm(), c.want)
		}
	}
}

// Narrow takes away what perm does not allow and never adds, leaves a
// missing file alone, and refuses a symlink without touching its target.
func TestNarrowInPlace(t *testing.T) {
	dir := t.TempDir()
	wide, narrow, target, link := filepath.Join(dir, "wide"), filepath.Join(dir, "narrow"), filepath.Join(dir, "target"), filepath.Join(dir, "link")
	os.WriteFile(wide, []byte("x"), 0o644)
	os.WriteFile(narrow, []byte("x"), 0o400)
	os.WriteFile(target, []byte("x"), 0o644)
	os.Symlink(target, link)
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{wide, 0o600}, {narrow, 0o400}} {
		if err := Narrow(c.path, 0o600); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(c.path); fi.Mode().Perm() != c.want {
			t.Errorf("%s: mode %04o, want %04o", filepath.Base(c.path), fi.Mode().Perm(), c.want)
		}
	}
	if err := Narrow(filepath.Join(dir, "missing"), 0o600); err != nil {
		t.Errorf("a missing file: %v", err)
	}
	var nr *NotRegularError
	if err := Narrow(link, 0o600); !errors.As(err, &nr) {
		t.Errorf("a symlink: %v, want a NotRegularError", err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o644 {
		t.Errorf("the symlink's target: mode %04o, want it untouched", fi.Mode().Perm())
	}
}

// A save made to the file after the caller read it and before Write
// replaces it is kept, and nothing is written (attack96 F4).
func TestIfUnchangedKeepsASaveMadeMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		old       []byte // what the caller read (nil: no file)
		meanwhile func(p string)
		links     bool // hard-linked: the in-place path
	}{
		{"same size", []byte("old!"), func(p string) { os.WriteFile(p, []byte("usr!"), 0o644) }, false},
		{"other size", []byte("old"), func(p string) { os.WriteFile(p, []byte("user's save"), 0o644) }, false},
		{"moved over", []byte("old"), func(p string) {
			os.WriteFile(p+".t", []byte("mv"), 0o644)
			os.Rename(p+".t", p)
		}, false},
		{"removed", []byte("old"), func(p string) { os.Remove(p) }, false},
		{"created", nil, func(p string) { os.WriteFile(p, []byte("user's new file"), 0o644) }, false},
		{"empty file created", nil, func(p string) { os.WriteFile(p, nil, 0o644) }, false},
		{"hard-linked", []byte("old"), func(p string) { os.WriteFile(p, []byte("usr"), 0o644) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "c.json")
			if tc.old != nil {
				os.WriteFile(p, tc.old, 0o644)
			}
			if tc.links {
				os.Link(p, filepath.Join(dir, "other"))
			}
			var want []byte
			hook := func(step string) error {
				if step == StepTempWritten {
					tc.meanwhile(p)
					want, _ = os.ReadFile(p)
				}
				return nil
			}
			if tc.links { // the in-place path writes no temp file
				tc.meanwhile(p)
				want, _ = os.ReadFile(p)
			}
			_, err := Write(p, []byte("render's"), 0o644, IfUnchanged(tc.old), WithFault(hook))
			var ce *ChangedError
			if !errors.As(err, &ce) || ce.Path != p {
				t.Fatalf("Write = %v, want a *ChangedError naming %s", err, p)
			}
			if got, _ := os.ReadFile(p); string(got) != string(want) {
				t.Fatalf("file = %q, want the save made meanwhile (%q) kept", got, want)
			}
			if entries, _ := os.ReadDir(dir); slicesHasTemp(entries) {
				t.Fatalf("temp file left: %v", entries)
			}
		})
	}
	t.Run("unchanged is written", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "c.json")
		os.WriteFile(p, []byte("old"), 0o644)
		if _, err := Write(p, []byte("new"), 0o644, IfUnchanged([]byte("old"))); err != nil {
			t.Fatal(err)
		}
		if _, err := Write(filepath.Join(filepath.Dir(p), "n.json"), []byte("new"), 0o644, IfUnchanged(nil)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != "new" {
			t.Fatalf("file = %q", got)
		}
	})
}

func slicesHasTemp(entries []os.DirEntry) bool {
	for _, e := range entries {
		if _, ok := TempTarget(e.Name()); ok {
			return true
		}
	}
	return false
}

// A save by rename that lands while Write compares the file with what
// was read (a large config takes a while) is kept: the file compared is
// not the one at the path any more (attack98 F1: 2 of 18 saves of a 60 MB
// opencode.jsonc lost, render saying "updated").
func TestIfUnchangedKeepsASaveRenamedInWhileComparing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte("old"), 0o644)
	hook := func(step string) error {
		if step == StepCompared {
			os.WriteFile(p+".t", []byte("user's save"), 0o644)
			os.Rename(p+".t", p)
		}
		return nil
	}
	_, err := Write(p, []byte("render's"), 0o644, IfUnchanged([]byte("old")), WithFault(hook))
	var ce *ChangedError
	if !errors.As(err, &ce) {
		t.Fatalf("Write = %v, want a *ChangedError", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "user's save" {
		t.Fatalf("file = %q, want the save renamed in while comparing kept", got)
	}
}
