package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// StayedLocal counts the writes the local palace took that an edge could
// not put in the outbox (a full disk): nothing sends them to the primary
// and no op names them; `devbox-config join`, which compares the local
// palace with the primary by content, does. They are kept in their own
// small file beside the outbox (StayedLocalFile), which a full disk does
// not stop, so `edge status`, doctor and each session start can say so.
type StayedLocal struct {
	N     int       `json:"n"`
	Since time.Time `json:"since"` // the first of them
	Last  time.Time `json:"last"`  // the latest of them
}

// String says it for `edge status` and doctor, with the fix.
func (sl StayedLocal) String() string {
	return fmt.Sprintf("%d write(s) stayed in the local palace only while the outbox could not record them (since %s): no op sends them to the primary; run `devbox-config join` (it sends what the primary lacks), once the outbox's disk has space", sl.N, sl.Since.Local().Format(time.RFC3339))
}

// StayedLocalFile is the record of StayedLocal, beside the outbox: JSON
// padded with spaces to stayedLocalSize bytes, all spaces while there is
// none.
const StayedLocalFile = "stayed-local.json"

// stayedLocalSize is the record file's fixed length. The file is made at
// this length with real bytes when the outbox opens (its disk has space
// then), and only ever rewritten in place at offset 0 at the same length:
// an overwrite of allocated blocks needs no new ones on ext4, xfs or
// tmpfs, so it goes through on a full disk. A copy-on-write file system
// (btrfs, zfs) allocates anew on every write and may refuse it still:
// the edge then keeps the count and tries again at its next write.
const stayedLocalSize = 512

// stayedLocalPath is the record file of the outbox at outboxPath.
func stayedLocalPath(outboxPath string) string {
	return filepath.Join(filepath.Dir(outboxPath), StayedLocalFile)
}

// reserveStayedLocal makes the record file of the outbox at outboxPath at
// its full length (kept as it is when it has it).
func reserveStayedLocal(outboxPath string) error {
	return withStayedLocal(outboxPath, true, func(*StayedLocal) (*StayedLocal, bool) { return nil, false })
}

// NoteStayedLocal adds sl to the record of the outbox at outboxPath,
// under the file's lock: every edge process on the palace adds its own.
func NoteStayedLocal(outboxPath string, sl StayedLocal) error {
	err := withStayedLocal(outboxPath, false, func(old *StayedLocal) (*StayedLocal, bool) {
		if old != nil {
			sl.N += old.N
			sl.Since, sl.Last = minTime(sl.Since, old.Since), maxTime(sl.Last, old.Last)
		}
		return &sl, true
	})
	if err != nil {
		return fmt.Errorf("outbox: recording %d write(s) that stayed local: %w", sl.N, err)
	}
	return nil
}

// ClearStayedLocal drops the record of the outbox at outboxPath once a
// join that read the local palace at readAt has sent what it lacked: only
// if its last write came before, or a later one would be forgotten unsent.
func ClearStayedLocal(outboxPath string, readAt time.Time) error {
	err := withStayedLocal(outboxPath, false, func(old *StayedLocal) (*StayedLocal, bool) {
		return nil, old != nil && old.Last.Before(readAt)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no record
	}
	return err
}

// ReadStayedLocal reads the record of the outbox at outboxPath (nil:
// none).
func ReadStayedLocal(outboxPath string) (sl *StayedLocal, err error) {
	err = withStayedLocal(outboxPath, false, func(old *StayedLocal) (*StayedLocal, bool) {
		sl = old
		return nil, false
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // none
	}
	return sl, err
}

// withStayedLocal reads the record under an exclusive lock on its file and
// has change say what to write in its place (write false: nothing); the
// file is made (at its full length) only when reserve.
func withStayedLocal(outboxPath string, reserve bool, change func(*StayedLocal) (*StayedLocal, bool)) error {
	path := stayedLocalPath(outboxPath)
	flag := os.O_RDWR
	if reserve {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() // its lock goes with it; a write's error is Sync's
	if err := lockFile(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	buf := make([]byte, stayedLocalSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if n < stayedLocalSize {
		if !reserve {
			return fmt.Errorf("%s is %d bytes, not %d: an edge start makes it again once it is removed", path, n, stayedLocalSize)
		}
		return writeStayedLocal(f, bytes.Clone(buf[:n]))
	}
	var old *StayedLocal
	if data := bytes.TrimSpace(buf); len(data) > 0 {
		old = new(StayedLocal)
		if err := json.Unmarshal(data, old); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	sl, write := change(old)
	if !write {
		return nil
	}
	var data []byte
	if sl != nil {
		if data, err = json.Marshal(sl); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return writeStayedLocal(f, data)
}

// writeStayedLocal writes data padded with spaces over the whole record
// file, in place, and syncs it.
func writeStayedLocal(f *os.File, data []byte) error {
	if len(data) > stayedLocalSize {
		return fmt.Errorf("%s: the record is %d bytes, more than its %d", f.Name(), len(data), stayedLocalSize)
	}
	buf := append(data, bytes.Repeat([]byte(" "), stayedLocalSize-len(data))...)
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
