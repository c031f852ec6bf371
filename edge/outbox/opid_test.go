package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// Every outbox send carries its op id in params._meta, look-ups never do,
// and an answer advertising a ledger is recorded as the outbox's
// protection (what `edge status` prints).
func TestSendsCarryTheirOpID(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	target, _ := url.Parse(r.srv.URL())
	var mu sync.Mutex
	seen := map[string][]string{} // tool -> op ids sent with it ("" for none)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	inner := proxy.Director
	proxy.Director = func(req *http.Request) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if gjson.GetBytes(body, "method").String() == "tools/call" {
			mu.Lock()
			tool := gjson.GetBytes(body, "params.name").String()
			seen[tool] = append(seen[tool], gjson.GetBytes(body, `params._meta.devbox-config/op-id`).String())
			mu.Unlock()
		}
		inner(req)
		req.Host = target.Host // mempalace serve pins Host to its bind address
	}
	proxy.ModifyResponse = func(resp *http.Response) error { ledger.Advertise(resp.Header); return nil }
	front := httptest.NewServer(proxy)
	defer front.Close()
	p := edge.NewPrimary(front.URL+target.Path, func() string { return "t" }, slog.New(slog.DiscardHandler), edge.PrimaryOptions{Timeout: 2 * time.Second, Probe: 10 * time.Millisecond,
		OnLedger: func(on bool) { outbox.RecordProtection(r.store, on) }})
	defer p.Close()
	r.p, r.flusher.P = p, edge.FlushTarget(p)

	ev := r.enqueue("event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "b"})
	diary := r.enqueue("diary_write", map[string]any{"agent_name": "pi", "entry": "with an op id"})
	r.enqueue("kg_add", map[string]any{"subject": "ada", "predicate": "worked_at", "object": "acme", "valid_from": "2020-01-01", "valid_to": "2021-01-01"}) // a closed fact: always looked up first
	r.drain()
	mu.Lock()
	defer mu.Unlock()
	if got := seen["mempalace_event_append"]; len(got) != 1 || got[0] != ev.ID {
		t.Errorf("event_append sent with op ids %q, want [%s]", got, ev.ID)
	}
	if got := seen["mempalace_diary_write"]; len(got) != 1 || got[0] != diary.ID {
		t.Errorf("diary_write sent with op ids %q, want [%s]", got, diary.ID)
	}
	for _, id := range seen["mempalace_kg_query"] {
		if id != "" {
			t.Errorf("a look-up carried op id %s", id)
		}
	}
	if len(seen["mempalace_kg_query"]) == 0 {
		t.Error("the closed fact's look-up was not made")
	}
	if pr := r.store.Protection(context.Background()); !strings.HasPrefix(pr, "ledger:") {
		t.Errorf("protection recorded: %q", pr)
	}
}

// A 200 whose result holds no JSON object (a proxy's "try later" page as
// a text block, an empty result) is not taken for a landed write: the
// write is sent again and reaches the primary (found by an attacker pass:
// such an answer emptied the outbox and the write was lost).
func TestUnreadableAnswerIsNotSuccess(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	f := r.behind(nil)
	garbled := 0
	f.answer = func(tool string) json.RawMessage { // answered without reaching the primary
		if tool != "mempalace_event_append" || garbled == 2 {
			return nil
		}
		garbled++
		if garbled == 2 {
			return json.RawMessage(`{}`)
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"Internal server error, try later"}]}`)
	}
	r.enqueue("event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "must arrive"})
	r.drain()
	if garbled != 2 {
		t.Fatalf("the unreadable answers were given %d times, want 2", garbled)
	}
	n := 0
	for _, e := range r.primary.Dump().Events {
		if e.Body == "must arrive" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the event is on the primary %d times, want 1", n)
	}
}
