package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// basePrimary answers every write and keeps the base each send carried.
type basePrimary struct {
	mu    sync.Mutex
	bases []string
}

func (p *basePrimary) Up() bool { return true }
func (p *basePrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bases = append(p.bases, outbox.BaseFrom(ctx))
	return map[string]any{"success": true}, nil
}

// An update_drawer made while policy.json did not parse (held) is sent,
// once the policy parses and Release queues it under a new op id, with
// the base it was made on: a gateway still refuses it if another device
// changed the drawer since (before: the base stayed under the old op id,
// the send carried none, and the stale edit overwrote unchecked).
func TestAReleasedUpdateKeepsItsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const base = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v1"}`), Held: true, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, op, op.Payload, true); err != nil {
		t.Fatal(err)
	}
	p := &basePrimary{}
	f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler)}
	if _, err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(p.bases) != 1 || p.bases[0] != base {
		t.Errorf("the released update was sent with base(s) %q, want [%s]: its check is lost", p.bases, base)
	}
}

// doubtPrimary is a gateway with an op-id ledger whose first send's
// answer is lost, and which then holds the op in doubt whatever the
// resend says (its drawer edited over since), until answer is set.
type doubtPrimary struct {
	basePrimary
	answer bool
}

func (p *doubtPrimary) Ledger(context.Context) (bool, error) { return true, nil }
func (p *doubtPrimary) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	p.basePrimary.Call(ctx, tool, args)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.answer:
		return map[string]any{"success": true}, nil
	case len(p.bases) == 1:
		return nil, errors.New("connection reset: the answer was lost")
	}
	return nil, &outbox.RPCError{Code: ledger.CodeInDoubt, Message: "devbox-config gateway: this op may have landed …: devbox-config edge outbox delivered <op> keeps the primary's text; … retry <op> …"}
}

// An update the gateway holds in doubt even when sent again after its
// lost answer (it may have landed and been edited over since: attack66
// N1) is in doubt at the edge, for an operator, its message naming the
// op; retry sends it without its base, so the gateway overwrites as
// retry says. Before, it was queued again and again, each send answered
// in doubt.
func TestAnUpdateTheGatewayHoldsInDoubtIsInDoubt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const base = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v1"}`), Base: base})
	if err != nil {
		t.Fatal(err)
	}
	p := &doubtPrimary{}
	f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Millisecond}
	f.Drain(ctx) // its errors are the op's
	o, _ := s.Get(ctx, op.LocalSeq)
	if msg := outbox.FailureOf(o.Error).Message; o.State != outbox.InDoubt || !strings.Contains(msg, "delivered "+o.Short()) {
		t.Fatalf("an update the gateway holds in doubt: %s %s (want in doubt, naming the op)", o.State, o.Error)
	}
	if _, err := s.Retry(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.answer, p.bases = true, nil
	p.mu.Unlock()
	f.Drain(ctx)
	if o, _ = s.Get(ctx, op.LocalSeq); o.State != outbox.Done || len(p.bases) != 1 || p.bases[0] != "" {
		t.Errorf("the retried update: %s, sent with base(s) %q (want done, sent once without its base)", o.State, p.bases)
	}
}

// A delete_drawer made while an update of the drawer is unsent (queued or
// held: the delete takes it back, never sent) is checked against the text
// that update was made on, which the primary holds, not the local text
// the update wrote: UnsentBase is the earliest unsent update's base (none:
// not found, and the delete's base is the local text it deletes).
func TestUnsentBaseIsTheEarliestUnsentUpdates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, found, err := s.UnsentBase(ctx, "drawer_w_r_1"); found || err != nil {
		t.Fatalf("no update queued: found %v (%v)", found, err)
	}
	b0, b1 := strings.Repeat("0", 64), strings.Repeat("1", 64)
	for _, w := range []outbox.Write{
		{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v1"}`), Base: b0, Held: true},
		{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v2"}`), Base: b1, Held: true},
		{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_2","content":"other"}`), Base: b1},
	} {
		if _, err := s.Enqueue(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if base, found, err := s.UnsentBase(ctx, "drawer_w_r_1"); !found || base != b0 || err != nil {
		t.Errorf("the delete's base after two unsent updates: %q %v (%v), want the first's %q", base, found, err, b0)
	}
}

// Two processes release the same held op (review28 D1) (two edges adopting one killed
// edge's intents, or an edge and `edge flush`): the second Release runs
// from a stale List after the first's op was sent and settled done.
func TestAReleaseOfAnOpReleasedAndSentMeanwhileLeavesItsKeysGone(t *testing.T) {
	ctx := context.Background()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v1"}`), Held: true}
	op, err := s.Enqueue(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, op, op.Payload, true); err != nil { // process A
		t.Fatal(err)
	}
	p := &basePrimary{}
	f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler)}
	if _, err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, op, op.Payload, true); err != nil { // process B, from its own List
		t.Fatal(err)
	}
	// a later edit of the same drawer
	w2 := outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"v2"}`)}
	if _, err := s.Enqueue(ctx, w2); err != nil {
		t.Fatal(err)
	}
	n, err := f.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("the later edit of the drawer was not sent (sent %d): the done op's causal keys block it", n)
	}
}
