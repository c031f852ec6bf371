package sqlitewal

import (
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
