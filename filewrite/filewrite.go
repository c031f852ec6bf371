package filewrite

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Result says how Write put the bytes in place.
type Result struct {
	// InPlace: the existing inode was overwritten because it could not be
	// renamed over (bind mount) or is hard-linked. Not atomic.
	InPlace bool
}

// NotRegularError is returned for a path that exists but is not a regular
// file (after following symlinks).
type NotRegularError struct {
	Path string // the path as given
	Real string // the path with symlinks followed
	Kind string // "directory", "FIFO", "socket", "character device", ...
}

func (e *NotRegularError) Error() string {
	if e.Real != "" && e.Real != e.Path {
		return fmt.Sprintf("%s is a link to %s, a %s, not a regular file", e.Path, e.Real, e.Kind)
	}
	return fmt.Sprintf("%s is a %s, not a regular file", e.Path, e.Kind)
}

// Option changes how Write works; the options exist for tests.
type Option func(*config)

type config struct {
	owned  bool
	user   user // the process's user, whose writes must keep a file's owner
	rename func(oldpath, newpath string) error
	// fault, when set, is called at each named step; an error stops the
	// write there as a kill would (temp files are left as they are).
	fault func(step string) error
	// expect, when set, is what the file must still hold just before it
	// is replaced (nil: that there is still no file): IfUnchanged.
	expect *[]byte
}

// Owned marks path as the caller's own file (render's .proposed, record
// and backups), not one a user may have linked elsewhere: a symlink at path
// is refused with a *NotRegularError naming it, never followed, and a file
// with other hard links is replaced by the rename like any other (its other
// names keep the old bytes), never written in place. An existing file's
// mode is narrowed to perm, never widened: the caller's files may hold text
// from a config and must not be more readable than perm.
func Owned() Option {
	return func(c *config) { c.owned = true }
}

// user is a process's effective user and groups (root: uid 0).
type user struct {
	uid  int
	gids []int
}

// self is this process's user.
func self() user {
	gids, _ := os.Getgroups() // none known: only the effective group counts
	return user{os.Geteuid(), append(gids, os.Getegid())}
}

// AsUser makes Write and CheckOwner act for uid and gids instead of the
// process's user (tests: the decision without running as another user).
func AsUser(uid int, gids ...int) Option {
	return func(c *config) { c.user = user{uid, gids} }
}

// keeps reports whether a file this user makes can be given owner uid and
// group gid: root can give any; anyone else only their own uid and groups.
func (u user) keeps(uid, gid int) bool {
	return u.uid == 0 || uid < 0 || (uid == u.uid && slices.Contains(u.gids, gid))
}

// NotWritableError is returned for an existing file whose owner this
// user (not root) cannot give back to a replacement: written by rename it
// would become theirs, so it is left as it is, as a read-only file is.
type NotWritableError struct {
	Path     string
	UID, GID int // its owner
	Mode     fs.FileMode
	User     int // the uid of the process that was to write it
}

func (e *NotWritableError) Error() string {
	return fmt.Sprintf("%s belongs to %s (group %d, mode %04o), and a file this user (uid %d) writes would be theirs, so it is left alone; to let it be updated, give it to this user and a group of theirs: sudo chown %d:$(id -g) %s",
		e.Path, OwnerName(e.UID), e.GID, e.Mode, e.User, e.User, e.Path)
}

// OwnerName names a uid for a message: "root" or "uid N".
func OwnerName(uid int) string {
	if uid == 0 {
		return "root"
	}
	return fmt.Sprint("uid ", uid)
}

// WithRename replaces os.Rename, so a test can make it fail with EBUSY or
// EXDEV as a bind-mounted file does.
func WithRename(f func(oldpath, newpath string) error) Option {
	return func(c *config) { c.rename = f }
}

// Steps WithFault is called at.
const (
	StepTempWritten = "temp-written" // temp file written and fsynced, not yet renamed
	StepRenamed     = "renamed"      // renamed, directory not yet fsynced
	StepCompared    = "compared"     // IfUnchanged: the file read again and found as it was
)

