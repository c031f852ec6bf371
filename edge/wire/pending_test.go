package wire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestPendingMatchesAnswersToRequests(t *testing.T) {
	p := NewPending()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`, // no answer owed
		`{"jsonrpc":"2.0","id":"a","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":2.0,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":9,"result":{}}`, // the agent answering the edge
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
	} {
		p.Request([]byte(m))
	}
	if p.Len() != 4 {
		t.Fatalf("pending %d, want 4", p.Len())
	}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`, // the edge's own request, same id
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","id":"1","result":{}}`, // a string is not the number
	} {
		p.Answered([]byte(m))
	}
	if p.Len() != 4 {
		t.Fatalf("pending %d after messages that answer nothing, want 4", p.Len())
	}
	p.Answered([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))          // as the SDK writes
	p.Answered([]byte(`{"jsonrpc":"2.0","id":"a","error":{"code":1}}`)) // as the fast lane writes
	p.Answered([]byte(`{"result":{},"id":2,"jsonrpc":"2.0"}`))          // another order, the SDK's 2
	p.Request([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
	if p.Len() != 0 {
		t.Fatalf("pending %d, want 0", p.Len())
	}
}

func TestPendingWait(t *testing.T) {
	p := NewPending()
	if n, err := p.Wait(context.Background()); n != 0 || err != nil {
		t.Fatalf("empty: %d %v", n, err)
	}
	p.Request([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if n, err := p.Wait(ctx); n != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered: %d %v", n, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		p.Answered([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`))
	}()
	if n, err := p.Wait(context.Background()); n != 0 || err != nil {
		t.Fatalf("answered: %d %v", n, err)
	}
}

// The guard hands the SDK its input's end only after atEOF returns.
func TestGuardRunsAtEOFBeforeTheEnd(t *testing.T) {
	p := NewPending()
	released := make(chan struct{})
	var order []string
	g := GuardInput(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), io.Discard, slog.New(slog.DiscardHandler), nil, p,
		func() { <-released; order = append(order, "atEOF") })
	b, err := io.ReadAll(readerFunc(func(b []byte) (int, error) {
		n, err := g.Read(b)
		select {
		case <-released:
		default:
			if n > 0 && p.Len() == 1 {
				close(released) // the request was recorded before it was handed on
			}
		}
		return n, err
	}))
	order = append(order, "EOF")
	if err != nil || !strings.Contains(string(b), `"ping"`) || strings.Join(order, ",") != "atEOF,EOF" {
		t.Fatalf("read %q, %v, order %v", b, err, order)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }
