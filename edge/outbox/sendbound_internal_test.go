package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// boundsSeen records the time each call had (its context's deadline) and
// answers with fail's error.
type boundsSeen struct {
	bounds []time.Duration
	fail   func(ctx context.Context) error
	down   bool // the breaker open after each call
}

func (p *boundsSeen) Up() bool { return !p.down }
func (p *boundsSeen) Call(ctx context.Context, _ string, _ json.RawMessage) (map[string]any, error) {
	d, _ := ctx.Deadline()
	p.bounds = append(p.bounds, time.Until(d))
	return nil, p.fail(ctx)
}

// An op's send has twice the time of the one before only after a send
// that ran out of its bound: one paced (busy), refused or never sent, as
// many times as it was, leaves the next send the send timeout; two sends
// that timed out give the next four times it (review28b F3). Before, every
// attempt doubled it: an op paced four times had sixteen times the send
// timeout on its first real send. A send that ran out of its bound on a
// primary then found down (an outage, not a slow write) does not grow it
// either (review29 F7).
func TestTheSendBoundGrowsOnlyAfterSendsThatTimedOut(t *testing.T) {
	t.Parallel()
	const timeout = 40 * time.Millisecond
	for _, c := range []struct {
		name  string
		fail  func(ctx context.Context) error
		grown time.Duration // the fifth send's bound, after four like it
		down  bool
	}{
		{"busy", func(context.Context) error { return &HTTPError{Status: 503} }, timeout, false},
		{"never left", func(context.Context) error { return fmt.Errorf("%w: connection refused", ErrNotSent) }, timeout, false},
		{"timed out", func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("%w: %w", ErrNotSent, ctx.Err()) }, 16 * timeout, false},
		{"timed out, the primary down", func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("%w: %w", ErrNotSent, ctx.Err()) }, timeout, true},
	} {
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
		p := &boundsSeen{fail: c.fail, down: c.down}
		f := &Flusher{S: s, P: p, Lease: time.Hour, SendTimeout: timeout}
		f.defaults()
		if ok, err := f.acquire(ctx); !ok || err != nil {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		for range 5 {
			f.attempt(ctx, &flushRun{counts: map[string]map[string]int{}}, mustGet(t, s, op))
		}
		if slices.ContainsFunc(p.bounds[:min(4, len(p.bounds))], func(b time.Duration) bool { return b <= 0 }) {
			// the machine stalled past a send's bound before the send was
			// made (CI 119's loaded unit tier: -6 ms): that send ran out
			// of its bound, rightly grown; nothing to tell from this case
			t.Logf("%s: a send's bound ran out before it was made (%v); not judged", c.name, p.bounds)
			continue
		}
		if len(p.bounds) != 5 {
			t.Fatalf("%s: %d sends, want 5", c.name, len(p.bounds))
		}
		if got := p.bounds[4]; got > c.grown || got < c.grown-timeout/2 {
			t.Errorf("%s: the fifth send had %v, want %v (its sends had %v)", c.name, got, c.grown, p.bounds)
		}
	}
}

// An op held as queued as another device than the gateway now names the
// token keeps the send bound it had grown to: an operator's retry sends
// it with that, not with the send timeout again, to be cut where it was
// cut before (review29 F7). Before, the hold's record dropped the count.
func TestAnOpHeldForAnotherDeviceKeepsItsGrownSendBound(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
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
	if _, err := s.db.ExecContext(ctx, `UPDATE ops SET error_json=? WHERE local_seq=?`, `{"kind":"lost","timeouts":2}`, op.LocalSeq); err != nil {
		t.Fatal(err)
	}
	f := &Flusher{S: s, P: &boundsSeen{}, Lease: time.Hour, SendTimeout: timeout}
	f.defaults()
	if ok, err := f.acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	f.holdForDevice(ctx, mustGet(t, s, op), "dev-2")
	held := mustGet(t, s, op)
	if held.State != Dead || FailureOf(held.Error).Kind != OtherDevice {
		t.Fatalf("the op was not held for another device: %s %s", held.State, held.Error)
	}
	if got := f.sendBound(held); got != 4*timeout {
		t.Errorf("the held op's next send has %v, want the %v it had grown to", got, 4*timeout)
	}
}
