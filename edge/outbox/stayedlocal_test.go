package outbox_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Two edge processes on one palace each add the writes they could not
// record; a join clears the record only if it read the local palace
// after the last of them, or a later one would be forgotten unsent.
func TestStayedLocalAddsUpAndAJoinClearsWhatItRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	a, err := outbox.Open(path, "dev", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := outbox.Open(path, "dev", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t0 := time.UnixMilli(1_700_000_000_000)
	if err := outbox.NoteStayedLocal(path, outbox.StayedLocal{N: 3, Since: t0.Add(time.Minute), Last: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := outbox.NoteStayedLocal(path, outbox.StayedLocal{N: 2, Since: t0, Last: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sl := st.StayedLocal; sl == nil || sl.N != 5 || !sl.Since.Equal(t0) || !sl.Last.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the record of both: %+v", sl)
	}
	if err := outbox.ClearStayedLocal(path, t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if st, _ = a.Stats(ctx); st.StayedLocal == nil {
		t.Fatal("a join that read the palace before the last write cleared the record")
	}
	if err := outbox.ClearStayedLocal(path, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st, _ = a.Stats(ctx); st.StayedLocal != nil {
		t.Fatalf("after a join that read everything: %+v", st.StayedLocal)
	}
}

// The record is written where a full disk cannot refuse it: in the file
// the outbox's open made at its full length, in place, never a new file
// nor a longer one (which a full disk refuses: attack41 N1).
func TestTheStayedLocalRecordNeedsNoNewBlocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, outbox.FileName)
	s, err := outbox.Open(path, "dev", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := filepath.Join(dir, outbox.StayedLocalFile)
	before, err := os.Stat(rec)
	if err != nil {
		t.Fatalf("the outbox's open made no record file: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(rec, &st); err != nil || st.Blocks*512 < before.Size() {
		t.Fatalf("the record file is sparse (%d blocks for %d bytes): a full disk would refuse its first write (%v)", st.Blocks, before.Size(), err)
	}
	if err := os.Chmod(dir, 0o500); err != nil { // no new file in it (but for root)
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	t0 := time.UnixMilli(1_700_000_000_000)
	if err := outbox.NoteStayedLocal(path, outbox.StayedLocal{N: 1, Since: t0, Last: t0}); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(rec)
	if err != nil || !os.SameFile(before, after) || after.Size() != before.Size() {
		t.Fatalf("the record was not written in place: %v, %v", after, err)
	}
	if sl, err := outbox.ReadStayedLocal(path); err != nil || sl == nil || sl.N != 1 {
		t.Fatalf("read back: %+v, %v", sl, err)
	}
}
