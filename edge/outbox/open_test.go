package outbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// Opening an outbox already at this build's schema only reads it: it
// opens while another process holds the write lock (an edge mid-write;
// doctor beside it), where a set-up run on every open waited for the lock.
func TestOpeningACurrentOutboxTakesNoWriteLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(path, "dev", "edge")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock, held
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() // nothing written
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('held', 'x')`); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.Open(path, "", "doctor")
	if err != nil {
		t.Fatalf("opening beside a writer: %v", err)
	}
	if _, err := r.Stats(ctx); err != nil {
		t.Errorf("reading beside a writer: %v", err)
	}
	r.Close()
}

// A read-only open (doctor) of an outbox an older build made says so and
// leaves it as it is; a writing open then brings it to this schema.
func TestAReadOnlyOpenLeavesAnOlderOutboxAsItIs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(path, "dev", "edge")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := outbox.OpenOptions(path, outbox.Options{ReadOnly: true}); !errors.Is(err, outbox.ErrOlderSchema) {
		t.Fatalf("a read-only open of an older outbox: %v, want ErrOlderSchema", err)
	}
	if s, err = outbox.Open(path, "dev", "edge"); err != nil {
		t.Fatalf("a writing open after it: %v", err)
	}
	s.Close()
	if s, err = outbox.OpenOptions(path, outbox.Options{ReadOnly: true}); err != nil {
		t.Fatalf("a read-only open once migrated: %v", err)
	}
	s.Close()
}
