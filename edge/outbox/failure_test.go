package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// docs/replication.md's failure table says what outbox.Rules does: every
// kind, with its class, and no other.
func TestTheDocsFailureTableIsTheCodes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/replication.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for kind, rule := range outbox.Rules {
		row := "| `" + kind.String() + "` | " + string(rule.Class) + " |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/replication.md has no row %q", row)
		}
	}
	if n := strings.Count(doc[strings.Index(doc, "## Failure classes"):strings.Index(doc, "## Look-ups")], "\n| `"); n != len(outbox.Rules) {
		t.Errorf("the docs' failure table has %d rows, the code %d kinds", n, len(outbox.Rules))
	}
	if !strings.Contains(doc, "dead after **5** refused attempts") {
		t.Error("the docs do not say N")
	}
}

// refusingPrimary answers every call with one JSON-RPC error.
type refusingPrimary struct{ err error }

func (p refusingPrimary) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	return nil, p.err
}
func (refusingPrimary) Up() bool { return true }

// A write refused "Invalid params" (-32602: the gateway's strict reading
// of a room name with a trailing space, which the local palace took) is
// dead at its first refusal: the same arguments are refused every time,
// and a queued op's arguments never change (outside tester attack39 F3:
// refused five times, then dead, with advice to fix the cause and
// retry). So is one refused "Invalid Request" (-32600: the gateway's
// strict parse of its bytes, attack64 F1), and one a gateway refuses
// for its batch cap (rule batch_cap, attack100 F3). Any other refusal
// still counts toward dead.
func TestInvalidParamsAreDeadAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		dead bool
	}{
		{&outbox.RPCError{Code: -32602, Message: "devbox-config gateway: Invalid params: room \"pad \" has a trailing space"}, true},
		{&outbox.RPCError{Code: -32600, Message: `Invalid Request: $.params.arguments: key "content" appears twice`}, true},
		{&outbox.RPCError{Code: -31003, Message: "devbox-config gateway: laptop may not call mempalace_add_drawer"}, false},
		{&outbox.RPCError{Code: -31003, Message: "devbox-config gateway: a checkpoint of 2199824 bytes of content is more than the 2097152 a device may file in one call", Rule: outbox.RuleBatchCap}, true},
	} {
		s, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.sqlite"), "dev-1", "lab")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		if _, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"pad ","content":"x"}`)}); err != nil {
			t.Fatal(err)
		}
		f := &outbox.Flusher{S: s, P: refusingPrimary{c.err}, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Hour} // one try per Drain
		f.Drain(ctx)
		st, _ := s.Stats(ctx)
		if got := st.ByState[outbox.Dead] == 1; got != c.dead {
			t.Errorf("%v: dead after one refusal %v, want %v (%+v)", c.err, got, c.dead, st.ByState)
		}
	}
}

