package sqlitewal

import (
	"strings"
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
