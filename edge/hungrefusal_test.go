package edge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
)

// hangingProxy stands in front of target and passes every request on
// until hang is set; from then on it holds each request until the client
// gives up (a primary that accepts and never answers: `mempalace serve`
// stopped behind a gateway that is up).
func hangingProxy(t *testing.T, target string) (string, *atomic.Bool) {
	t.Helper()
	var hang atomic.Bool
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // read to the end, r's context ends when the client goes
		if hang.Load() {
			select {
			case <-r.Context().Done():
			case <-closed:
			}
			return
		}
		passOn(w, r, target, body, nil)
	}))
	t.Cleanup(func() { close(closed); srv.Close() })
	return srv.URL + "/mcp", &hang
}

// slowProxy is hangingProxy for a primary that is slow but alive: once
// delay is set, every request is held that long, then passed on.
func slowProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	var delay atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(time.Duration(delay.Load())):
		case <-r.Context().Done():
			return
		}
		passOn(w, r, target, body, nil)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", &delay
}

// refusedWrite is a write outside bob-02's write globs, and how long the
// agent waited for its answer.
func refusedWrite(h *harness, content string) (*mcp.CallToolResult, time.Duration) {
	began := time.Now()
	_, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": content})
	return res, time.Since(began)
}

// With the primary hung, a write the edge's grants refuse is refused
// within the grant re-ask's own short bound, not after the call timeout
// (an outside tester: every refused write took 10 s, the call timeout),
// and the next refusal answers at once rather than asking again.
func TestRefusalsDoNotWaitOnAHungPrimary(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	gwURL, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: []string{"wing_bob"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	url, hang := hangingProxy(t, gwURL)
	const timeout = 5 * time.Second
	h := start(t, harnessOpts{primaryURL: url, token: tokens["bob-02"], timeout: timeout, grantAsk: 300 * time.Millisecond})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	h.call("list_wings", nil) // the agent's first call (the primary's tools listed), as in the outside tester's run
	h.call("list_wings", nil) // the agent's first call (the primary's tools listed), as in the outside tester's run
	hang.Store(true)
	for i, limit := range []time.Duration{2 * time.Second, 500 * time.Millisecond} {
		res, took := refusedWrite(h, fmt.Sprint("refused ", i))
		t.Logf("refusal %d took %v", i+1, took)
		if !res.IsError {
			t.Fatalf("a write outside the write globs was taken: %v", res.Content)
		}
		if took > limit {
			t.Errorf("refusal %d took %v with the primary hung (call timeout %v): want under %v", i+1, took, timeout, limit)
		}
	}
}

// A primary that is slow but alive (1.5 s an answer, well within the
// call timeout) is not taken for down by a refused write's re-ask that
// outlived its bound: the write is answered within the bound, the reads
// after it still go to the primary, and a grant the operator gave is
// heard from the ask's late answer, so a later write is taken.
func TestARefusalDoesNotMarkASlowPrimaryDown(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	gwURL, tokens, gw := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: []string{"wing_bob"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	url, delay := slowProxy(t, gwURL)
	h := start(t, harnessOpts{primaryURL: url, token: tokens["bob-02"], timeout: 5 * time.Second, grantAsk: 300 * time.Millisecond})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	h.call("list_wings", nil) // the agent's first call (the primary's tools listed), as in the outside tester's run
	h.call("list_wings", nil) // the agent's first call (the primary's tools listed), as in the outside tester's run
	setWriteGrants(t, gw, "bob-02", "wing_bob", "wing_shared")
	delay.Store(int64(1500 * time.Millisecond))
	if _, took := refusedWrite(h, "asked while the primary is slow"); took > time.Second {
		t.Errorf("the write waited %v for a slow primary's answer: want the re-ask's bound", took)
	}
	if r, _ := h.call("kg_stats", nil); edgeOf(r)["source"] != "primary" || r["degraded"] != nil {
		t.Errorf("a read after the re-ask was not asked of the slow primary (marked down?): %v", r)
	}
	if res, _ := refusedWrite(h, "granted meanwhile"); res.IsError {
		t.Errorf("the grant the gateway gave was not heard from the slow primary: %s", refusalText(res))
	}
}

// A write the primary took but answered after the call timeout is told as
// what it is, a call that left and got no answer in time (it may have
// landed), not as "primary unreachable", which sends the user to the
// network (outside tester attack37 A5: `edge flush` and `edge status`
// said unreachable while the write had landed).
func TestALateAnswerIsNotCalledUnreachable(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	url, delay := slowProxy(t, srv.URL())
	h := start(t, harnessOpts{primaryURL: url, timeout: 500 * time.Millisecond})
	// The edge's session with the primary is up before the primary slows:
	// its first connect may itself outlast the timeout on a loaded machine,
	// and a write's connect that does never leaves.
	h.eventually("a read the primary answered", func() bool { r, _ := h.call("kg_stats", nil); return edgeOf(r)["source"] == "primary" })
	delay.Store(int64(2 * time.Second))
	h.call("add_drawer", map[string]any{"wing": "wing_a", "room": "r", "content": "answered late"})
	var last string
	h.eventually("the write's failed send recorded", func() bool {
		ops, err := h.edge.outbox.List(context.Background(), 10, outbox.Queued)
		if err != nil || len(ops) != 1 || len(ops[0].Error) == 0 {
			return false
		}
		last = outbox.Words(ops[0].Error)
		return true
	})
	if strings.Contains(last, "unreachable") || !strings.Contains(last, "did not answer in time") || !strings.Contains(last, "may have landed") {
		t.Errorf("the late answer's failure reads %q: want it lost (may have landed) because the primary did not answer in time", last)
	}
}
