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

// roomUnreadGateway is a gateway whose read of the diary room failed
// before the first send of op first, whose answer it then lost (the
// entry never reached the primary): it keeps every resend of that op in
// doubt (-32031, "could not be read before that send") unless the
// operator's word sends it (resend "operator"), as its ledger does. Any
// other op is filed. Its look-ups find an empty room.
type roomUnreadGateway struct {
	mu      sync.Mutex
	first   string         // the op id held in doubt ("" until its first send)
	filed   map[string]int // entry text -> times filed on the primary
	resends []string       // each send of first: params._meta resend
}

func (p *roomUnreadGateway) Up() bool                             { return true }
func (p *roomUnreadGateway) Ledger(context.Context) (bool, error) { return true, nil }
func (p *roomUnreadGateway) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	if tool == "mempalace_list_drawers" {
		return map[string]any{"drawers": []any{}, "total": json.Number("0")}, nil
	}
	var a struct {
		Entry string `json:"entry"`
		Diary struct {
			Entry string `json:"entry"`
		} `json:"diary"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := outbox.OpIDFrom(ctx)
	if p.first == "" {
		p.first = id
		return nil, errors.New("connection reset: the answer was lost")
	}
	if id == p.first {
		p.resends = append(p.resends, outbox.ResendFrom(ctx))
		if outbox.ResendFrom(ctx) != outbox.ResendByOperator {
			return nil, &outbox.RPCError{Code: ledger.CodeInDoubt, Message: "devbox-config gateway: the diary room of wing_pi could not be read before that send, so nothing tells whether the entry landed: … delivered <op> … retry <op>"}
		}
	}
	p.filed[a.Entry+a.Diary.Entry]++
	return map[string]any{"success": true}, nil
}

// attack84 F3: a diary entry (a diary_write, or a checkpoint's diary)
// the gateway keeps in doubt because it could not read the room before
// the first send. The operator looks in the room, does not find it, and
// runs `edge outbox retry`: the op is sent saying so ("operator"), which
// the gateway forwards unchecked, and the diary entries queued behind it
// on the wing follow. Before, the retry went out "looked-up", the
// gateway kept it in doubt again, and nothing of the wing reached the
// primary.
func TestAnOperatorsRetryOfADiaryEntryInDoubtLandsAndTheOpsBehindItGo(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string]string{
		"diary_write": `{"agent_name":"pi","entry":"F3 in doubt"}`,
		"checkpoint":  `{"items":[{"wing":"w","room":"r","content":"an item"}],"diary":{"agent_name":"pi","entry":"F3 in doubt"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_" + name, Payload: []byte(payload)})
			if err != nil {
				t.Fatal(err)
			}
			var behind []outbox.Op
			for _, text := range []string{"F3 behind 1", "F3 behind 2"} {
				b, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"` + text + `"}`)})
				if err != nil {
					t.Fatal(err)
				}
				behind = append(behind, b)
			}
			p := &roomUnreadGateway{filed: map[string]int{}}
			f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Millisecond}
			for range 3 {
				f.Drain(ctx) // its errors are the op's
			}
			if o, _ := s.Get(ctx, op.LocalSeq); o.State != outbox.InDoubt {
				t.Fatalf("the op whose room was not read: %s %s, want in doubt", o.State, o.Error)
			}
			if _, err := s.Retry(ctx, op.Short()); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				f.Drain(ctx)
			}
			for _, o := range append([]outbox.Op{op}, behind...) {
				if o, _ := s.Get(ctx, o.LocalSeq); o.State != outbox.Done {
					t.Fatalf("after the operator's retry, op %s is %s %s, want done; the retried op's sends carried resend %q", o.Short(), o.State, o.Error, p.resends)
				}
			}
			for _, text := range []string{"F3 in doubt", "F3 behind 1", "F3 behind 2"} {
				if n := p.filed[text]; n != 1 {
					t.Fatalf("the primary holds %q %d times, want once", text, n)
				}
			}
		})
	}
}

// failedOnceGateway is steppedBackGateway until the operator's resend,
// whose first send meets fail (a refusal, not for good; or a lost answer
// after the primary filed it); every later send is filed.
type failedOnceGateway struct {
	steppedBackGateway
	fail   error
	failed bool
}

func (p *failedOnceGateway) Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error) {
	p.mu.Lock()
	operator, failed := outbox.ResendFrom(ctx) == outbox.ResendByOperator, p.failed
	p.mu.Unlock()
	if !operator && !failed || tool == "mempalace_list_drawers" {
		return p.steppedBackGateway.Call(ctx, tool, args)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resends = append(p.resends, outbox.ResendFrom(ctx))
	if !failed {
		p.failed = true
		return nil, p.fail
	}
	return map[string]any{"success": true}, nil
}

// Reviewer 27 S3, reviewer 28 D2: the operator's resend of an op in doubt
// is one act: once it may have reached the gateway (refused, not for
// good; or filed with its answer lost), the op's later attempts go out as
// the edge's own again (under its op id, which the ledger answers from
// its record), not with the operator's override that skips the ledger's
// check. (Both failed before: every later attempt said "operator".)
func TestAnOperatorsResendIsOneAct(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]error{
		"refused":     &outbox.RPCError{Code: -32000, Message: "devbox-config gateway: refused this time"},
		"answer lost": errors.New("connection reset by peer"),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev", "lab")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"S3 one resend"}`)})
			if err != nil {
				t.Fatal(err)
			}
			p := &failedOnceGateway{fail: fail}
			f := &outbox.Flusher{S: s, P: p, Log: slog.New(slog.DiscardHandler), BaseDelay: time.Millisecond}
			for range 3 {
				f.Drain(ctx) // its errors are the op's
			}
			if o, _ := s.Get(ctx, op.LocalSeq); o.State != outbox.InDoubt {
				t.Fatalf("the op: %s %s, want in doubt", o.State, o.Error)
			}
			if _, err := s.Retry(ctx, op.Short()); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				time.Sleep(5 * time.Millisecond) // past a lost answer's backoff
				f.Drain(ctx)
			}
			o, _ := s.Get(ctx, op.LocalSeq)
			if got := strings.Join(p.resends, ","); o.State != outbox.Done || strings.Count(got, "operator") != 1 {
				t.Errorf("the op is %s %s; its sends carried resend %q, want the operator's once, then the edge's own", o.State, o.Error, got)
			}
		})
	}
}
