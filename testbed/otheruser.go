package testbed

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// AsOtherUser runs f as a user who may read file (made readable to all,
// with the directories above it up to TMPDIR) but no file of mode 0: the
// test's own user when it is not root; as root, a thread of f's own with
// nobody's filesystem uid, which drops root's right to read any file (the
// thread ends with f).
func AsOtherUser(t testing.TB, file string, f func() error) error {
	t.Helper()
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(file); strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil && fi.Mode().Perm()&0o055 != 0o055 {
			err = os.Chmod(d, fi.Mode().Perm()|0o055) // group too: root's groups stay
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := syscall.Setfsuid(65534); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}
