package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
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
	wakesAnIdleFlusher(t, dir)
}

// A palace under a path longer than a Unix socket's 108 bytes (CI's
// temporary directories, nested volumes) has a doorbell too: before, its
// flusher polled, and with Poll an hour never noticed the enqueue.
func TestDoorbellWakesAnIdleFlusherUnderALongPath(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("a long path's doorbell is bound through /proc/self/fd, on Linux only")
	}
	wakesAnIdleFlusher(t, longDir(t))
}

// longDir is a new directory whose path is 150 bytes long.
func longDir(t *testing.T) string {
	base := t.TempDir()
	dir := filepath.Join(base, strings.Repeat("p", max(1, 150-len(base)-1)))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wakesAnIdleFlusher checks that an enqueue by a second Store on the
// palace in dir wakes a first Store's idle flusher.
func wakesAnIdleFlusher(t *testing.T, dir string) {
	t.Helper()
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

// A flusher whose doorbell could not be bound (here a file where its
// directory goes) polls; another process's commit (an operator's drop)
// signals Kicked then, as a ring does, so the edge reads the drop's note.
// Before, only this process's own kicks did: a drop was taken at the
// edge's next start.
func TestAPollingFlusherSignalsKickedOnAnotherProcesssCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "doorbell"), nil, 0o600); err != nil {
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

// A doorbell left at a long path by a flusher that was killed (its socket
// refuses) is removed by the next enqueue's ring, as one at a short path
// is; before, the ring could not dial the long path and left it for good.
func TestARingRemovesADeadDoorbellUnderALongPath(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("a long path's doorbell is dialled through /proc/self/fd, on Linux only")
	}
	dir := longDir(t)
	bells := filepath.Join(dir, "doorbell")
	if err := os.MkdirAll(bells, 0o700); err != nil {
		t.Fatal(err)
	}
	// A socket bound at a short path, closed (nothing reads it any more)
	// and moved under the long one.
	short, err := os.MkdirTemp("", "bell")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(short, "b.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // a datagram socket's Close leaves its file
	dead := filepath.Join(bells, "0badcafe.sock")
	if err := os.Rename(filepath.Join(short, "b.sock"), dead); err != nil {
		t.Fatal(err)
	}
	s, err := outbox.Open(filepath.Join(dir, outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"x"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // Close waits for the ring
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dead doorbell at %s is still there after a ring: %v", dead, err)
	}
}
