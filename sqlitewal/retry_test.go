package sqlitewal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRetryBusy(t *testing.T) {
	tries := 0
	err := RetryBusy(func() error {
		if tries++; tries < 3 {
			return errors.New("database is locked (5) (SQLITE_BUSY)")
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Errorf("busy twice, then fine: err %v after %d tries", err, tries)
	}
	tries = 0
	other := errors.New("file is not a database")
	if err := RetryBusy(func() error { tries++; return other }); err != other || tries != 1 {
		t.Errorf("another error is returned at once: %v after %d tries", err, tries)
	}
}

// A database file that is a symbolic link (planted in a palace's edge
// directory, or a join outbox's name) is refused, and what it names is
// left as it was: SQLite followed it, and a dangling link made a
// database, -wal and -shm at the place it named.
func TestCreatePrivateRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	for _, target := range []string{victim, filepath.Join(dir, "dangling")} {
		link := filepath.Join(dir, "db-"+filepath.Base(target)+".sqlite")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		err := CreatePrivate(link)
		if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), link) {
			t.Fatalf("%s: %v", target, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "dangling")); err == nil {
		t.Error("a file was made where the dangling link pointed")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the file the link named is now %q", b)
	}
}
