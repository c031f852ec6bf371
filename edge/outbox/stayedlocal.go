package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/mailbox"
)

// StayedLocal counts the writes the local palace took that an edge could
// not put in the outbox (a full disk, a read-only mount, an outbox that
// would not open): nothing sends them to the primary and no op names
// them; `devbox-config join`, which compares the local
// palace with the primary by content, does. They are kept in their own
// small file beside the outbox (StayedLocalFile), which a full disk does
// not stop, so `edge status`, doctor and each session start can say so;
// one record for each primary the writes were meant for.
type StayedLocal struct {
	Primary string    `json:"primary"` // its URL, with no credentials (ladder.RedactURL)
	N       int       `json:"n"`
	Since   time.Time `json:"since"` // the first of them
	Last    time.Time `json:"last"`  // the latest of them
}

// String says it for `edge status` and the session's instructions, with
// the fix; the primary as read from the file, made printable
// (mailbox.Printable): whoever can write the palace wrote it.
func (sl StayedLocal) String() string {
	return fmt.Sprintf("%d write(s) stayed in the local palace only while the outbox could not record them (since %s): no op sends them to the primary %s; %s, run `devbox-config edge flush` (it sends the writes queued before), then `devbox-config join` to it (it sends what the primary lacks)", sl.N, sl.Since.Local().Format(time.RFC3339), mailbox.Printable(sl.Primary), OnceItTakesWrites)
}

// OnceItTakesWrites says when the writes that stayed local can be sent,
// worded for every cause the outbox had: the record keeps none.
const OnceItTakesWrites = "once the outbox takes writes again (a full disk freed, a read-only mount made writable, a newer devbox-config run again, a corrupt outbox moved aside)"

// StayedLocalFile is the records of StayedLocal, beside the outbox: a
// JSON array padded with spaces to stayedLocalSize bytes, all spaces
// while there is none.
const StayedLocalFile = "stayed-local.json"

// stayedLocalSize is the record file's fixed length. The file is made at
// this length with real bytes when the outbox opens (its disk has space
// then), and only ever rewritten in place at offset 0 at the same length:
// an overwrite of allocated blocks needs no new ones on ext4, xfs or
// tmpfs, so it goes through on a full disk. A copy-on-write file system
// (btrfs, zfs) allocates anew on every write and may refuse it still,
// and a read-only mount refuses every write: the edge then keeps the
// count and tries again at its next write, every lease and at its stop.
const stayedLocalSize = 4096

// stayedLocalPath is the record file of the outbox at outboxPath.
func stayedLocalPath(outboxPath string) string {
	return filepath.Join(filepath.Dir(outboxPath), StayedLocalFile)
}

// reserveStayedLocal makes the record file of the outbox at outboxPath at
// its full length (kept as it is when it has it).
func reserveStayedLocal(outboxPath string) error {
	return withStayedLocal(outboxPath, reserve, func([]StayedLocal) ([]StayedLocal, bool) { return nil, false })
}

// NoteStayedLocal adds sl to the record of its primary in the outbox at
// outboxPath, under the file's lock: every edge process on the palace
// adds its own.
func NoteStayedLocal(outboxPath string, sl StayedLocal) error {
	err := withStayedLocal(outboxPath, update, func(recs []StayedLocal) ([]StayedLocal, bool) {
		i := slices.IndexFunc(recs, func(r StayedLocal) bool { return SamePrimary(r.Primary, sl.Primary) })
		if i < 0 {
			return append(recs, sl), true
		}
		old := recs[i]
		recs[i].N += sl.N
		recs[i].Since, recs[i].Last = minTime(sl.Since, old.Since), maxTime(sl.Last, old.Last)
		return recs, true
	})
	if err != nil {
		return fmt.Errorf("outbox: recording %d write(s) that stayed local: %w", sl.N, err)
	}
	return nil
}

