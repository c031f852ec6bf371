package outbox

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Liveness: which edge processes sharing a palace still run. Each Store
// holds an exclusive flock on <palace>/edge/live/<owner> for as long as it
// is open; the kernel lets go of it when the process dies, SIGKILL too.
// The intents and delete notes a Store writes name it (ops.owner, a
// note's owner), and so does the flush lease its flusher holds (its live
// field): another process leaves an intent or a note whose owner still
// holds its lock to that owner, and takes a lease whose holder's lock is
// free at once. Where flock is not to be had (live_other.go, a file system
// that refuses it), a Store names no owner and everything behaves as
// before: what it leaves is taken for a killed edge's, its lease waits to
// expire.

// liveDir holds the owners' lock files.
const liveDir = "live"

// holdLiveness takes this Store's lock: its owner name and the open lock
// file, or "" and nil where no lock could be taken (why in err).
func holdLiveness(outbox string) (string, io.Closer, error) {
	b := make([]byte, 6)
	crand.Read(b) // never fails (crypto/rand)
	owner := fmt.Sprintf("edge-%d-%s", os.Getpid(), hex.EncodeToString(b))
	f, err := lockOwner(filepath.Join(filepath.Dir(outbox), liveDir), owner)
	if err != nil {
		return "", nil, err
	}
	return owner, f, nil
}

// ErrLocked: another process holds the lock HoldLock asks for.
var ErrLocked = errors.New("held by another process")

// HoldLock takes an exclusive lock on path (made if missing) for as long
// as the file stays open or the process runs: ErrLocked while another
// process holds it; another error where no lock is to be had.
func HoldLock(path string) (*os.File, error) {
	return lockOwner(filepath.Dir(path), filepath.Base(path))
}

// gone says whether owner (of an intent, a delete note, a lease) no
// longer runs, removing its lock file when it is found free. An owner ""
// is gone: rows an older build wrote (it named none, and took every
// unsettled row for a killed edge's: so does this one for those), or a
// process that could hold no lock.
func (s *Store) gone(owner string) bool {
	switch {
	case owner == "":
		return true
	case owner == s.owner:
		return false
	case owner != filepath.Base(owner) || strings.HasPrefix(owner, "."):
		return true // not a name this code made: nobody's lock
	}
	return ownerGone(filepath.Join(filepath.Dir(s.path), liveDir), owner)
}
