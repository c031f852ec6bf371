package sqlitewal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Busy reports SQLite's SQLITE_BUSY ("database is locked").
func Busy(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "database is locked"))
}

// RetryBusy runs setUp until it succeeds, fails with anything but
// SQLITE_BUSY, or five seconds have passed (5 ms, doubling, at most 200
// ms between tries).
func RetryBusy(setUp func() error) error {
	delay := 5 * time.Millisecond
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := setUp()
		if !Busy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// CreatePrivate creates a database file that does not exist yet with mode
// 0600 and its directory with mode 0700, before SQLite opens it: SQLite
// gives the -wal and -shm files the database file's mode, so the three are
// the owner's alone. A symbolic link there is refused, not followed:
// SQLite would write its database, -wal and -shm where it points.
func CreatePrivate(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s is a symbolic link, which a database here is never opened through: move it aside (%w)", path, err)
	}
	if err != nil {
		return err
	}
	return f.Close()
}
