package gateway

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
)

// instanceLock is the running gateway's hold on its audit log: an
// exclusive flock on <audit_log>.lock, with the holder's pid in the file.
// The audit log has one writer (two would break its hash chain for
// good), so a second gateway on the same log is refused at start. The
// kernel drops the lock when the process ends, however it ends: there is
// no stale lock to clean up. Readers (audit verify) and the operator's
// config changes (their own <config>.lock) do not take it.
type instanceLock struct{ f *os.File }

// lockInstance takes the lock for auditLog, or says who holds it. The
// lock is beside the real file (symlinks followed): a log reached through
// a link is the same log, with the same lock.
func lockInstance(auditLog string) (*instanceLock, error) {
	real, err := filewrite.Resolve(auditLog)
	if err != nil {
		return nil, fmt.Errorf("audit_log: %w", err)
	}
	file := real + ".lock"
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit_log lock: %w", err)
	}
	if err := flockSoon(f); err != nil {
		b, _ := os.ReadFile(file)
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("audit_log lock %s: %w", file, err)
		}
		holder := "pid unknown"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			holder = "pid " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("another gateway (%s) runs on the audit log %s: it holds %s, and two gateways appending to one log break its hash chain for good. Stop that gateway first (a restart: stop, then start), or give this one a config with its own audit_log", holder, auditLog, file)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) // only a hint for the refusal above
	}
	return &instanceLock{f: f}, nil
}

// flockSoon takes f's lock, waiting up to lockWait while another holds
// it: a lock this process just released can still be held for a moment
// by a child being forked (the descriptor is shared until its exec
// closes it), so a restart in one process (a test's, a reload's) met
// "another gateway runs on the audit log" now and then (CI 97). A
// gateway that runs still holds it after the wait.
func flockSoon(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockWait bounds flockSoon's wait.
const lockWait = 500 * time.Millisecond

// release lets another gateway start on the log (nil, or released: nothing).
func (l *instanceLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0) // no pid left behind for the next holder's refusals
	l.f.Close()     // closing it releases the flock
	l.f = nil
}
