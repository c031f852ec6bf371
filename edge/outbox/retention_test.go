package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// clock is a settable clock for an outbox.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	var n int64
	for _, f := range []string{p, p + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Issue 26, point 9: done ops are pruned once they are older than the
// retention, and the file gives their space back: its size follows what is
// pending and recent, not its history. Before, every replicated write's
// payload and answer stayed for ever (200,000 ops made a 427 MB outbox).
func TestDoneOpsArePrunedAndTheirSpaceGivenBack(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	c := &clock{t: time.Now()}
	s, err := outbox.OpenOptions(path, outbox.Options{Device: "dev", Label: "lab", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := fakepalace.New(fakepalace.Options{})
	f := &outbox.Flusher{S: s, P: memPrimary{pl}}
	ctx := context.Background()
	enqueue := func(tag string, n int) {
		for i := range n {
			p := fmt.Sprintf(`{"wing":"w","room":"r","content":"%s %d %s"}`, tag, i, strings.Repeat("x", 16000))
			if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(p)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue("old", 50)
	if _, err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	pending, _ := s.Enqueue(ctx, outbox.Write{Name: "mempalace_event_append", Payload: []byte(`{"type":"note","stream":"s","room":"r","from_agent":"pi@lab","body":"never sent"}`)})
	s.Close()
	full := fileSize(t, path)

	c.add(outbox.DefaultRetention + time.Hour)
	s, err = outbox.OpenOptions(path, outbox.Options{Device: "dev", Label: "lab", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, outbox.DefaultRetention)
	if err != nil || n != 50 {
		t.Fatalf("pruned %d, %v; want the 50 done ops", n, err)
	}
	if got, err := s.GetByID(ctx, pending.ID); err != nil || got.State != outbox.Queued {
		t.Fatalf("a pending op older than the retention: %v %v", got.State, err)
	}
	s.Close()
	if pruned := fileSize(t, path); pruned > full/5 {
		t.Errorf("the outbox holds %d bytes after pruning, %d before: its space was not given back", pruned, full)
	}
}

// The running flusher prunes by itself (at most every PruneEvery).
func TestTheFlusherPrunes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	c := &clock{t: time.Now()}
	s, err := outbox.OpenOptions(path, outbox.Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pl, _ := fakepalace.New(fakepalace.Options{})
	ctx := context.Background()
	s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"old"}`)})
	(&outbox.Flusher{S: s, P: memPrimary{pl}}).Drain(ctx)
	c.add(outbox.DefaultRetention + time.Hour)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	(&outbox.Flusher{S: s, P: memPrimary{pl}}).Run(rctx)
	if st, _ := s.Stats(ctx); st.ByState[outbox.Done] != 0 {
		t.Fatalf("done ops older than the retention after the flusher ran: %v", st.ByState)
	}
}

// Pending (join's progress and high-water mark) counts what Stats counts
// as not done and names the first op a List of the pending ops returns:
// an op dropped by the operator or sent no longer counts.
func TestPendingCountsWhatIsNotDone(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(fmt.Sprintf(`{"wing":"w","room":"r","content":"note %d"}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, op.ID)
	}
	check := func(wantN int) {
		t.Helper()
		n, oldest, err := s.Pending(ctx)
		st, serr := s.Stats(ctx)
		ops, lerr := s.List(ctx, 1)
		if err != nil || serr != nil || lerr != nil {
			t.Fatal(err, serr, lerr)
		}
		wantOldest := int64(0)
		if len(ops) > 0 {
			wantOldest = ops[0].LocalSeq
		}
		if n != wantN || n != st.Waiting() || oldest != wantOldest {
			t.Fatalf("Pending = %d, oldest %d; want %d (Stats: %d), oldest %d", n, oldest, wantN, st.Waiting(), wantOldest)
		}
	}
	check(3)
	if _, _, err := s.Drop(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	check(2)
	pl, _ := fakepalace.New(fakepalace.Options{})
	if _, err := (&outbox.Flusher{S: s, P: memPrimary{pl}}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	check(0)
}
