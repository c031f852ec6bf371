package outbox_test

import (
	"bytes"
	"context"
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
	p := edge.NewPrimary(front.URL+target.Path, func() string { return "t" }, slog.New(slog.DiscardHandler), edge.PrimaryOptions{Timeout: 2 * time.Second,
		OnLedger: func(on bool) { outbox.RecordProtection(r.store, on) }})
	defer p.Close()
	r.p, r.flusher.P = p, edge.FlushTarget(p)

	ev := r.enqueue("event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "b"})
	diary := r.enqueue("diary_write", map[string]any{"agent_name": "pi", "entry": "with an op id"})
	r.drain()
	mu.Lock()
	defer mu.Unlock()
	if got := seen["mempalace_event_append"]; len(got) != 1 || got[0] != ev.ID {
		t.Errorf("event_append sent with op ids %q, want [%s]", got, ev.ID)
	}
	if got := seen["mempalace_diary_write"]; len(got) != 1 || got[0] != diary.ID {
		t.Errorf("diary_write sent with op ids %q, want [%s]", got, diary.ID)
	}
	for _, id := range seen["mempalace_list_drawers"] {
		if id != "" {
			t.Errorf("a look-up carried op id %s", id)
		}
	}
	if len(seen["mempalace_list_drawers"]) == 0 {
		t.Error("the diary's look-up was not made")
	}
	if pr := r.store.Protection(context.Background()); !strings.HasPrefix(pr, "ledger:") {
		t.Errorf("protection recorded: %q", pr)
	}
}
