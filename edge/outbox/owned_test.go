package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed"
)

// Close returns only once the doorbell rings Enqueue started have ended
// (checked at once, with no grace), then closes the database: a ring never
// outlives its store. Not parallel: GoroutinesOf sees the whole process.
func TestCloseWaitsForTheRings(t *testing.T) {
	for range 5 {
		dir := t.TempDir()
		s, err := outbox.Open(filepath.Join(dir, outbox.FileName), "dev", "lab")
		if err != nil {
			t.Fatal(err)
		}
		// doorbells of flushers that are gone: the ring dials each, and
		// removes it
		bells := filepath.Join(dir, "doorbell")
		os.MkdirAll(bells, 0o700)
		for i := range 100 {
			os.WriteFile(filepath.Join(bells, fmt.Sprintf("gone%d.sock", i)), nil, 0o600)
		}
		if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"x"}`), Wing: "w"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if left := testbed.GoroutinesOf("outbox.(*Store)"); len(left) > 0 {
			t.Fatalf("Close returned with a ring running:\n%s", strings.Join(left, "\n\n"))
		}
	}
}

// A database that fails is not taken for another process holding the
// lease: Drain says what failed.
func TestDrainReportsADatabaseFailure(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	f := &outbox.Flusher{S: s, P: upPrimary{}}
	_, err = f.Drain(context.Background())
	if err == nil || errors.Is(err, outbox.ErrLeaseHeld) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Drain on a closed database: %v", err)
	}
}

type upPrimary struct{}

func (upPrimary) Up() bool { return true }
func (upPrimary) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	return map[string]any{"success": true}, nil
}

// An outbox an older build left readable by others (0644: it holds the
// queued writes' text) is narrowed to the owner's alone, with its -wal and
// -shm, when it is opened again; what it holds is intact.
func TestOpenNarrowsAnOlderWorldReadableOutbox(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	older, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	op, err := older.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"private words"}`), Wing: "w"})
	if err != nil {
		t.Fatal(err)
	}
	files := []string{path, path + "-wal", path + "-shm"} // the open store keeps all three
	for _, f := range files {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s after Open: mode %04o; want 0600", filepath.Base(f), fi.Mode().Perm())
		}
	}
	if got, err := s.Get(context.Background(), op.LocalSeq); err != nil || string(got.Payload) != string(op.Payload) {
		t.Errorf("the queued write after Open: %s, %v; want %s", got.Payload, err, op.Payload)
	}
}
