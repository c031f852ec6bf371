package outbox_test

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Edge processes on one palace each add the writes they could not
// record, to the record of the primary they were meant for; a join clears
// its primary's record (named in any case, with or without its default
// port or a trailing slash) only if it read the local palace after the
// last of them, or a later one would be forgotten unsent, and never
// another primary's (attack41 N2).
func TestStayedLocalAddsUpAndAJoinClearsWhatItRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	s, err := outbox.Open(path, "dev", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const p, other = "https://primary.example/mcp", "http://other.example:8080/mcp"
	t0 := time.UnixMilli(1_700_000_000_000)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			at := t0.Add(time.Duration(i) * time.Minute)
			if err := outbox.NoteStayedLocal(path, outbox.StayedLocal{Primary: p, N: 1, Since: at, Last: at}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := outbox.NoteStayedLocal(path, outbox.StayedLocal{Primary: other, N: 2, Since: t0, Last: t0}); err != nil {
		t.Fatal(err)
	}
	recs, err := outbox.ReadStayedLocal(path)
	if err != nil || len(recs) != 2 || recs[0].N != 20 || !recs[0].Since.Equal(t0) || !recs[0].Last.Equal(t0.Add(19*time.Minute)) || recs[1].N != 2 {
		t.Fatalf("the records of both primaries: %+v, %v", recs, err)
	}
	if err := outbox.ClearStayedLocal(path, "HTTPS://Primary.example:443/mcp/", t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if recs, _ = outbox.ReadStayedLocal(path); len(recs) != 2 {
		t.Fatalf("a join that read the palace before the last write cleared the record: %+v", recs)
	}
	if err := outbox.ClearStayedLocal(path, "HTTPS://Primary.example:443/mcp/", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if recs, _ = outbox.ReadStayedLocal(path); len(recs) != 1 || recs[0].Primary != other {
		t.Fatalf("after a join to %s that read everything: %+v", p, recs)
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
	if sl, err := outbox.ReadStayedLocal(path); err != nil || len(sl) != 1 || sl[0].N != 1 {
		t.Fatalf("read back: %+v, %v", sl, err)
	}
}
