//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package outbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// lockOwner creates dir/owner and holds an exclusive flock on it until
// the file is closed (or the process dies). A symlink there is not
// followed (ELOOP): its holder writes into the file (join's pid), which
// must not be one a link planted in the palace names.
func lockOwner(dir, owner string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, owner)
	for range 3 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // the lock's error is the one to report
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s: %w", path, ErrLocked)
			}
			return nil, err
		}
		// A process sweeping gone owners may have removed the file between
		// its creation and the lock: then the lock names nothing.
		fi, err1 := f.Stat()
		on, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, on) {
			return f, nil
		}
		f.Close() // not the file at path: made again
	}
	return nil, fmt.Errorf("%s: removed as soon as made", path)
}

// ownerGone says whether dir/owner is missing or not locked (its owner
// died), removing it then. A lock the file system cannot say about is
// taken as gone (as before there were locks).
func ownerGone(dir, owner string) bool {
	path := filepath.Join(dir, owner)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true // released at its Close, or found gone before
	}
	if err != nil {
		return true
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	os.Remove(path) // a dead owner's; another sweeper may have removed it first
	return true
}

// sweepLive removes the lock files of owners that are gone.
func sweepLive(dir string) {
	es, _ := os.ReadDir(dir) // none yet: nothing to sweep
	for _, e := range es {
		ownerGone(dir, e.Name())
	}
}

// lockFile holds a flock on f until it is closed (waiting for another
// holder's): shared for a reader (a read-only f takes it), else exclusive.
func lockFile(f *os.File, shared bool) error {
	if shared {
		return syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}
