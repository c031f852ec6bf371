package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type countingSender struct{ calls atomic.Int32 }

func (c *countingSender) Up() bool { return true }
func (c *countingSender) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	c.calls.Add(1)
	return map[string]any{"success": true}, nil
}

// A flusher whose lease passed to another process (its token is no
// longer the lease's) sends nothing more and records nothing: the op
// stays as the new holder finds it.
func TestALostLeaseRecordsNothing(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	op, err := s.Enqueue(ctx, Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := &countingSender{}
	f := &Flusher{S: s, P: p, Lease: time.Hour}
	f.defaults()
	if ok, err := f.acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	token := f.mine().Token
	takeOver := func() {
		v := fmt.Sprintf(`{"owner":"another","expires":%d,"token":%d}`, time.Now().Add(time.Hour).UnixMilli(), token+1)
		if err := setMeta(ctx, s.db, "lease", v); err != nil {
			t.Fatal(err)
		}
	}

	// The lease passes between the send and its record: nothing recorded.
	takeOver()
	if f.settle(ctx, op, map[string]any{"success": true}, nil); mustGet(t, s, op).State != Queued {
		t.Fatal("a flusher that lost its lease recorded the op as done")
	}
	// And nothing more is sent.
	n, _, err := s.next(ctx, op.Lane)
	if err != nil || n == nil {
		t.Fatalf("next: %v %v", n, err)
	}
	f.attempt(ctx, &flushRun{counts: map[string]map[string]int{}}, *n)
	if p.calls.Load() != 0 || mustGet(t, s, op).Attempts != 0 {
		t.Fatalf("a flusher that lost its lease sent the op (%d calls)", p.calls.Load())
	}
	// The lease's owner is told apart from its token: a process that took
	// it over keeps its own.
	if ok, _ := f.acquire(ctx); ok {
		t.Fatal("a live lease of another process was taken")
	}
}

func mustGet(t *testing.T, s *Store, op Op) Op {
	t.Helper()
	o, err := s.Get(context.Background(), op.LocalSeq)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A flush killed mid-send (SIGKILL, OOM) leaves its lease until it
// expires: `edge flush` meanwhile is refused, and says until when, and
// in how many seconds, so the user knows to wait rather than retry.
func TestAHeldLeaseSaysWhenItExpires(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`)}); err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(25 * time.Second)
	if err := setMeta(ctx, s.db, "lease", fmt.Sprintf(`{"owner":"edge-4242-killed","expires":%d,"token":3}`, expires.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	f := &Flusher{S: s, P: &countingSender{}}
	_, err = f.Drain(ctx)
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("Drain: %v, want ErrLeaseHeld", err)
	}
	for _, want := range []string{expires.Local().Format("15:04:05"), "in 25 s", "edge-4242-killed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
