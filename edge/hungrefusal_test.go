package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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

// With the primary hung, a write the edge's grants refuse is refused
// after one ask of the gateway at most: the ask that timed out opens the
// breaker like any failed call, so the next refusal answers at once
// rather than waiting out the call timeout again (an outside tester:
// every refused write took 10 s, again and again).
func TestRefusalsDoNotEachWaitOnAHungPrimary(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	gwURL, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "bob", Read: []string{"*"}, Write: []string{"wing_bob"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	url, hang := hangingProxy(t, gwURL)
	const timeout = time.Second
	h := start(t, harnessOpts{primaryURL: url, token: tokens["bob-02"], timeout: timeout})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	hang.Store(true)
	for i, content := range []string{"first refused", "second refused"} {
		began := time.Now()
		_, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": content})
		took := time.Since(began)
		t.Logf("refusal %d took %v", i+1, took)
		if !res.IsError {
			t.Fatalf("a write outside the write globs was taken: %v", res.Content)
		}
		if i == 1 && took > timeout/2 {
			t.Errorf("the second refusal took %v: it waited on the hung primary again (call timeout %v)", took, timeout)
		}
	}
}
