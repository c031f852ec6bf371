package gateway

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
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
