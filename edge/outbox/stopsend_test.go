package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// stuckPrimary is a primary a send never reaches (stuck opening its
// session): a call waits for its context, then fails as not sent.
type stuckPrimary struct{ called chan string }

func (p stuckPrimary) Up() bool { return true }

func (p stuckPrimary) Call(ctx context.Context, tool string, _ json.RawMessage) (map[string]any, error) {
	select {
	case p.called <- tool:
	default:
	}
	<-ctx.Done()
	return nil, fmt.Errorf("opening a session: %w: %w", outbox.ErrNotSent, ctx.Err())
}

// The flusher stops (the edge's session ends) with a send under way that
// never left: the op goes back to the queue, not in flight in doubt, so a
// delete made after takes it back (docs/devbox.md, the delete row).
// Before, it stayed in flight, which a delete may not cancel (it may have
// landed), and the next run sent it: a secret the user deleted reached
// the primary (outside tester, 11c).
func TestAStopMidSendThatNeverLeftRequeuesTheOp(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bg := context.Background()
	id := catalogue.DrawerID("notes", "r", "deploy notes")
	op, err := s.Enqueue(bg, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"` + id + `","content":"deploy notes password=hunter2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := stuckPrimary{called: make(chan string, 1)}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	// The send never answers: the stop grace is waited out in full.
	go func() { defer close(done); (&outbox.Flusher{S: s, P: p, StopGrace: 100 * time.Millisecond}).Run(ctx) }()
	select {
	case <-p.called:
	case <-time.After(20 * time.Second):
		t.Fatal("the flusher never sent the update")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the flusher did not stop")
	}
	got, err := s.GetByID(bg, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != outbox.Queued || got.MaybeApplied {
		t.Errorf("the update cut before it left is %s (maybe applied %v), want queued", got.State, got.MaybeApplied)
	}
	if n, err := s.CancelUnsentWrites(bg, []string{id}, nil); err != nil || n != 1 {
		t.Errorf("the drawer's delete cancelled %d ops (%v), want the update", n, err)
	}
}

// busyPrimary answers "not now" (read-only) once release is closed.
type busyPrimary struct {
	called  chan string
	release chan struct{}
}

func (p busyPrimary) Up() bool { return true }

func (p busyPrimary) Call(ctx context.Context, tool string, _ json.RawMessage) (map[string]any, error) {
	select {
	case p.called <- tool:
	default:
	}
	select {
	case <-p.release:
		return nil, &outbox.RPCError{Code: -32003, Message: "Server is in read-only mode"}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A send the primary answers within the stop grace is settled by its
// answer, an error too: "not now" is not applied, so the op is queued
// again (and a delete can take it back), not left in flight.
func TestAnAnswerInTheStopGraceSettlesTheOp(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bg := context.Background()
	id := catalogue.DrawerID("notes", "r", "deploy notes")
	op, err := s.Enqueue(bg, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"` + id + `","content":"deploy notes password=hunter2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := busyPrimary{called: make(chan string, 1), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() { defer close(done); (&outbox.Flusher{S: s, P: p, StopGrace: time.Minute}).Run(ctx) }()
	select {
	case <-p.called:
	case <-time.After(20 * time.Second):
		t.Fatal("the flusher never sent the update")
	}
	cancel()
	close(p.release) // answered in the grace (a minute)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the flusher did not stop")
	}
	got, err := s.GetByID(bg, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != outbox.Queued || got.MaybeApplied {
		t.Errorf("the update the primary answered busy in the grace is %s (maybe applied %v), want queued", got.State, got.MaybeApplied)
	}
	if n, err := s.CancelUnsentWrites(bg, []string{id}, nil); err != nil || n != 1 {
		t.Errorf("the drawer's delete cancelled %d ops (%v), want the update", n, err)
	}
}
