package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
	path := outboxAt(t, 2)
	if _, err := outbox.OpenOptions(path, outbox.Options{ReadOnly: true}); !errors.Is(err, outbox.ErrOlderSchema) {
		t.Fatalf("a read-only open of an older outbox: %v, want ErrOlderSchema", err)
	}
	s, err := outbox.Open(path, "dev", "edge")
	if err != nil {
		t.Fatalf("a writing open after it: %v", err)
	}
	s.Close()
	if s, err = outbox.OpenOptions(path, outbox.Options{ReadOnly: true}); err != nil {
		t.Fatalf("a read-only open once migrated: %v", err)
	}
	s.Close()
}

// An outbox a newer release set up (a rollback) is refused, by a writing
// and a read-only open alike, with the file, both versions and the fix,
// and left as it is: an older build no longer misreads it (attack56 R1,
// where an intent of the newer edge's went unseen and unsent).
func TestAnOutboxOfANewerReleaseIsRefused(t *testing.T) {
	t.Parallel()
	path := outboxAt(t, 99)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := outbox.OpenOptions(path, outbox.Options{Device: "dev", Label: "edge", ReadOnly: ro})
		if !errors.Is(err, sqlitewal.ErrNewerSchema) {
			t.Fatalf("read-only %v: %v, want ErrNewerSchema", ro, err)
		}
		for _, want := range []string{path, "schema version 99", "made by a newer devbox-config", "this build knows up to 3", "run that release or newer", "rolling back is not supported", "docs/operator.md#upgrading-and-rolling-back"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("read-only %v: %q does not say %q", ro, err, want)
			}
		}
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the refused outbox was changed (%v)", err)
	}
}

// An outbox an older build set up is migrated with one line on the log
// at Warn, which the edge commands show (attack56 M1: nothing said so).
func TestAnOutboxMigratedSaysSo(t *testing.T) {
	t.Parallel()
	path := outboxAt(t, 2)
	var log bytes.Buffer
	s, err := outbox.OpenOptions(path, outbox.Options{Device: "dev", Label: "edge", Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, want := range []string{"level=WARN", "outbox migrated in place", "from_version=2", "to_version=3", "file=" + path, "rolling back is not supported"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log %q does not say %q", log.String(), want)
		}
	}
}

// outboxAt is a new outbox whose schema version is set to v, as an older
// (or newer) release would have left it.
func outboxAt(t *testing.T, v int) string {
	t.Helper()
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
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		t.Fatal(err)
	}
	return path
}
