package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
)

// memoWriter writes the start memo (render/memo) under base, the home or
// $XDG_CACHE_HOME. The memo is a cache of render's own, so unlike a user's
// config it is never written through anything another user could have put
// in the way (ownedPath): checked before the directories are made (so root
// rendering over a user's home writes no memo there and creates no
// root-owned ~/.cache) and again after (so a link planted while they were
// made is not followed).
func memoWriter(base string) func(path string, data []byte) error {
	return func(path string, data []byte) error {
		if err := ownedPath(path, base); err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := ownedPath(path, base); err != nil {
			return err
		}
		_, err := filewrite.Write(path, data, 0o600)
		return err
	}
}

// ownedPath checks every entry from base down to path that exists: it
// belongs to the user running this, a directory among them is not
// world-writable (unless sticky, as /tmp: others cannot move what is ours
// out of it), and path itself, if it exists, is a regular file with one link.
func ownedPath(path, base string) error {
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()):
			return fmt.Errorf("%s belongs to another user", p)
		case fi.IsDir() && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("%s is writable by anyone", p)
		case p == path && (!fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Nlink != 1):
			return fmt.Errorf("%s is not a regular file of its own", p)
		}
		if p == base || p == filepath.Dir(p) {
			return nil
		}
	}
}

// cleanMemoTemps removes a killed earlier memo write's temp file (older
// than a minute) beside path, where ownedPath allows writing. A start
// answered from the memo sees one there (the memo scans its own
// directory) and runs in full, which comes here.
func cleanMemoTemps(path, base string) error {
	if err := ownedPath(path, base); err != nil {
		return err
	}
	err := filewrite.CleanStale(filepath.Dir(path), filepath.Base(path), time.Minute)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
