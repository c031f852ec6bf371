package render

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/shellword"
)

// System is every file-system operation render performs. Planning only
// reads; Apply is the only writer. Tests substitute failing systems to
// prove that a failed write loses nothing.
type System interface {
	Lstat(name string) (fs.FileInfo, error)
	EvalSymlinks(name string) (string, error)
	Readlink(name string) (string, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// ReadFile reads a regular file; anything else is an error naming it.
	ReadFile(name string) ([]byte, error)
	// WriteFile replaces name as filewrite.Write does (atomically, or in
	// place for a bind-mounted or hard-linked file, which the result says),
	// if it still holds old (nil: does not exist) just before: else a
	// *filewrite.ChangedError and nothing is written (filewrite.IfUnchanged).
	WriteFile(name string, old, data []byte, perm fs.FileMode) (filewrite.Result, error)
	// CheckOwner is WriteFile's owner decision alone (filewrite.CheckOwner):
	// a *filewrite.NotWritableError for an existing file this process's
	// user could not keep the owner of, so the plan leaves it alone.
	CheckOwner(name string) error
	// Narrow narrows the mode of the existing file name to perm
	// (filewrite.Narrow): never widened.
	Narrow(name string, perm fs.FileMode) error
	// WriteOwn replaces one of render's own files (a .proposed, the
	// record, a backup) as filewrite.Write with filewrite.Owned does: never
	// through a link (a symlink is refused), never in place.
	WriteOwn(name string, data []byte, perm fs.FileMode) error
	// CleanStale removes WriteFile's temp files for base in dir that are
	// older than olderThan (left by a killed run).
	CleanStale(dir, base string, olderThan time.Duration) error
	Remove(name string) error
	MkdirAll(name string, perm fs.FileMode) error
	// LockDir takes an exclusive lock on a directory, so two containers
	// starting on one volume cannot interleave their read-decide-write.
	LockDir(dir string) (unlock func(), err error)
	// LockOwner takes the lock a harness holds while it writes its own
	// file: the proper-lockfile directory <file>.lock that pi (settings.json)
	// and Claude Code (~/.claude.json) create. owner names the harness in
	// the error when the lock stays held.
	LockOwner(file, owner string) (unlock func(), err error)
}

// OS is the real file system.
type OS struct {
	// OwnerLockRetries and OwnerLockStale follow proper-lockfile as pi and
	// Claude Code use it (10 retries, stale after 10 s) unless set.
	OwnerLockRetries int
	OwnerLockStale   time.Duration
	// WriteOptions are passed to filewrite.Write (tests inject faults).
	WriteOptions []filewrite.Option
}

// ReadFile reads a regular file only (see filewrite.ReadRegular): a
// device, FIFO, socket or directory is refused at once, never opened
// blocking.
func (OS) ReadFile(name string) ([]byte, error) { return filewrite.ReadRegular(name, MaxConfigSize) }

// MaxConfigSize is the largest config render reads (a harness config is a
// few kilobytes; this only stops a runaway file from exhausting memory).
const MaxConfigSize = 256 << 20

func (OS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (OS) EvalSymlinks(name string) (string, error)     { return filepath.EvalSymlinks(name) }
func (OS) Readlink(name string) (string, error)         { return os.Readlink(name) }
func (OS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (OS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

func (OS) Remove(name string) error {
	err := os.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// WriteFile writes through filewrite.Write, if name still holds old.
func (o OS) WriteFile(name string, old, data []byte, perm fs.FileMode) (filewrite.Result, error) {
	return filewrite.Write(name, data, perm, append(o.WriteOptions, filewrite.IfUnchanged(old))...)
}

// Narrow narrows through filewrite.Narrow.
func (OS) Narrow(name string, perm fs.FileMode) error { return filewrite.Narrow(name, perm) }

// CheckOwner asks filewrite.CheckOwner.
func (o OS) CheckOwner(name string) error { return filewrite.CheckOwner(name, o.WriteOptions...) }

// WriteOwn writes through filewrite.Write with filewrite.Owned, which
// narrows an existing file's mode to perm (never widens it): render's
// own files hold text from a config (the record's "was", a .proposed) and
// must not be more readable than it.
func (o OS) WriteOwn(name string, data []byte, perm fs.FileMode) error {
	_, err := filewrite.Write(name, data, perm, append(o.WriteOptions, filewrite.Owned())...)
	return err
}

// CleanStale removes filewrite's stale temp files for base in dir.
func (OS) CleanStale(dir, base string, olderThan time.Duration) error {
	return filewrite.CleanStale(dir, base, olderThan)
}

func (OS) LockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func (o OS) LockOwner(file, owner string) (func(), error) {
	retries, stale := o.OwnerLockRetries, o.OwnerLockStale
	if retries == 0 {
		retries = 10
	}
	if stale == 0 {
		stale = 10 * time.Second
	}
	lock := file + ".lock"
	for i := 0; ; i++ {
		err := os.Mkdir(lock, 0o755)
		if err == nil {
			return func() { os.Remove(lock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if msg := lockInTheWay(o, file, owner); msg != "" {
			return nil, errors.New(msg) // never removed: not the harness's, nor render's
		}
		if fi, serr := os.Lstat(lock); serr == nil && time.Since(fi.ModTime()) > stale {
			// A crashed writer's lock, as proper-lockfile treats it; one
			// that cannot be removed (a directory with files in it) is
			// named, not tried for ever (review35 R2: render spun at full
			// CPU, and the container start never ended).
			if rerr := os.Remove(lock); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s is older than %s, a crashed writer's, and cannot be removed: %w; %s is left as it is (fix: remove it, rm -r %s, if no %s is running)", lock, stale, rerr, file, lock, owner)
			}
			continue
		}
		if i >= retries {
			return nil, fmt.Errorf("%s is held by another writer (%s writing its file?); the next start tries again", lock, owner)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockInTheWay is the refusal of a harness's lock path (<file>.lock) that
// is neither the directory proper-lockfile makes nor a regular file (the
// two the stale rule takes over once old): a symlink, dangling or not, a
// FIFO, a socket or a device. Neither the harness nor render can take the
// lock while it is there, and it is no one's lock, so render names it and
// the fix rather than "held by another writer", and never removes it.
// So is a directory with files in it: a lock is an empty one, and the
// stale rule could not remove it (attack116 F1: the dry run, and so
// doctor, said render would write the file the run then refused).
// "" when the path is absent, an empty directory or a regular file.
func lockInTheWay(sys System, file, owner string) string {
	lock := file + ".lock"
	fi, err := sys.Lstat(lock)
	if err != nil || fi.Mode().IsRegular() {
		return ""
	}
	if fi.IsDir() {
		if ents, err := sys.ReadDir(lock); err != nil || len(ents) == 0 {
			return ""
		}
		return refusal(lock, fmt.Sprintf("it is a directory with files in it, not a lock %s or render takes (an empty directory), so neither can lock %s to write it; it is left alone, and so is %s", owner, filepath.Base(file), file),
			fmt.Sprintf("rm -r %s if no %s is running", shellword.Quote(lock), owner))
	}
	what := "a " + filewrite.Kind(fi.Mode())
	if fi.Mode()&fs.ModeSymlink != 0 {
		what, _ = linkKind(sys, lock)
	}
	return refusal(lock, fmt.Sprintf("it is %s, not a lock %s or render takes (a directory), so neither can lock %s to write it; it is left alone, and so is %s", what, owner, filepath.Base(file), file),
		fmt.Sprintf("rm %s if no %s is running", shellword.Quote(lock), owner))
}

// backupsKept is how many of render's own <file>.bak.<time> copies survive.
const backupsKept = 5

// backupLayout is the time format of a backup name; the names sort in time
// order.
const backupLayout = "20060102T150405.000000Z"

// backupName is <file>.bak.<UTC time to the microsecond>.
func backupName(file string, now time.Time) string {
	return file + ".bak." + now.UTC().Format(backupLayout)
}

// isBackupOf reports whether name (a base name) is one of render's own
// backups of the file whose base name is base.
func isBackupOf(base, name string) bool {
	rest, ok := strings.CutPrefix(name, base+".bak.")
	return ok && isBackupTime(rest)
}

// isBackupTime reports whether s is exactly what backupLayout writes
// (digits where the layout has digits, its T . Z elsewhere), so a user's
// own opencode.jsonc.bak.1 or an epoch-named copy is never taken for one
// of render's.
func isBackupTime(s string) bool {
	if len(s) != len(backupLayout) {
		return false
	}
	for i := 0; i < len(s); i++ {
		l, c := backupLayout[i], s[i]
		if '0' <= l && l <= '9' {
			if c < '0' || c > '9' {
				return false
			}
		} else if c != l {
			return false
		}
	}
	return true
}

// writeBackup saves old beside file and prunes all but the newest
// backupsKept of render's own backups; no other file is touched.
func writeBackup(sys System, file string, old []byte, perm fs.FileMode, now time.Time) error {
	if err := sys.WriteOwn(backupName(file, now), old, perm); err != nil {
		return fmt.Errorf("backup of %s: %w", file, err)
	}
	entries, err := sys.ReadDir(filepath.Dir(file))
	if err != nil {
		return nil // the backup exists; pruning is best effort
	}
	base := filepath.Base(file)
	var baks []string
	for _, e := range entries {
		if isBackupOf(base, e.Name()) && e.Type().IsRegular() {
			baks = append(baks, e.Name())
		}
	}
	sort.Strings(baks)
	for len(baks) > backupsKept {
		sys.Remove(filepath.Join(filepath.Dir(file), baks[0]))
		baks = baks[1:]
	}
	return nil
}

// linkKind is what the symlink p is, named with what it points to: a
// link, a dangling one, or one leading back to itself (attack117 F4: a
// loop was called dangling); err is why it cannot be followed, nil when
// it can.
func linkKind(sys System, p string) (what string, err error) {
	to, _ := sys.Readlink(p)
	_, err = sys.EvalSymlinks(p)
	switch {
	case err == nil:
		return "a symlink to " + to, nil
	case loops(err):
		return "a symlink to " + to + " that leads back to itself (a loop of links)", err
	}
	return "a dangling symlink (to " + to + ")", err
}

// loops: err, from following a link, says the links lead back to
// themselves (filepath.EvalSymlinks' own words, or the kernel's ELOOP).
func loops(err error) bool {
	return errors.Is(err, syscall.ELOOP) || err != nil && strings.Contains(err.Error(), "too many links")
}
