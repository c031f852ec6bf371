package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A device's notifications/cancelled names its own request id, which the
// upstream never sees (the gateway sends ids of its own): forwarded, it
// named nothing, or another device's call under the same number. The
// gateway drops it (202, audited); before, the upstream received it.
func TestACancelIsNotForwarded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(up.Close)
	g := newGWAt(t, devices, &upstream{name: "recorder", url: up.URL + "/mcp"})
	status, answer := g.postRaw(g.tokens["laptop-7f3a"], "/mcp", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}`)
	if status != http.StatusAccepted || len(answer) != 0 {
		t.Fatalf("the cancel: %d %q, want 202 and no body", status, answer)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range seen {
		if strings.Contains(b, "notifications/cancelled") {
			t.Fatalf("the upstream received the device's cancel: %s", b)
		}
	}
	last := g.auditLog()
	if e := last[len(last)-1]; e.Method != "notifications/cancelled" || e.Rule != ruleCancelDropped || e.Status != http.StatusAccepted {
		t.Fatalf("its audit line: %+v", e)
	}
}
