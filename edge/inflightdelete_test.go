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

	"github.com/tidwall/gjson"
)

// A secret edited into a drawer already on the primary goes to the
// flusher, and the primary, slow, holds the send; meanwhile the agent
// deletes the drawer (or its source). The send then fails without
// landing (the primary answers "another writer holds the palace"), and
// the primary comes back. The delete must take the update back as it
// would have had the update still been queued: the primary never holds
// the secret. Before, a delete took back only what was queued at that
// moment: the update in flight went back to the queue, and once the
// primary answered again every other device read the secret there.
func TestADeleteMadeWhileTheUpdateIsInFlightTakesItBackWhenItsSendFails(t *testing.T) {
	t.Parallel()
	const src = "/work/runbook-inflight.md"
	for _, c := range []struct {
		tool string
		args func(id string) map[string]any
	}{
		{"delete_drawer", func(id string) map[string]any { return map[string]any{"drawer_id": id} }},
		{"delete_drawers", func(id string) map[string]any { return map[string]any{"drawer_ids": []any{id}} }},
		{"delete_by_source", func(string) map[string]any { return map[string]any{"source_file": src, "dry_run": false} }},
	} {
		t.Run(c.tool, func(t *testing.T) {
			t.Parallel()
			primary, srv := startPrimary(t)
			url, held := busyProxy(t, srv.URL(), "update_drawer")
			h := start(t, harnessOpts{primaryURL: url})
			note := "deploy notes, deleted by " + c.tool
			id := DrawerIDFor("notes", "src", note)
			h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": note, "source_file": src})
			h.eventually("the note on the primary", func() bool { return primary.Dump().Drawers[id] != nil })
			h.drained()
			held.hold.Store(true)
			h.call("update_drawer", map[string]any{"drawer_id": id, "content": note + " password=hunter2"})
			select {
			case <-held.arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the update never reached the primary")
			}
			if m, res := h.call(c.tool, c.args(id)); res.IsError {
				t.Fatalf("%s: %v", c.tool, m)
			}
			held.hold.Store(false)
			close(held.release) // the held send answered: not applied
			ctx := context.Background()
			h.eventually("the outbox drained", func() bool {
				h.edge.outbox.ClearBackoff(ctx)
				h.edge.outbox.Kick()
				n, _, err := h.edge.outbox.Pending(ctx)
				return err == nil && n == 0
			})
			if d := primary.Dump().Drawers[id]; d != nil && strings.Contains(d.Content, "hunter2") {
				t.Fatalf("the primary holds the update the %s took back: %+v", c.tool, d)
			}
		})
	}
}

// The same for a new drawer whose add_drawer the primary holds: deleted
// meanwhile, it never reaches the primary once the send fails.
func TestADeleteMadeWhileTheAddIsInFlightTakesItBackWhenItsSendFails(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	url, held := busyProxy(t, srv.URL(), "add_drawer")
	h := start(t, harnessOpts{primaryURL: url})
	const secret = "the deploy key, pasted by mistake: hunter2"
	id := DrawerIDFor("notes", "src", secret)
	held.hold.Store(true)
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": secret})
	select {
	case <-held.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the add never reached the primary")
	}
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
		t.Fatalf("delete_drawer: %v", m)
	}
	held.hold.Store(false)
	close(held.release)
	ctx := context.Background()
	h.eventually("the outbox drained", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		n, _, err := h.edge.outbox.Pending(ctx)
		return err == nil && n == 0
	})
	if d := primary.Dump().Drawers[id]; d != nil {
		t.Fatalf("the primary holds the drawer deleted before it was sent: %+v", d)
	}
}

// heldSend is busyProxy's control: hold set, the next tools/call of the
// tool is held (arrived closed) until release is closed, then answered
// with MemPalace's "another writer holds the palace" (not applied).
type heldSend struct {
	hold             atomic.Bool
	arrived, release chan struct{}
}

// busyProxy passes every request on to target but a tools/call of tool
// while held.hold is set (once): see heldSend.
func busyProxy(t *testing.T, target, tool string) (string, *heldSend) {
	t.Helper()
	held := &heldSend{arrived: make(chan struct{}), release: make(chan struct{})}
	var once atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := gjson.ParseBytes(body)
		if !held.hold.Load() || req.Get("method").String() != "tools/call" || !strings.HasSuffix(req.Get("params.name").String(), tool) || !once.CompareAndSwap(false, true) {
			passOn(w, r, target, body, nil)
			return
		}
		close(held.arrived)
		select {
		case <-held.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"another writer holds the palace"}}`, req.Get("id").Raw)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", held
}
