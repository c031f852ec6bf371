package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// copyWithWAL copies an open outbox's file and its -wal to dir, as a
// killed edge's HOME is copied: ops it committed are in the -wal only.
func copyWithWAL(t *testing.T, src, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, outbox.FileName)
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(src + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// OutboxWithOpsInItsWAL is an outbox copied while its edge had it open,
// with n queued ops that only its -wal holds.
func outboxWithOpsInItsWAL(t *testing.T, n int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(src, "laptop", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"e` + string(rune('a'+i)) + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return copyWithWAL(t, src, t.TempDir())
}

// A read-only open (doctor) of an outbox whose -wal holds ops leaves the
// file and its -wal byte for byte, and still counts those ops: before,
// closing it checkpointed the -wal into the file (4096 → 61440 bytes) and
// deleted the -wal.
func TestAReadOnlyOpenLeavesTheFileAndItsWALAsTheyAre(t *testing.T) {
	t.Parallel()
	path := outboxWithOpsInItsWAL(t, 5)
	main, _ := os.ReadFile(path)
	wal, _ := os.ReadFile(path + "-wal")
	if len(wal) == 0 {
		t.Fatal("the copy's -wal is empty: the test needs ops in it")
	}
	s, err := outbox.OpenOptions(path, outbox.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st.ByState[outbox.Queued] != 5 {
		t.Errorf("the read-only open counted %d queued ops, want the 5 in the -wal", st.ByState[outbox.Queued])
	}
	mainAfter, _ := os.ReadFile(path)
	walAfter, err := os.ReadFile(path + "-wal")
	if !bytes.Equal(main, mainAfter) {
		t.Errorf("the file went from %d to %d bytes", len(main), len(mainAfter))
	}
	if err != nil || !bytes.Equal(wal, walAfter) {
		t.Errorf("the -wal went from %d to %d bytes (%v)", len(wal), len(walAfter), err)
	}
}

// A read-only open succeeds on a read-only mount, where an edge's open
// would not: it gives the edge's StorageError all the same, so doctor
// still says the outbox cannot take writes (outbox-storage).
func TestAReadOnlyOpenSaysTheMountIsReadOnly(t *testing.T) {
	t.Parallel()
	path := outboxWithOpsInItsWAL(t, 1)
	ro := func(string) (outbox.Space, error) {
		return outbox.Space{Free: 1 << 30, ReadOnly: true, Mount: "/ro"}, nil
	}
	_, err := outbox.OpenOptions(path, outbox.Options{ReadOnly: true, StatFS: ro})
	var se *outbox.StorageError
	if !errors.As(err, &se) || se.Kind != "read-only" || se.Err == nil {
		t.Fatalf("a read-only open on a read-only mount: %v, want its StorageError", err)
	}
}
