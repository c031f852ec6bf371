package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// coded is an error with SQLite's result code, as the driver's.
type coded int

func (c coded) Error() string { return fmt.Sprintf("sqlite error (%d)", int(c)) }
func (c coded) Code() int     { return int(c) }

// Attack55 F1: an outbox on a full disk (SQLite: "disk I/O error
// (4874)", the -shm not grown) or a read-only mount was "not a usable
// SQLite database", and doctor's fix moved it aside with its queued
// writes. The file system's fault is told from the file's, with its fix.
func TestStorageFaultIsToldFromADamagedFile(t *testing.T) {
	path := filepath.Join("/mnt/tiny/palace/edge", FileName)
	roomy := func(string) (Space, error) { return Space{Free: 50 << 20, Mount: "/mnt/tiny"}, nil }
	full := func(string) (Space, error) { return Space{Free: 4096, Mount: "/mnt/tiny"}, nil }
	ro := func(string) (Space, error) { return Space{Free: 50 << 20, ReadOnly: true, Mount: "/mnt/tiny"}, nil }
	for _, c := range []struct {
		name   string
		err    error
		statfs StatFS
		want   []string // "": not a storage fault
	}{
		{"disk I/O error on a full disk", coded(4874), full, []string{"(/mnt/tiny) is full, 4096 bytes free", "free space on /mnt/tiny", "do not move it aside"}},
		{"SQLITE_FULL", coded(13), roomy, []string{"is full"}},
		{"ENOSPC", &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}, nil, []string{"the outbox's disk) is full", "free space on the outbox's disk"}},
		{"EROFS", &os.PathError{Op: "open", Path: path, Err: syscall.EROFS}, roomy, []string{"(/mnt/tiny) is mounted read-only", "mount -o remount,rw /mnt/tiny"}},
		{"read-only mount, SQLite's words", coded(8), ro, []string{"mounted read-only"}},
		{"read-only mount statfs counts full", coded(8), func(string) (Space, error) { return Space{ReadOnly: true, Mount: "/ro"}, nil }, []string{"(/ro) is mounted read-only"}},
		{"EACCES", &os.PathError{Op: "open", Path: path, Err: syscall.EACCES}, roomy, []string{"may not write it", "chown -R $(id -u):$(id -g) /mnt/tiny/palace/edge"}},
		{"disk I/O error with room", coded(4874), roomy, nil},
		{"not a database", coded(26), roomy, nil},
	} {
		se := storageFault(path, c.err, c.statfs)
		if (se != nil) != (c.want != nil) {
			t.Errorf("%s: %v, want a storage fault: %v", c.name, se, c.want != nil)
			continue
		}
		if se == nil {
			continue
		}
		if !errors.Is(se, c.err) {
			t.Errorf("%s: the cause is not kept: %v", c.name, se)
		}
		for _, w := range c.want {
			if !strings.Contains(se.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, se.Error(), w)
			}
		}
		if strings.Contains(se.Error(), "not a usable SQLite database") {
			t.Errorf("%s: %s", c.name, se)
		}
	}
}

// Open (edge status, doctor and every command that reads the outbox)
// gives the StorageError, and Peek still counts what the outbox holds,
// read only, when the -shm cannot be had.
func TestOpenSaysTheDiskIsFullAndPeekCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edge", FileName)
	s, err := Open(path, "dev", "edge")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := s.Enqueue(context.Background(), Write{Name: "mempalace_add_drawer", Payload: fmt.Appendf(nil, `{"wing":"w","room":"r","content":"queued %d"}`, i), Wing: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if err := os.Mkdir(path+"-wal", 0o700); err != nil { // the -wal cannot be written, as on a full disk
		t.Fatal(err)
	}
	full := func(string) (Space, error) { return Space{Free: 0, Mount: "/data"}, nil }
	_, err = OpenOptions(path, Options{StatFS: full})
	var se *StorageError
	if !errors.As(err, &se) || se.Kind != "full" || !strings.Contains(err.Error(), "free space on /data") {
		t.Fatalf("open on a full disk: %v", err)
	}
	roomy := func(string) (Space, error) { return Space{Free: 50 << 20, Mount: "/data"}, nil }
	if _, err = OpenOptions(path, Options{StatFS: roomy}); err == nil || errors.As(err, &se) {
		t.Fatalf("the same file with room on its disk: %v", err)
	}
	n, complete, err := Peek(path)
	if err != nil || n[Queued] != 2 || complete {
		t.Fatalf("peek: %v %v %v", n, complete, err)
	}
}

// The mount an outbox's directory is on is the one mountinfo lists, so a
// read-only bind mount (a container's :ro volume) is named, with a fix
// that works on it (attack57 A2: the mount was found by walking up while
// the device number stayed the same, which cannot see a bind mount, and
// the finding named "/" and `mount -o remount,rw /`, which does nothing).
func TestTheMountIsTheOneMountinfoLists(t *testing.T) {
	for dir, want := range map[string]string{
		"/srv/attack57/ro/palace/edge":     "/srv/attack57/ro", // a bind mount
		"/srv/attack57/ro":                 "/srv/attack57/ro",
		"/srv/attack57/rox/palace":         "/srv", // a name that only begins like the mount
		"/mnt/tiny/palace/edge":            "/mnt/tiny",
		"/mnt/my palaces/p/edge":           "/mnt/my palaces",
		"/mnt/stacked/edge":                "/mnt/stacked",
		"/home/dev/.mempalace/palace/edge": "/",
	} {
		f, err := os.Open(filepath.Join("testdata", "mountinfo"))
		if err != nil {
			t.Fatal(err)
		}
		if got := mountOf(dir, f); got != want {
			t.Errorf("%s: on %q, want %q", dir, got, want)
		}
		f.Close()
	}
	path := "/srv/attack57/ro/palace/edge/" + FileName
	statfs := func(dir string) (Space, error) {
		f, err := os.Open(filepath.Join("testdata", "mountinfo"))
		if err != nil {
			return Space{}, err
		}
		defer f.Close()
		return Space{Free: 50 << 20, ReadOnly: true, Mount: mountOf(dir, f)}, nil
	}
	se := storageFault(path, &os.PathError{Op: "open", Path: path, Err: syscall.EROFS}, statfs)
	for _, w := range []string{"(/srv/attack57/ro) is mounted read-only", "`mount -o remount,rw /srv/attack57/ro`", "the container's volume without :ro"} {
		if se == nil || !strings.Contains(se.Error(), w) {
			t.Errorf("%v lacks %q", se, w)
		}
	}
}
