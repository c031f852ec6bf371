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
)

// System is every file-system operation render performs. Planning only
// reads; Apply is the only writer. Tests substitute failing systems to
// prove that a failed write loses nothing.
type System interface {
	ReadFile(name string) ([]byte, error)
	Lstat(name string) (fs.FileInfo, error)
	EvalSymlinks(name string) (string, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// WriteFile replaces name atomically (temp file in the same directory,
	// fsync, rename, fsync of the directory). An existing file keeps its
	// mode and owner; a new one gets perm and its directory's owner.
	WriteFile(name string, data []byte, perm fs.FileMode) error
	Remove(name string) error
	MkdirAll(name string, perm fs.FileMode) error
	// LockDir takes an exclusive lock on a directory, so two containers
	// starting on one volume cannot interleave their read-decide-write.
	LockDir(dir string) (unlock func(), err error)
	// LockPi takes pi's own settings lock: the proper-lockfile directory
	// <file>.lock that pi creates while it writes settings.json.
	LockPi(file string) (unlock func(), err error)
}

// OS is the real file system.
type OS struct {
	// PiLockRetries and PiLockStale follow proper-lockfile as pi uses it
	// (10 retries, stale after 10 s) unless set.
	PiLockRetries int
	PiLockStale   time.Duration
}

func (OS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (OS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (OS) EvalSymlinks(name string) (string, error)     { return filepath.EvalSymlinks(name) }
func (OS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (OS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

func (OS) Remove(name string) error {
	err := os.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (OS) WriteFile(name string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(name)
	uid, gid := -1, -1
	if fi, err := os.Stat(name); err == nil {
		perm = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	} else if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
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
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
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

func (o OS) LockPi(file string) (func(), error) {
	retries, stale := o.PiLockRetries, o.PiLockStale
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
		if fi, serr := os.Stat(lock); serr == nil && time.Since(fi.ModTime()) > stale {
			os.Remove(lock) // a crashed writer's lock, as proper-lockfile treats it
			continue
		}
		if i >= retries {
			return nil, fmt.Errorf("%s is held by another writer (pi running?)", lock)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// backupsKept is how many <file>.bak.<time> copies survive.
const backupsKept = 5

// backupName is <file>.bak.<UTC time to the microsecond>; the names sort in
// time order.
func backupName(file string, now time.Time) string {
	return file + ".bak." + now.UTC().Format("20060102T150405.000000Z")
}

// writeBackup saves old beside file and prunes all but the newest
// backupsKept backups.
func writeBackup(sys System, file string, old []byte, perm fs.FileMode, now time.Time) error {
	if err := sys.WriteFile(backupName(file, now), old, perm); err != nil {
		return fmt.Errorf("backup of %s: %w", file, err)
	}
	entries, err := sys.ReadDir(filepath.Dir(file))
	if err != nil {
		return nil // the backup exists; pruning is best effort
	}
	prefix := filepath.Base(file) + ".bak."
	var baks []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && !e.IsDir() {
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