// ClearStayedLocal drops the record of primary in the outbox at
// outboxPath once a join to it that read the local palace at readAt has
// sent what it lacked: only if its last write came before, or a later one
// would be forgotten unsent. Another primary's record stays: the join
// sent nothing there.
func ClearStayedLocal(outboxPath, primary string, readAt time.Time) error {
	err := withStayedLocal(outboxPath, update, func(recs []StayedLocal) ([]StayedLocal, bool) {
		kept := slices.DeleteFunc(slices.Clone(recs), func(r StayedLocal) bool { return SamePrimary(r.Primary, primary) && r.Last.Before(readAt) })
		return kept, len(kept) < len(recs)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no record
	}
	return err
}

// ReadStayedLocal reads the records of the outbox at outboxPath, one for
// each primary (none: nil). It writes nothing: a read-only file is read.
func ReadStayedLocal(outboxPath string) (recs []StayedLocal, err error) {
	err = withStayedLocal(outboxPath, readOnly, func(old []StayedLocal) ([]StayedLocal, bool) {
		recs = old
		return nil, false
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // none
	}
	return recs, err
}

// How withStayedLocal opens the record file.
const (
	readOnly = iota // a shared lock, no write
	update          // an exclusive lock; change's records written
	reserve         // update, the file made (at its full length) if missing or short
)

// withStayedLocal reads the records under a lock on their file and has
// change say what to write in its place (write false: nothing); how is
// readOnly, update or reserve.
func withStayedLocal(outboxPath string, how int, change func([]StayedLocal) ([]StayedLocal, bool)) error {
	path := stayedLocalPath(outboxPath)
	f, err := openStayedLocal(path, how)
	if err != nil {
		return err
	}
	defer f.Close() // its lock goes with it; a write's error is Sync's
	if err := lockFile(f, how == readOnly); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	buf := make([]byte, stayedLocalSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if n < stayedLocalSize {
		if how != reserve {
			return fmt.Errorf("%s is %d bytes, not %d: an edge start makes it again once it is removed", path, n, stayedLocalSize)
		}
		return writeStayedLocal(f, bytes.Clone(buf[:n]))
	}
	var old []StayedLocal
	if data := bytes.TrimSpace(buf); len(data) > 0 {
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	// None an edge writes; shown, they would tell of nothing, or carry
	// words of the file's writer into the agent's instructions (attack42
	// L1, attack43 N5).
	old = slices.DeleteFunc(old, func(r StayedLocal) bool { return r.N <= 0 || !plainURL(r.Primary) })
	recs, write := change(old)
	if !write {
		return nil
	}
	var data []byte
	if len(recs) > 0 {
		if data, err = json.Marshal(recs); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return writeStayedLocal(f, data)
}

// openStayedLocal opens the record file at path as how says, never
// through a link: a symlink there is refused, and so is anything but a
// regular file (filewrite.OpenRegular) or one with another name (a hard
// link), which would be written over wherever it is (attack42 M1,
// attack43 N3). A refused file is left as it is: the error says why, for
// edge status and doctor.
func openStayedLocal(path string, how int) (*os.File, error) {
	flag := os.O_RDONLY
	switch how {
	case update:
		flag = os.O_RDWR
	case reserve:
		flag = os.O_RDWR | os.O_CREATE
	}
	f, fi, err := filewrite.OpenRegular(path, flag, 0o600)
	if nr := (*filewrite.NotRegularError)(nil); errors.As(err, &nr) {
		return nil, fmt.Errorf("%w: %w", err, errNotRecord)
	}
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		f.Close() // the refusal is the error to report
		return nil, fmt.Errorf("%s has %d names (a hard link): %w", path, st.Nlink, errNotRecord)
	}
	return f, nil
}

// errNotRecord is a record file that is no file of the edge's own (a
// symlink, a hard link, a directory, a special file): nothing reads or
// writes it.
var errNotRecord = errors.New("the edge never reads or writes through it")

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

// SamePrimary says whether URLs a and b name one primary: the case of
// their scheme and host, a default port and a trailing slash aside.
func SamePrimary(a, b string) bool {
	return normalPrimary(a) == normalPrimary(b)
}

// normalPrimary is raw with its scheme and host in lower case, with no
// default port, credentials, query or trailing slash (raw if no URL).
func normalPrimary(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		u.Host = strings.TrimSuffix(u.Host, ":"+p)
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/"), strings.TrimSuffix(u.RawPath, "/")
	return u.String()
}

// plainURL: an http(s) URL as an edge records its primary (without
// credentials, query or fragment, nothing a shell or a reader could take
// for more than an address).
func plainURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		u.RawQuery == "" && u.Fragment == "" && !strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f })
}
