package edge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// attack95 F2: an ask the edge queued (the gateway busy, 503) and sent at
// a later flush, whose answer carries the gateway's warning that its
// to_agent is no device's agent, is told to the agent that sent it: the
// answer at the time said only "queued", so without this the sender
// believes it delivered an ask that no mailbox lists. Told on the next
// tool answer, and at the next session start.
func TestAQueuedAskToNoAgentIsToldWhenSent(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	gwURL, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	target, _ := url.Parse(gwURL)
	var busy atomic.Bool
	busy.Store(true)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if busy.Load() && bytes.Contains(body, []byte("mempalace_event_append")) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	h := start(t, harnessOpts{primaryURL: proxy.URL + "/mcp", token: tokens["bob-02"]})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })

	m, res := h.call("event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "general",
		"from_agent": "opencode@edge-test", "to_agent": "claude@alise", "status": "open", "body": "queued typo"})
	if res.IsError || m["queued"] != true {
		t.Fatalf("the ask was not queued: %v %s", m, refusalText(res))
	}
	busy.Store(false)
	ctx := context.Background()
	h.eventually("the queued ask sent", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		n, _, err := h.edge.outbox.Pending(ctx)
		return err == nil && n == 0
	})
	_, res = h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "the next call"})
	note := notesOf(res)
	for _, want := range []string{"claude@alise", "no agent of any device", "mempalace_event_append"} {
		if !strings.Contains(note, want) {
			t.Errorf("the next tool answer's note lacks %q:\n%q", want, note)
		}
	}
	if !strings.Contains(h.logs.String(), "claude@alise") {
		t.Errorf("the edge's log does not name the address the gateway warned of:\n%s", h.logs.String())
	}
	h.stop()
	<-h.done
	h2 := start(t, harnessOpts{palace: h.palace, primaryURL: proxy.URL + "/mcp", token: tokens["bob-02"]})
	if in := instructionsOf(h2); !strings.Contains(in, "claude@alise") {
		t.Errorf("the next session's instructions do not tell of it:\n%s", in)
	}
}

// An ask sent at once, whose own answer carries the gateway's warning,
// is not told again on the next tool answer nor at the next session
// start as a write "queued and sent later" (review31 F1).
func TestAnAskWarnedInItsOwnAnswerIsNotToldAgain(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	gwURL, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: gwURL, token: tokens["bob-02"]})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	m, res := h.call("event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "general",
		"from_agent": "opencode@edge-test", "to_agent": "claude@alise", "status": "open", "body": "sent at once"})
	if res.IsError || !strings.Contains(mustJSON(m), "claude@alise") {
		t.Fatalf("the ask's own answer does not carry the warning: %v %s", m, refusalText(res))
	}
	_, res = h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "the next call"})
	if note := notesOf(res); strings.Contains(note, "claude@alise") {
		t.Errorf("the next tool answer tells the warning again:\n%q", note)
	}
	h.stop()
	<-h.done
	h2 := start(t, harnessOpts{palace: h.palace, primaryURL: gwURL, token: tokens["bob-02"]})
	if in := instructionsOf(h2); strings.Contains(in, "claude@alise") {
		t.Errorf("the next session's instructions tell the warning again:\n%s", in)
	}
}