// WithFault calls f at each step (StepTempWritten, StepCompared,
// StepRenamed); when it
// returns an error Write returns it at once and cleans up nothing, as if
// the process had been killed there.
func WithFault(f func(step string) error) Option {
	return func(c *config) { c.fault = f }
}

// IfUnchanged makes Write check, just before it replaces the file, that
// the file still holds exactly old (nil: that there is still no file), the
// bytes the caller read and decided on: a file another program or an
// editor saved in between is left as it is, with a *ChangedError, and
// nothing is written. The check compares the size, then the bytes: a hash
// would cost the same read, and an mtime misses a save within its
// granularity or one that keeps it (cp -p, rsync -t).
func IfUnchanged(old []byte) Option {
	return func(c *config) { c.expect = &old }
}

// ChangedError is returned by Write with IfUnchanged for a file that no
// longer holds what the caller read.
type ChangedError struct {
	Path string
}

func (e *ChangedError) Error() string {
	return e.Path + " changed since it was read, so it was not written"
}

// unchanged is IfUnchanged's check of the file at real (path as given).
// It compares in chunks, so a large file is not held twice.
func (c config) unchanged(path, real string) error {
	if c.expect == nil {
		return nil
	}
	old := *c.expect
	f, fi, err := OpenRegular(real, os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist) && old == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist) || (err == nil && (old == nil || fi.Size() != int64(len(old)))):
		if f != nil {
			f.Close()
		}
		return &ChangedError{Path: path}
	case err != nil:
		return fmt.Errorf("look at %s again before replacing it: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, min(len(old), 1<<20))
	for off := 0; off < len(old); {
		n, err := io.ReadFull(f, buf[:min(len(buf), len(old)-off)])
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // cut short since the look
			return &ChangedError{Path: path}
		}
		if err != nil {
			return fmt.Errorf("read %s again before replacing it: %w", path, err)
		}
		if !bytes.Equal(buf[:n], old[off:off+n]) {
			return &ChangedError{Path: path}
		}
		off += n
	}
	if err := c.fault(StepCompared); err != nil {
		return err
	}
	// A save by rename while the bytes were compared (a large file takes
	// a while) put another file at real: the one compared is not it.
	now, err := os.Lstat(real)
	if err != nil || !os.SameFile(fi, now) || now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
		return &ChangedError{Path: path}
	}
	return nil
}

// TempName returns a fresh temp file name for base: ".<base>.tmp-<16 hex>".
func TempName(base string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return "." + base + ".tmp-" + hex.EncodeToString(b[:])
}

// TempTarget reports whether name is a temp file name of Write's pattern
// (or of the os.CreateTemp names render's writer used before this
// package) and, if so, the base name of the file it was going to replace.
func TempTarget(name string) (base string, ok bool) {
	// ".<base>.tmp-<16 lowercase hex>", or the earlier writer's
	// ".<base>.tmp<1 to 10 decimal digits>" (os.CreateTemp's names).
	// Matched by hand: a regexp compiled at init costs every start.
	if len(name) < 2 || name[0] != '.' {
		return "", false
	}
	i := strings.LastIndex(name, ".tmp")
	if i < 2 {
		return "", false
	}
	suffix := name[i+len(".tmp"):]
	switch {
	case len(suffix) == 17 && suffix[0] == '-' && strings.Trim(suffix[1:], "0123456789abcdef") == "":
	case len(suffix) >= 1 && len(suffix) <= 10 && strings.Trim(suffix, "0123456789") == "":
	default:
		return "", false
	}
	return name[1:i], true
}

// Resolve follows symlinks. A path that does not exist resolves to itself;
// a symlink whose target is missing is an error (a dangling link is not
// replaced by a new file).
func Resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return path, err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path, fmt.Errorf("%s is a symlink that cannot be followed: %w", path, err)
	}
	return real, nil
}

func regular(path, real string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return &NotRegularError{Path: path, Real: real, Kind: Kind(fi.Mode())}
}