// A write whose body the gateway did not get within its body floor (its
// 408, ledger.CodeBodyTimeout: a big write over an uplink slower than
// 64 KiB/s) was not applied: it is "not now", queued again, never dead
// and not counted as a refusal. Before, its -32600 read as a strict
// parse's refusal and the op was dead at once, "write it anew,
// corrected" (attack94 F5).
func TestABodyTheGatewayDidNotGetInTimeIsNotDead(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.sqlite"), "dev-1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	o, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"megabytes"}`)})
	if err != nil {
		t.Fatal(err)
	}
	late := &outbox.RPCError{Code: ledger.CodeBodyTimeout, Message: "devbox-config gateway: Request Timeout: the body (1900000 bytes) did not arrive within 39s"}
	f := &outbox.Flusher{S: s, P: refusingPrimary{late}, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Hour} // one try per Drain
	f.Drain(ctx)
	got, err := s.Get(ctx, o.LocalSeq)
	if err != nil {
		t.Fatal(err)
	}
	if fl := outbox.FailureOf(got.Error); got.State != outbox.Queued || fl.Kind != outbox.Busy || got.Refusals != 0 || !strings.Contains(fl.Message, "did not arrive") {
		t.Errorf("after the gateway's 408: state %s, refusals %d, failure %+v; want queued, busy, no refusal counted", got.State, got.Refusals, fl)
	}
}

// slowUplink is a gateway behind a link too slow for one big write: its
// first send runs out of its bound mid-body (not sent), every later one
// is answered 408 (the body did not arrive in the gateway's time); any
// other write lands.
type slowUplink struct {
	mu    sync.Mutex
	sends map[string]int // content: sends of it
}

func (p *slowUplink) Call(ctx context.Context, _ string, args json.RawMessage) (map[string]any, error) {
	var a struct{ Content string }
	json.Unmarshal(args, &a)
	p.mu.Lock()
	p.sends[a.Content]++
	n := p.sends[a.Content]
	p.mu.Unlock()
	switch {
	case a.Content != "megabytes":
		return map[string]any{"success": true}, nil
	case n == 1:
		<-ctx.Done()
		return nil, fmt.Errorf("%w: cut writing: %w", outbox.ErrNotSent, ctx.Err())
	}
	return nil, &outbox.RPCError{Code: ledger.CodeBodyTimeout, Message: "devbox-config gateway: Request Timeout: the body did not arrive"}
}
func (*slowUplink) Up() bool { return true }

// A write the gateway answered 408 after an earlier send of it ran out of
// its bound no longer holds back its lane: the answer says the link is too
// slow for its body, not that the primary's writes hang, and it gets the
// same answer over that link every time. Before, the writes behind it
// waited for it to land, which over that link it never does.
func TestAWriteTooBigForTheLinkHoldsNoLaneBack(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.sqlite"), "dev-1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	big, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"megabytes"}`)})
	if err != nil {
		t.Fatal(err)
	}
	small, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"s","content":"a line"}`)})
	if err != nil {
		t.Fatal(err)
	}
	f := &outbox.Flusher{S: s, P: &slowUplink{sends: map[string]int{}}, Log: slog.New(slog.DiscardHandler), SendTimeout: 50 * time.Millisecond, BaseDelay: time.Hour}
	f.Drain(ctx) // the big write cut at its bound
	if err := s.ClearBackoff(ctx); err != nil {
		t.Fatal(err)
	}
	f.Drain(ctx) // sent again: 408
	b, _ := s.Get(ctx, big.LocalSeq)
	got, _ := s.Get(ctx, small.LocalSeq)
	if fl := outbox.FailureOf(b.Error); b.State != outbox.Queued || fl.Kind != outbox.Busy || got.State != outbox.Done {
		t.Errorf("the big write %s %+v, the small one behind it %s %s; want the big one queued busy, the small one done", b.State, fl, got.State, got.Error)
	}
}

// A write refused as written holds nothing back: the next write on its
// object is sent, where before it waited behind the dead op until an
// operator dropped it (outside tester attack51 N1). Retried, the op takes
// its place before the later writes on its objects again.
func TestAnOpRefusedAsWrittenHoldsNothingBack(t *testing.T) {
	t.Parallel()
	s, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.sqlite"), "dev-1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	enqueue := func(content string) outbox.Op { // both of source a.md
		op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"` + content + `","source_file":"a.md"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	refused := enqueue("first")
	f := &outbox.Flusher{S: s, P: refusingPrimary{&outbox.RPCError{Code: -32602, Message: "Invalid params: room"}}, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Hour}
	f.Drain(ctx)
	if got, _ := s.GetByID(ctx, refused.ID); got.State != outbox.Dead {
		t.Fatalf("the refused op is %s", got.State)
	}
	later := enqueue("second")
	if b, blocked, err := s.Blocker(ctx, later); err != nil || blocked {
		t.Errorf("the write after it waits behind %s (%v)", b.Short(), err)
	}
	if _, err := s.Retry(ctx, refused.ID); err != nil {
		t.Fatal(err)
	}
	if b, blocked, err := s.Blocker(ctx, later); err != nil || !blocked || b.ID != refused.ID {
		t.Errorf("after a retry the write after it waits behind %q, want %s (%v)", b.Short(), refused.Short(), err)
	}
}
