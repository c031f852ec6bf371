//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package outbox

import (
	"errors"
	"os"
)

// Without flock no process's liveness is known: a Store names no owner,
// and every owner is taken for gone (live.go says what that keeps).
func lockOwner(string, string) (*os.File, error) {
	return nil, errors.New("no flock on this platform")
}

func ownerGone(string, string) bool { return true }

func sweepLive(string) {}

// lockFile locks nothing: without flock, edge processes on one palace
// that note writes at the same moment may lose one's count.
func lockFile(*os.File, bool) error { return nil }