// Kind names a file's type as a message says it: "directory", "FIFO",
// "symlink", ... ("special file" for any other that is not regular).
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "special file"
}

// ErrTooLarge is returned by ReadRegular for a file over its bound.
var ErrTooLarge = errors.New("file too large")

// ReadRegular reads a regular file of at most max bytes, following
// symlinks. It refuses anything else with a *NotRegularError: it stats
// before opening, opens with O_NONBLOCK (a FIFO swapped in between cannot
// block) and checks the opened file again.
func ReadRegular(path string, max int64) ([]byte, error) {
	real, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if err := regular(path, real, fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(path, real, fi); err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w (%d bytes, the limit is %d)", path, ErrTooLarge, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", path, ErrTooLarge, max)
	}
	return data, nil
}

// OpenRegular opens path with flag (perm for a file O_CREATE makes), never
// through a symlink and only as a regular file: anything else is refused
// with a *NotRegularError (Kind "symlink" for a link), looked at before it
// is opened, so a FIFO or a device is not even opened, and checked again
// once open, against a swap in between (O_NOFOLLOW, and O_NONBLOCK: a FIFO
// swapped in cannot block the open). It returns the open file's own
// FileInfo, from that second look.
func OpenRegular(path string, flag int, perm os.FileMode) (*os.File, os.FileInfo, error) {
	if fi, err := os.Lstat(path); err == nil {
		if err := regular(path, path, fi); err != nil {
			return nil, nil, err
		}
	}
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, &NotRegularError{Path: path, Kind: "symlink"}
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(path, path, fi)
	}
	if err != nil {
		f.Close() // the refusal is the error to report
		return nil, nil, err
	}
	return f, fi, nil
}

// Narrow narrows the mode of the existing file at path to perm in place,
// as Write with Owned narrows a file it replaces (never widened; a symlink
// or other special file is refused with a *NotRegularError, without
// opening it), for a file of the caller's that is kept open rather than
// replaced: a SQLite database and its -wal and -shm (the edge's outbox). A
// path that does not exist is left alone.
func Narrow(path string, perm os.FileMode) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := regular(path, path, fi); err != nil || fi.Mode().Perm()&^perm == 0 {
		return err
	}
	f, fi, err := OpenRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(fi.Mode().Perm() & perm); err != nil {
		return fmt.Errorf("narrow %s to %04o: %w", path, perm, err)
	}
	return nil
}

// CheckOwner is Write's owner decision alone, made without writing: a
// *NotWritableError when Write would leave the existing file at path alone
// because its owner cannot be kept, else nil (a file that does not exist
// or cannot be looked at is left to Write, which says why).
func CheckOwner(path string, opts ...Option) error {
	_, err := newConfig(opts).target(path, 0)
	var nw *NotWritableError
	if errors.As(err, &nw) {
		return nw
	}
	return nil
}

func newConfig(opts []Option) config {
	c := config{user: self(), rename: os.Rename, fault: func(string) error { return nil }}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Write replaces the file at path with data, as the package doc says. perm
// is the mode of a new file; an existing file keeps its own (Owned:
// narrowed to perm).
func Write(path string, data []byte, perm os.FileMode, opts ...Option) (Result, error) {
	c := newConfig(opts)
	t, err := c.target(path, perm)
	if err != nil {
		return Result{}, err
	}
	real, dir, base := t.real, filepath.Dir(t.real), filepath.Base(t.real)
	if t.linked && !c.owned {
		if err := c.unchanged(path, real); err != nil {
			return Result{}, err
		}
		return Result{InPlace: true}, writeInPlace(path, real, data)
	}
	tmp, err := createTemp(dir, base)
	if err != nil {
		return Result{}, err
	}
	if err := fillTemp(tmp, data, t.perm, t.uid, t.gid); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return Result{}, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := c.fault(StepTempWritten); err != nil {
		return Result{}, err
	}
	if err := c.unchanged(path, real); err != nil {
		os.Remove(tmp.Name())
		return Result{}, err
	}
	if err := c.rename(tmp.Name(), real); err != nil {
		os.Remove(tmp.Name())
		if !c.owned && (errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV)) {
			return Result{InPlace: true}, writeInPlace(path, real, data)
		}
		return Result{}, fmt.Errorf("replace %s: %w", path, err)
	}
	if err := c.fault(StepRenamed); err != nil {
		return Result{}, err
	}
	if err := syncDir(dir); err != nil {
		return Result{}, fmt.Errorf("%s written, but syncing its directory failed: %w", path, err)
	}
	return Result{}, nil
}

