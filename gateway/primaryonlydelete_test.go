package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// deleteHold is a proxy to a gateway that, armed, holds each
// delete_drawer call until released.
type deleteHold struct {
	url        string
	mu         sync.Mutex
	held, free chan struct{} // held: closed at the first call held; free nil: not armed
}

// holdingDeletes is a deleteHold in front of the gateway at to, armed.
func holdingDeletes(t *testing.T, to string) *deleteHold {
	t.Helper()
	u, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	h := &deleteHold{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // a short body is forwarded short: the gateway answers it
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"mempalace_delete_drawer"`)) {
			h.mu.Lock()
			free := h.free
			if free != nil {
				select {
				case <-h.held:
				default:
					close(h.held)
				}
			}
			h.mu.Unlock()
			if free != nil {
				<-free
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	h.url = srv.URL + "/mcp"
	h.arm()
	t.Cleanup(srv.Close)
	t.Cleanup(h.release) // before Close, which waits for a held call
	return h
}

// arm holds the delete_drawer calls from now on; the channel it returns
// is closed when one is held.
func (h *deleteHold) arm() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.free = make(chan struct{}), make(chan struct{})
	return h.held
}

// release lets the held calls (and later ones) through, disarmed.
func (h *deleteHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.free != nil {
		close(h.free)
		h.free = nil
	}
}

// An admin device's delete_drawer of a drawer its local palace never held
// (another device wrote it: the edge reads the primary's copy) carries the
// base of the text it read there, so when another device's edit lands
// before the delete is sent, the gateway refuses it -32033, dead at once,
// and the edit stays on the primary (attack104 F1). Before, the delete
// carried no base and removed the edit the admin never saw.
func TestAnAdminsDeleteOfAnotherDevicesDrawerKeepsALaterEdit(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	desk := g.tokens["desk-9b21"]
	a, rpc, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "f1", "content": "desk note: the deploy key rotates monthly"})
	if rpc != nil {
		t.Fatal(rpc)
	}
	id := str(a["drawer_id"])
	hold := holdingDeletes(t, g.http.URL+"/mcp")
	held := hold.held
	palace := filepath.Join(t.TempDir(), "palace")
	admin := edgeAt(t, hold.url, g.tokens["admin-0001"], palace)
	if got := edgeCall(t, admin, "get_drawer", map[string]any{"drawer_id": id}); got["content"] == nil {
		t.Fatalf("the admin's read of desk's drawer: %v", got)
	}
	res := edgeCall(t, admin, "delete_drawer", map[string]any{"drawer_id": id})
	op, _ := res["edge"].(map[string]any)["op_id"].(string)
	if op == "" || res["success"] != true {
		t.Fatalf("the admin's delete of desk's drawer: %v (want it queued for the primary)", res)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued delete was never sent")
	}
	const newer = "desk note EDITED: the deploy key rotates weekly now"
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": newer}); rpc != nil {
		t.Fatal(rpc)
	}
	hold.release()
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	o := settledOp(t, ob, op, "the delete settled")
	if f := outbox.FailureOf(o.Error); o.State != outbox.Dead || f.Kind != outbox.ChangedOnPrimary {
		t.Errorf("the admin's delete sent after desk's edit: %s %s (want dead, %s)", o.State, o.Error, outbox.ChangedOnPrimary)
	}
	if got := primaryText(g, id); got != newer {
		t.Errorf("the primary's text after the admin's delete: %q (want desk's edit)", got)
	}
}
