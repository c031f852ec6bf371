package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// nullIDProxy passes everything on to target but a tools/call of tool,
// which it refuses as a gateway of an earlier release refused arguments
// its strict parse would not read: "Invalid Request", id null.
func nullIDProxy(t *testing.T, target, tool string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/call"`) && strings.Contains(string(body), `"`+tool+`"`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: $.params.arguments: key \"content\" appears twice"}}`)
			return
		}
		passOn(w, r, target, body, nil)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// attack64 F1: a write the primary answers "Invalid Request" with id null
// (the strict parse of a gateway that could not read the id) is refused
// as written, dead at once, and the breaker stays closed: before,
// the edge read the answer as not its own (the answer lost, the write
// maybe applied for good, resent after a look-up) and opened the breaker.
func TestAnInvalidRequestAnsweredWithIDNullIsARefusalNotALoss(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	h := start(t, harnessOpts{primaryURL: nullIDProxy(t, srv.URL(), "mempalace_add_drawer")})
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "refused"})
	h.eventually("the write dead", func() bool { return len(h.deadOps()) == 1 })
	if op := h.deadOps()[0]; op.MaybeApplied || !outbox.FailureOf(op.Error).AsWritten {
		t.Errorf("dead op %+v %s, want refused as written, not maybe applied", op, op.Error)
	}
	if !h.edge.remote.Up() {
		t.Errorf("the breaker opened: %s", h.edge.remote.State())
	}
}
