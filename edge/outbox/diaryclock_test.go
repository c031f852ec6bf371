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

// steppedBackGateway is a gateway whose diary room is empty to every
// look-up (the entry the first send made is stamped behind the fence, or
// the listing shows nothing newer), which lost the first diary_write's
// answer and holds the op in doubt when the edge's look-up sends it again
// (its first send noted the room, and the room grew with no newer entry:
// the primary's clock stepped back).
type steppedBackGateway struct {
	mu      sync.Mutex
	writes  int
	resends []string // each write's params._meta resend ("" for none)
}

func (p *steppedBackGateway) Up() bool                             { return true }
func (p *steppedBackGateway) Ledger(context.Context) (bool, error) { return true, nil }
func (p *steppedBackGateway) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	if tool == "mempalace_list_drawers" {
		return map[string]any{"drawers": []any{}, "total": json.Number("0")}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resends = append(p.resends, outbox.ResendFrom(ctx))
	if p.writes++; p.writes == 1 {
		return nil, errors.New("connection reset: the answer was lost")
	}
	return nil, &outbox.RPCError{Code: ledger.CodeInDoubt, Message: "devbox-config gateway: this diary entry may be on the primary: … the primary's clock may have stepped back … delivered <op> … retry <op>"}
}

// attack74 F5 at the edge: a diary_write whose look-up found nothing and
// whose resend the gateway answers "in doubt" (it may be there, stamped
// behind the fence) is in doubt, for an operator, its message naming the
// op, and is not sent again on its own.
func TestADiaryWriteTheGatewayHoldsInDoubtAfterItsLookUpIsInDoubt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"K37 clock stepped back"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := &steppedBackGateway{}
	f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Millisecond}
	for range 3 {
		f.Drain(ctx) // its errors are the op's
	}
	o, _ := s.Get(ctx, op.LocalSeq)
	if msg := outbox.FailureOf(o.Error).Message; o.State != outbox.InDoubt || !strings.Contains(msg, "delivered "+o.Short()) {
		t.Fatalf("a diary write the gateway holds in doubt after its look-up: %s %s (want in doubt, naming the op)", o.State, o.Error)
	}
	// The first send; its resend, which the ledger answers from its
	// record or holds in doubt; the resend after the look-up; no more.
	if got := strings.Join(p.resends, ","); got != ",,looked-up" {
		t.Fatalf("the diary write's sends carried resend %q, want the first, a plain one, one after the look-up", p.resends)
	}
}
