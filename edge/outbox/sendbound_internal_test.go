package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// boundsSeen records the time each call had (its context's deadline) and
// answers with fail's error.
type boundsSeen struct {
	bounds []time.Duration
	fail   func(ctx context.Context) error
}

func (p *boundsSeen) Up() bool { return true }
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
// timeout on its first real send.
func TestTheSendBoundGrowsOnlyAfterSendsThatTimedOut(t *testing.T) {
	t.Parallel()
	const timeout = 40 * time.Millisecond
	for _, c := range []struct {
		name  string
		fail  func(ctx context.Context) error
		grown time.Duration // the fifth send's bound, after four like it
	}{
		{"busy", func(context.Context) error { return &HTTPError{Status: 503} }, timeout},
		{"never left", func(context.Context) error { return fmt.Errorf("%w: connection refused", ErrNotSent) }, timeout},
		{"timed out", func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("%w: %w", ErrNotSent, ctx.Err()) }, 16 * timeout},
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
		p := &boundsSeen{fail: c.fail}
		f := &Flusher{S: s, P: p, Lease: time.Hour, SendTimeout: timeout}
		f.defaults()
		if ok, err := f.acquire(ctx); !ok || err != nil {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		for range 5 {
			f.attempt(ctx, &flushRun{counts: map[string]map[string]int{}}, mustGet(t, s, op))
		}
		if len(p.bounds) != 5 {
			t.Fatalf("%s: %d sends, want 5", c.name, len(p.bounds))
		}
		if got := p.bounds[4]; got > c.grown || got < c.grown-timeout/2 {
			t.Errorf("%s: the fifth send had %v, want %v (its sends had %v)", c.name, got, c.grown, p.bounds)
		}
	}
}
