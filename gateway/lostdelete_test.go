package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/trash"
)

// deleteDevices: ops is an admin (its deletes go through the trash).
var deleteDevices = []Device{{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Admin: true, ReadRate: 1e9, WriteRate: 1e9}}

// keptOf lists the trash's deletes that kept drawer id, newest first.
func (g cuttingGateway) keptOf(t *testing.T, id string) []trash.Delete {
	t.Helper()
	var out []trash.Delete
	for _, d := range g.kept(t) {
		for _, dr := range d.Drawers {
			if dr.ID == id {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// holds says whether the upstream holds drawer id (asked past the
// gateway, which answers a drawer it cannot find as not visible).
func (g cuttingGateway) holds(t *testing.T, id string) bool {
	t.Helper()
	status, resp := postMCP(t.Context(), http.DefaultClient, g.upstream, upstreamToken, toolCall(json.RawMessage("1"), "mempalace_get_drawer", map[string]any{"drawer_id": id}))
	got := resultOf(resp)
	if status != 200 || got == nil {
		t.Fatalf("get_drawer %s: %d %s", id, status, resp)
	}
	return str(got["drawer_id"]) == id
}

func (g cuttingGateway) add(t *testing.T, args map[string]any) string {
	t.Helper()
	res, rpc, _ := g.call(g.tokens["ops"], "add_drawer", args)
	if rpc != nil || str(res["drawer_id"]) == "" {
		t.Fatalf("add_drawer %v: %v %v", args, res, rpc)
	}
	return str(res["drawer_id"])
}

func replayed(m map[string]any) bool {
	return gjson.GetBytes(encodeJSON(m), "result._meta."+gjson.Escape(ledger.ReplayedKey)).Bool()
}

// TestDeleteWhoseAnswerWasLostIsSettled (attack26 F1): ops's delete
// whose upstream answer the gateway lost is looked up at once, as a lost
// rewrite is: its drawers gone, it was applied (answered so, recorded in
// the op-id ledger, "deleted" in the trash), so its resend, after the
// operator restored the drawer, is answered from the ledger and deletes
// nothing (before: the op stayed in doubt, the edge's resend deleted the
// restored drawer again, and the trash listed three deletes for one);
// its drawers still there, it was not (answered "not applied", nothing
// in the trash, and its resend deletes). delete_drawers and
// delete_by_source alike.
func TestDeleteWhoseAnswerWasLostIsSettled(t *testing.T) {
	t.Parallel()
	lostDelete(t, startFake(t).url)
}

func lostDelete(t *testing.T, url string) {
	g := newCuttingGatewayWith(t, url, deleteDevices)
	ops := g.tokens["ops"]
	ctx := context.Background()

	d := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D precious"})
	del := func(op byte) (int, map[string]any) {
		return g.postOp(ops, "mempalace_delete_drawer", map[string]any{"drawer_id": d}, opOf(op))
	}
	g.proxy.Drop("mempalace_delete_drawer")
	if status, m := del('a'); status != 200 || result(m)["success"] != true {
		t.Fatalf("a delete whose answer was lost after it was made: %d %v, want the gateway to find it made", status, m)
	}
	if g.holds(t, d) {
		t.Fatal("the drawer is still on the primary")
	}
	if ks := g.keptOf(t, d); len(ks) != 1 || ks[0].State != trash.StateDeleted {
		t.Fatalf("the trash after the lost delete: %+v, want one delete, deleted", ks)
	}
	if _, err := g.restorer(t).Restore(ctx, []string{d}); err != nil || !g.holds(t, d) {
		t.Fatalf("restore: %v", err)
	}
	for _, send := range []func() (int, map[string]any){
		func() (int, map[string]any) { return del('a') },
		func() (int, map[string]any) {
			return g.postResend(ops, "mempalace_delete_drawer", map[string]any{"drawer_id": d}, opOf('a'))
		},
	} {
		if status, m := send(); status != 200 || !replayed(m) {
			t.Errorf("the delete's resend after the restore: %d %v, want the recorded answer", status, m)
		}
	}
	if !g.holds(t, d) {
		t.Error("the delete's resend deleted the restored drawer again")
	}
	if n := g.proxy.Calls("mempalace_delete_drawer"); n != 1 {
		t.Errorf("the primary got %d delete_drawer calls, want 1", n)
	}
	if ks := g.keptOf(t, d); len(ks) != 1 {
		t.Errorf("the trash lists %d deletes of the drawer for the one delete: %+v", len(ks), ks)
	}

	// Cut before the upstream got it: not applied, nothing kept, and the
	// resend deletes.
	g.cut("mempalace_delete_drawer")
	if status, m := del('b'); status == 200 || status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
		t.Errorf("a delete cut before the upstream got it: %d %v, want an answer that it was not applied", status, m)
	}
	if !g.holds(t, d) {
		t.Error("the drawer went with a delete that was not applied")
	}
	if ks := g.keptOf(t, d); len(ks) != 1 {
		t.Errorf("the trash after a delete that was not applied: %+v, want only the first delete", ks)
	}
	if status, m := del('b'); status != 200 || result(m)["success"] != true || replayed(m) || g.holds(t, d) {
		t.Errorf("the resend of a delete that was not applied: %d %v, want it made", status, m)
	}

	// delete_drawers, delete_by_source.
	d3 := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D3"})
	d4 := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D4"})
	d5 := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D5 from a file", "source_file": "/notes/lost.md"})
	for _, c := range []struct {
		tool string
		args map[string]any
		ids  []string
	}{
		{"mempalace_delete_drawers", map[string]any{"drawer_ids": []any{d3, d4}}, []string{d3, d4}},
		{"mempalace_delete_by_source", map[string]any{"source_file": "/notes/lost.md", "dry_run": false}, []string{d5}},
	} {
		g.proxy.Drop(c.tool)
		status, m := g.postOp(ops, c.tool, c.args, opOf(c.ids[0][len(c.ids[0])-1]))
		if status != 200 || result(m)["deleted"] != float64(len(c.ids)) {
			t.Errorf("%s whose answer was lost after it was made: %d %v, want the gateway to find it made", c.tool, status, m)
		}
		for _, id := range c.ids {
			if g.holds(t, id) {
				t.Errorf("%s: %s is still on the primary", c.tool, id)
			}
			if ks := g.keptOf(t, id); len(ks) != 1 || ks[0].State != trash.StateDeleted {
				t.Errorf("%s: the trash: %+v, want one delete, deleted", c.tool, ks)
			}
		}
	}
}

// TestRealDeleteWhoseAnswerWasLostIsSettled: the two tests around it
// against real MemPalace serve.
func TestRealDeleteWhoseAnswerWasLostIsSettled(t *testing.T) {
	u, _ := startReal(t)
	t.Run("looked up", func(t *testing.T) { lostDelete(t, u.url) })
	t.Run("in doubt, restored", func(t *testing.T) { doubtRestored(t, u.url) })
}

// TestRestoreSettlesTheDeleteTheLedgerHeldInDoubt (attack26 F1): a delete
// whose answer and look-up were both lost is in doubt, "unconfirmed" in
// the trash; the operator's restore settles its op as applied first, so
// the edge's resend (after -32031, its look-up finding the drawer there)
// is answered from the ledger and the restored drawer stays. The ledger's
// own refusal (in doubt) adds nothing to the trash.
func TestRestoreSettlesTheDeleteTheLedgerHeldInDoubt(t *testing.T) {
	t.Parallel()
	doubtRestored(t, startFake(t).url)
}

func doubtRestored(t *testing.T, url string) {
	g := newCuttingGatewayWith(t, url, deleteDevices)
	ops := g.tokens["ops"]
	d := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D precious"})
	args := map[string]any{"drawer_id": d}
	g.proxy.Drop("mempalace_delete_drawer")
	g.seen("mempalace_delete_drawer", func() { g.proxy.Drop("mempalace_get_drawers", "mempalace_get_drawer") }) // the look-up's
	if status, m := g.postOp(ops, "mempalace_delete_drawer", args, opOf('a')); status != http.StatusBadGateway {
		t.Fatalf("a delete whose answer and look-up were lost: %d %v, want it in doubt", status, m)
	}
	if ks := g.keptOf(t, d); len(ks) != 1 || ks[0].State != trash.StateUnconfirmed {
		t.Fatalf("the trash: %+v, want one delete, unconfirmed", ks)
	}
	if status, m := g.postOp(ops, "mempalace_delete_drawer", args, opOf('a')); status != 200 || gjson.GetBytes(encodeJSON(m), "error.code").Int() != ledger.CodeInDoubt {
		t.Fatalf("its resend: %d %v, want in doubt", status, m)
	}
	r := g.restorer(t)
	r.Ledger = g.srv.Ledger.(OpLedger).L
	if rs, err := r.Restore(context.Background(), []string{d}); err != nil || len(rs) != 1 || rs[0].Err != nil || !g.holds(t, d) {
		t.Fatalf("restore: %v %+v", err, rs)
	}
	if status, m := g.postResend(ops, "mempalace_delete_drawer", args, opOf('a')); status != 200 || result(m)["success"] != true || !replayed(m) {
		t.Errorf("the looked-up resend after the restore: %d %v, want the ledger's answer", status, m)
	}
	if !g.holds(t, d) {
		t.Error("the resend deleted the restored drawer again")
	}
	if n := g.proxy.Calls("mempalace_delete_drawer"); n != 1 {
		t.Errorf("the primary got %d delete_drawer calls, want 1", n)
	}
	if ks := g.keptOf(t, d); len(ks) != 1 {
		t.Errorf("the trash lists %d deletes of the drawer for the one delete: %+v", len(ks), ks)
	}
}

// TestDeleteWhosePrefetchIsNotAnsweredBacksOff (attack26 F3): while the
// primary does not answer the keep step's reads, an edge's queued
// delete_drawer is answered as the primary being busy (HTTP 503), which
// its outbox backs off on, not refused (-31003, dead after five tries in
// a few seconds, the agent told it succeeded); once the primary answers,
// the delete is made, once.
func TestDeleteWhosePrefetchIsNotAnsweredBacksOff(t *testing.T) {
	t.Parallel()
	g := newCuttingGatewayWith(t, startFake(t).url, deleteDevices)
	d := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D precious"})
	for range 10 { // twice the refusals that made it dead
		g.proxy.Drop("mempalace_get_drawers", "mempalace_get_drawer")
	}
	st, p, f := edgeOutbox(t, g.http.URL+"/mcp", g.tokens["ops"])
	if _, err := st.Enqueue(t.Context(), outbox.Write{Name: "mempalace_delete_drawer", Payload: encodeJSON(map[string]any{"drawer_id": d})}); err != nil {
		t.Fatal(err)
	}
	if s := drain(t, st, p, f, 60*time.Second); s.ByState[outbox.Done] != 1 {
		t.Fatalf("the delete did not settle: %+v", s)
	}
	if g.holds(t, d) {
		t.Error("the drawer is still on the primary")
	}
	if ks := g.keptOf(t, d); len(ks) != 1 || ks[0].State != trash.StateDeleted {
		t.Errorf("the trash: %+v, want one delete, deleted", ks)
	}
}

// TestDeleteSettledAfterTheDeviceHangsUp (attack28 n3): a delete whose
// answer the gateway lost, the device hanging up while the gateway looks
// its drawers up, is settled all the same: the look-up and the trash's
// record run to their end, so the trash says deleted (before: the record
// failed with "context canceled" and the delete stayed "pending" for
// good), with an op id (the ledger's) and without one.
func TestDeleteSettledAfterTheDeviceHangsUp(t *testing.T) {
	t.Parallel()
	g := newCuttingGatewayWith(t, startFake(t).url, deleteDevices)
	for i, meta := range []map[string]any{{ledger.MetaKey: opOf('e')}, nil} {
		d := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": fmt.Sprint("D hung up ", i)})
		ctx, hangUp := context.WithCancel(context.Background())
		g.proxy.Drop("mempalace_delete_drawer")
		g.seen("mempalace_delete_drawer", func() { g.seen("mempalace_get_drawers", hangUp) }) // during the look-up
		params := map[string]any{"name": "mempalace_delete_drawer", "arguments": map[string]any{"drawer_id": d}}
		if meta != nil {
			params["_meta"] = meta
		}
		body := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, g.http.URL+"/mcp", bytes.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Authorization", "Bearer "+g.tokens["ops"])
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		g.srv.ServeHTTP(rec, req)
		if ctx.Err() == nil {
			t.Fatalf("op id %v: the device did not hang up during the look-up: %d %s", meta, rec.Code, rec.Body)
		}
		if g.holds(t, d) {
			t.Fatalf("op id %v: the drawer is still on the primary", meta)
		}
		if ks := g.keptOf(t, d); len(ks) != 1 || ks[0].State != trash.StateDeleted {
			t.Errorf("op id %v: the trash after the device hung up: %d delete(s) %v, want one, deleted", meta, len(ks), states(ks))
		}
	}
}

func states(ds []trash.Delete) []trash.State {
	out := make([]trash.State, len(ds))
	for i, d := range ds {
		out[i] = d.State
	}
	return out
}
