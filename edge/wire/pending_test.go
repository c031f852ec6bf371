package wire

import (
	"context"
	"errors"
	"fmt"
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

// At the very end the edge answers what is still pending itself (Owed):
// each such request, and no other, is listed with its id and tool, and an
// answer that comes after the edge's own is not written: the agent gets
// each answer once.
func TestOwedIsAnsweredOnce(t *testing.T) {
	p := NewPending()
	var out strings.Builder
	sw := &SyncWriter{W: nopCloser{&out}, Pending: p}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":"w1","method":"tools/call","params":{"name":"mempalace_add_drawer"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mempalace_search"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
	} {
		p.Request([]byte(m))
	}
	sw.Write([]byte(`{"jsonrpc":"2.0","id":6,"result":{}}` + "\n"))
	got := map[string]string{}
	for _, r := range p.Owed() {
		got[string(r.ID)] = r.Tool
	}
	want := map[string]string{`"w1"`: "mempalace_add_drawer", "4": "mempalace_search", "5": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("owed %v, want %v", got, want)
	}
	sw.Write([]byte(`{"jsonrpc":"2.0","id":"w1","error":{"code":1,"message":"stopping"}}` + "\n")) // the edge's own
	sw.Write([]byte(`{"jsonrpc":"2.0","id":"w1","result":{}}` + "\n"))                             // the lane's, too late
	sw.Write([]byte(`{"jsonrpc":"2.0","id":6,"result":{}}` + "\n"))                                // answered before the end
	sw.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/message"}` + "\n"))                  // no answer: written
	if want := `{"jsonrpc":"2.0","id":6,"result":{}}
{"jsonrpc":"2.0","id":"w1","error":{"code":1,"message":"stopping"}}
{"jsonrpc":"2.0","method":"notifications/message"}
`; out.String() != want {
		t.Errorf("written:\n%s\nwant:\n%s", out.String(), want)
	}
	if p.Len() != 2 {
		t.Errorf("pending %d, want the 2 not answered yet", p.Len())
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
