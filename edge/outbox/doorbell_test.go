package outbox_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

type countingPrimary struct{ calls atomic.Int32 }

func (p *countingPrimary) Up() bool { return true }
func (p *countingPrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	p.calls.Add(1)
	return map[string]any{"success": true}, nil
}

// Another process's enqueue wakes an idle flusher at once through the
// doorbell, with no polling at all (Poll an hour: the previous flusher
// only noticed another process's write by polling PRAGMA data_version).
func TestDoorbellWakesAnIdleFlusherInAnotherProcess(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ob") // a short path: a Unix socket's is at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, outbox.FileName)
	flushing, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer flushing.Close()
	other, err := outbox.Open(path, "dev", "lab") // as a second process sees the file
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	p := &countingPrimary{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { (&outbox.Flusher{S: flushing, P: p, Poll: time.Hour}).Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Wait until the flusher has rung in (its socket exists) and gone idle.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(dir, "doorbell", "*.sock")); len(m) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if _, err := other.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"x"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	for p.calls.Load() == 0 && time.Since(start) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	if p.calls.Load() == 0 {
		t.Fatal("the idle flusher never noticed the other process's enqueue")
	}
	t.Logf("enqueue in another store to send: %v", time.Since(start))
}

// Several processes opening one fresh outbox at once (two containers
// starting on one palace) all get it: none fails with SQLITE_BUSY while
// another switches the new file to WAL.
func TestConcurrentOpensOfAFreshOutbox(t *testing.T) {
	t.Parallel()
	rounds := 40
	if testing.Short() {
		rounds = 10 // the unit tier's share; the others run all 40
	}
	for round := 0; round < rounds; round++ {
		path := filepath.Join(t.TempDir(), outbox.FileName)
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			go func() {
				s, err := outbox.Open(path, "dev", "lab")
				if err == nil {
					_, err = s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"x"}`), Wing: "w"})
					s.Close()
				}
				errs <- err
			}()
		}
		for i := 0; i < 16; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// A flusher whose doorbell could not be bound (a palace path too long for
// a Unix socket) polls; another process's commit (an operator's drop)
// signals Kicked then, as a ring does, so the edge reads the drop's note.
// Before, only this process's own kicks did: a drop was taken at the
// edge's next start.
func TestAPollingFlusherSignalsKickedOnAnotherProcesssCommit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("p", 120)) // past a Unix socket's 108 bytes
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, outbox.FileName)
	flushing, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer flushing.Close()
	other, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		(&outbox.Flusher{S: flushing, P: &countingPrimary{}, Poll: 5 * time.Millisecond}).Run(ctx)
		close(done)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) { // each round another commit, until the poll sees one
		if err := other.SetMeta(context.Background(), "k", time.Now().String()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-flushing.Kicked():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("the polling flusher never signalled Kicked for another process's commit")
}
