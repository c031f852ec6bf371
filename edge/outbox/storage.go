package outbox

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/joakimp/devbox-config/sqlitewal"
)

// MinFree is the free space under which the outbox's file system counts
// as full when an open fails: SQLite says "disk I/O error" when it cannot
// grow the -shm or -wal, not "database or disk is full".
const MinFree = 1 << 20

// Space is what statfs says of the file system under a directory.
type Space struct {
	Free     uint64 // bytes an unprivileged writer may still use
	ReadOnly bool   // mounted read-only
	Mount    string // where it is mounted ("" if not found)
}

// mountOf is the mount dir is on, from mountinfo (proc_pid_mountinfo(5)):
// the longest mount point that is dir or above it (the last listed of
// equals: the one on top; "" for none). A bind mount (a container's
// volume) is named where it is mounted, not where its file system is.
func mountOf(dir string, mountinfo io.Reader) (point string) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(nil, 1<<20) // a line holds every mount option
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // id parent dev root point options ...
		if len(f) < 5 {
			continue // not a mount line
		}
		mp := unescapeMount(f[4])
		if len(mp) >= len(point) && (mp == "/" || dir == mp || strings.HasPrefix(dir, mp+"/")) {
			point = mp
		}
	}
	if sc.Err() != nil {
		return "" // a partial list may name a mount below the right one
	}
	return point
}

// unescapeMount undoes mountinfo's octal escapes (\040 a space, \011 a
// tab, \012 a newline, \134 a backslash).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// StatFS reads a directory's Space (statfs on Linux).
type StatFS func(dir string) (Space, error)

// StorageError is an Open the outbox's file system refused (full,
// mounted read-only, or not writable by this user), not its file: the
// file may be whole, and moving it aside would lose its queued writes.
type StorageError struct {
	Path  string
	Kind  string // "full", "read-only" or "permission"
	Space Space  // zero when statfs failed
	Err   error
}

func (e *StorageError) Unwrap() error { return e.Err }

func (e *StorageError) Error() string {
	return fmt.Sprintf("outbox %s cannot be opened for writing: %s (%v); %s", e.Path, e.Why(), e.Err, e.Fix())
}

// Why says what stops the open, without the underlying error.
func (e *StorageError) Why() string {
	switch e.Kind {
	case "full":
		return fmt.Sprintf("the file system it is on (%s) is full, %d bytes free", e.mount(), e.Space.Free)
	case "read-only":
		return fmt.Sprintf("the file system it is on (%s) is mounted read-only", e.mount())
	}
	return "this user may not write it or its directory"
}

// Fix is what the user does; the file itself needs nothing.
func (e *StorageError) Fix() string {
	const keep = "; the outbox then opens again with its queued writes (do not move it aside: they would be lost)"
	switch e.Kind {
	case "full":
		return fmt.Sprintf("free space on %s%s", e.mount(), keep)
	case "read-only":
		return fmt.Sprintf("remount %s read-write (`mount -o remount,rw %s`, or the container's volume without :ro)%s", e.mount(), e.mount(), keep)
	}
	return fmt.Sprintf("give this user the outbox back (`chown -R $(id -u):$(id -g) %s` and `chmod 700` on it, `chmod 600` on its files), or run as its owner%s", filepath.Dir(e.Path), keep)
}

func (e *StorageError) mount() string {
	if e.Space.Mount != "" {
		return e.Space.Mount
	}
	return "the outbox's disk"
}

// SQLite's primary result codes a storage fault gives.
const (
	sqlitePerm     = 3
	sqliteReadOnly = 8
	sqliteFull     = 13
)

// storageFault is err as a *StorageError when the file system under path
// caused it (a full disk, a read-only mount, permissions), else nil.
// statfs may be nil (no look at free space).
func storageFault(path string, err error, statfs StatFS) *StorageError {
	var sp Space
	var spErr error = errors.ErrUnsupported
	if statfs != nil {
		sp, spErr = statfs(filepath.Dir(path))
	}
	code := -1
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		code = coded.Code() & 0xff
	}
	kind := ""
	switch {
	case errors.Is(err, syscall.EROFS) || spErr == nil && sp.ReadOnly: // statfs counts nothing free on some
		kind = "read-only"
	case errors.Is(err, syscall.ENOSPC) || code == sqliteFull || spErr == nil && sp.Free < MinFree:
		kind = "full"
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || code == sqliteReadOnly || code == sqlitePerm:
		kind = "permission"
	default:
		return nil
	}
	if spErr != nil {
		sp = Space{}
	}
	return &StorageError{Path: path, Kind: kind, Space: sp, Err: err}
}

// Peek counts an outbox's ops by state, read only: for one Open refused
// for its file system. A read that needs the -shm (which a full or
// read-only file system may not give) falls back to the main file alone,
// and complete is then false when a -wal with anything in it exists (what
// it holds is not counted).
func Peek(path string) (byState map[State]int, complete bool, err error) {
	byState = map[State]int{}
	complete, err = readFile(path, func(db *sql.DB) error {
		rows, err := db.Query(`SELECT state, COUNT(*) FROM ops GROUP BY state`)
		if err != nil {
			return err
		}
		defer rows.Close() // read only
		clear(byState)
		for rows.Next() {
			var st State
			var c int
			if err := rows.Scan(&st, &c); err != nil {
				return err
			}
			byState[st] = c
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false, err
	}
	return byState, complete, nil
}

// readFile runs read on the outbox file at path opened read only; where
// that needs the -shm a full or read-only file system may not give, on
// the main file alone, and complete is then false when a -wal with
// anything in it exists (what it holds is not read).
func readFile(path string, read func(*sql.DB) error) (complete bool, err error) {
	file := sqlitewal.URI(path)
	err = readDSN(file+"?mode=ro&_pragma=busy_timeout(500)", read)
	if err == nil {
		return true, nil
	}
	if err2 := readDSN(file+"?mode=ro&immutable=1", read); err2 != nil {
		return false, errors.Join(err, err2)
	}
	wal, err := os.Stat(path + "-wal")
	return err != nil || wal.Size() == 0, nil
}

func readDSN(dsn string, read func(*sql.DB) error) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	defer db.Close() // read only
	return read(db)
}
