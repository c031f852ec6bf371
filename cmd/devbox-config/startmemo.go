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
// in the way: every entry from base down to the memo that exists must
// belong to the user running render (so root rendering over a user's home
// writes no memo there, and creates no root-owned ~/.cache), and the memo
// itself must be a regular file, not a link. A killed earlier write's temp
// file is cleaned first.
func memoWriter(base string) func(path string, data []byte) error {
	return func(path string, data []byte) error {
		for p := path; ; p = filepath.Dir(p) {
			fi, err := os.Lstat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return err
			case fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()):
				return fmt.Errorf("%s belongs to another user", p)
			case p == path && !fi.Mode().IsRegular():
				return fmt.Errorf("%s is not a regular file", p)
			}
			if p == base || p == filepath.Dir(p) {
				break
			}
		}
		dir := filepath.Dir(path)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := filewrite.CleanStale(dir, filepath.Base(path), time.Minute); err != nil {
			return err
		}
		_, err := filewrite.Write(path, data, 0o600)
		return err
	}
}
