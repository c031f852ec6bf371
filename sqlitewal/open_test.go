package sqlitewal

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpen: the file is in WAL mode with the synchronous level asked for
// and the extra pragmas applied.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sqlite")
	db, err := Open(path, "FULL", "wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	var sync, ckpt int
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q (%v), want wal", mode, err)
	}
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous %d (%v), want 2 (FULL)", sync, err)
	}
	if err := db.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&ckpt); err != nil || ckpt != 0 {
		t.Errorf("wal_autocheckpoint %d (%v), want 0", ckpt, err)
	}
}

// A directory whose name holds '?', '#' or '%' (a HOME, a state dir) is
// where the file is opened, written and read, with the pragmas applied
// (the review: the path went into the file: URI unescaped, so SQLite took
// "a" for the file and the rest for the query, or failed).
func TestOpenAPathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a?b#c%20d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x.sqlite")
	db, err := Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	_, err = db.Exec(`CREATE TABLE t (v TEXT)`)
	if err == nil {
		err = db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	}
	if cerr := db.Close(); err != nil || cerr != nil || mode != "wal" {
		t.Fatalf("Open: journal_mode %q (%v, %v), want wal", mode, err, cerr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file is not at the path given: %v", err)
	}
	if n, err := Tables(path); n != 1 || err != nil {
		t.Errorf("Tables = %d (%v), want 1", n, err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var n int
	if err := ro.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Errorf("OpenReadOnly: %v", err)
	}
}
