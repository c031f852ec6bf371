package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Liveness: which processes holding claims still run. Each Ledger holds
// an exclusive flock on <ledger>.live/<instance> while it is open; the
// kernel lets go of it when the process dies, SIGKILL too. A claim names
// its instance, so a claim whose instance's lock is free (or whose file
// is gone) was left by a process that no longer forwards it: the op is
// in doubt StaleGrace after its claim (do.go), not after StaleAfter plus
// StaleGrace. A Ledger that
// could take no lock names instances without the live prefix, whose
// claims go stale by time alone, as every claim did before.

// livePrefix marks an instance that holds its lock.
const livePrefix = "live"

// liveDir is where the instances' lock files are.
func liveDir(path string) string { return path + ".live" }

// holdLive takes a new instance's lock: its name, and the open lock file
// (nil, and a name without livePrefix, where none could be had: err).
func holdLive(path string) (string, *os.File, error) {
	var id [8]byte
	rand.Read(id[:]) // never fails (crypto/rand)
	name := livePrefix + hex.EncodeToString(id[:])
	dir := liveDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return name[len(livePrefix):], nil, err
	}
	sweepLive(dir)
	for range 3 {
		f, err := lockNew(filepath.Join(dir, name))
		if err != nil {
			return name[len(livePrefix):], nil, err
		}
		if f != nil {
			return name, f, nil
		}
	}
	return name[len(livePrefix):], nil, errors.New("the lock file was removed as soon as made")
}

// lockNew makes path and holds an exclusive flock on it; nil and no
// error when a sweep removed the file between its making and the lock
// (the lock then names nothing: make it again).
func lockNew(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close() // the lock's error is the one to report
		return nil, err
	}
	fi, err1 := f.Stat()
	on, err2 := os.Stat(path)
	if err1 == nil && err2 == nil && os.SameFile(fi, on) {
		return f, nil
	}
	f.Close() // not the file at path
	return nil, nil
}

// claimGone says whether claim's instance (not this Ledger's) took its
// lock and no longer holds it: its process ended.
func (l *Ledger) claimGone(claim string) bool {
	instance, _, _ := strings.Cut(claim, "-")
	if instance == l.instance || !strings.HasPrefix(instance, livePrefix) || instance != filepath.Base(instance) {
		return false
	}
	return instanceGone(liveDir(l.path), instance)
}

// instanceGone says whether dir/instance is missing or not locked,
// removing it then. A lock the file system cannot say about is not gone.
func instanceGone(dir, instance string) bool {
	path := filepath.Join(dir, instance)
	f, err := os.Open(path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close() // a lock file: nothing written to it
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	os.Remove(path) // a dead instance's; another process may have removed it first
	return true
}

// sweepLive removes the lock files of instances that are gone.
func sweepLive(dir string) {
	es, _ := os.ReadDir(dir) // unreadable: nothing swept, claims go stale by time
	for _, e := range es {
		instanceGone(dir, e.Name())
	}
}
