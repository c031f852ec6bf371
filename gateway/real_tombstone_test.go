package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Against real MemPalace 3.11.0, an edge over a real mempalace-mcp (stdio)
// behind the gateway in front of a real serve: a non-admin device's
// delete stays local and its tombstone hides the primary's copy from
// merged search; an admin device's delete lands in the gateway's trash,
// and the restore brings it back under the same id with the same content.
func TestRealEdgeDeleteTombstoneTrashRestore(t *testing.T) {
	u, srv := startReal(t)
	desk := Device{ID: "desk-0002", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, ReadRate: 1e9, WriteRate: 1e9}
	g := newGWAt(t, append([]Device{desk}, deleters...), u)
	url := g.http.URL + "/mcp"
	onPrimary := func(id string) map[string]any {
		got, _ := srv.Call("mempalace_get_drawer", map[string]any{"drawer_id": id})
		return got
	}

	local := realpalace.New(t)
	s := edgeWith(t, url, g.tokens["desk-0002"], local.Dir, local.MCPCommand(), local.Env(), 60*time.Second)
	const kept = "the staging database lives on host db-7, port 5433"
	id, _ := edgeCall(t, s, "add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": kept})["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return onPrimary(id)["content"] == kept })
	if m := edgeCall(t, s, "delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true || !strings.Contains(replication(m), "not admin-scoped") {
		t.Fatalf("the non-admin's delete: %v", m)
	}
	if m := edgeCall(t, s, "search", map[string]any{"query": "staging database host", "limit": 10}); strings.Contains(fmtJSON(m), id) {
		t.Fatalf("merged search shows the primary's copy of a deleted drawer: %s", fmtJSON(m))
	}
	if onPrimary(id)["content"] != kept {
		t.Fatal("a non-admin device's delete reached the primary")
	}

	adminPalace := realpalace.New(t)
	a := edgeWith(t, url, g.tokens["ops-0001"], adminPalace.Dir, adminPalace.MCPCommand(), adminPalace.Env(), 60*time.Second)
	const gone = "the old VPN endpoint is vpn-2.example.net"
	id2, _ := edgeCall(t, a, "add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": gone})["drawer_id"].(string)
	waitUntil(t, "the admin's drawer on the primary", func() bool { return onPrimary(id2)["content"] == gone })
	if m := edgeCall(t, a, "delete_drawer", map[string]any{"drawer_id": id2}); m["success"] != true || replication(m) != "queued" {
		t.Fatalf("the admin's delete: %v", m)
	}
	waitUntil(t, "the delete on the primary", func() bool { return onPrimary(id2)["error"] != nil })
	ds := g.kept(t)
	if len(ds) != 1 || ds[0].Device != "ops-0001" || len(ds[0].Drawers) != 1 || ds[0].Drawers[0].ID != id2 || ds[0].Drawers[0].Content != gone {
		t.Fatalf("the trash: %+v", ds)
	}
	rs, err := g.restorer(t).Restore(context.Background(), []string{id2})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].As != id2 {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	if got := onPrimary(id2); got["content"] != gone || got["wing"] != "shared" || got["room"] != "ops" {
		t.Fatalf("the restored drawer: %v", got)
	}
}