// target is the file Write replaces and what it keeps of it.
type target struct {
	real     string      // path with symlinks followed (path itself when owned)
	perm     os.FileMode // the existing file's mode, else the caller's
	uid, gid int         // the existing file's owner, else its directory's; -1: unknown
	linked   bool        // the file has other hard links
}

func (c config) target(path string, perm os.FileMode) (target, error) {
	t := target{real: path, perm: perm, uid: -1, gid: -1}
	stat := os.Lstat // owned: a symlink is not regular, so refused below
	if !c.owned {
		var err error
		if t.real, err = Resolve(path); err != nil {
			return t, err
		}
		stat = os.Stat
	}
	fi, err := stat(t.real)
	if errors.Is(err, fs.ErrNotExist) {
		if dfi, err := os.Stat(filepath.Dir(t.real)); err == nil {
			t.uid, t.gid, _ = owner(dfi)
		}
		return t, nil
	}
	if err != nil {
		return t, err
	}
	if err := regular(path, t.real, fi); err != nil {
		return t, err
	}
	t.perm = fi.Mode().Perm()
	if c.owned {
		t.perm &= perm
	}
	var links uint64
	t.uid, t.gid, links = owner(fi)
	t.linked = links > 1
	if !c.owned && !c.user.keeps(t.uid, t.gid) {
		return t, &NotWritableError{Path: path, UID: t.uid, GID: t.gid, Mode: t.perm, User: c.user.uid}
	}
	return t, nil
}

// owner is a file's owner and link count (-1, -1, 0 if unknown).
func owner(fi fs.FileInfo) (uid, gid int, links uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1, 0
	}
	return int(st.Uid), int(st.Gid), uint64(st.Nlink)
}

func createTemp(dir, base string) (*os.File, error) {
	for i := 0; ; i++ {
		name := filepath.Join(dir, TempName(base))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) || i >= 10 {
			// Name the directory, not the temp file: that is what the
			// user can fix (e.g. a read-only directory).
			return nil, fmt.Errorf("cannot create a file in %s: %w", dir, unwrapPath(err))
		}
	}
}

func fillTemp(tmp *os.File, data []byte, perm os.FileMode, uid, gid int) error {
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if uid >= 0 && (uid != os.Getuid() || gid != os.Getgid()) {
		// Only root can give a file away; anyone else keeps the file theirs.
		if err := tmp.Chown(uid, gid); err != nil && os.Getuid() == 0 {
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	return tmp.Close()
}

// writeInPlace overwrites the inode at real: write from offset 0, truncate
// to the new length, fsync. The file's mode, owner and links are kept.
func writeInPlace(path, real string, data []byte) error {
	f, err := os.OpenFile(real, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("open %s to write in place: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(path, real, fi)
	}
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s in place: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some file systems cannot fsync a directory; that is not a failure
	// of the write.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

// CleanStale removes the temp files Write left in dir for the target named
// base (".<base>.tmp-<16 hex>", see TempName) whose modification time is
// more than olderThan ago. Nothing else is touched. It returns the first
// error; a file that vanished meanwhile is not one.
func CleanStale(dir, base string, olderThan time.Duration) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var first error
	for _, e := range entries {
		if b, ok := TempTarget(e.Name()); !ok || b != base || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) <= olderThan {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// unwrapPath drops the *PathError's path (a temp name) and keeps its cause.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
