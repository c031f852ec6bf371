package edge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// adminRouter is routerUnderTest behind a gateway that says this device
// is admin-scoped and keeps a trash: its deletes are queued for the
// primary.
func adminRouter(t *testing.T) (*Edge, *inProcess, *inProcess, *outbox.Store) {
	t.Helper()
	e, local, primary, ob := routerUnderTest(t)
	primary.device = deviceinfo.Info{ID: "desk-9b21", Admin: true, Trash: true, DeleteCap: 10}
	return e, local, primary, ob
}

func pending(t *testing.T, ob *outbox.Store) []outbox.Op {
	t.Helper()
	ops, err := ob.List(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// An admin deletes a drawer id that exists nowhere (a typo, or deleted
// already): neither the local palace nor the primary, which is up and
// asked, holds it. The answer must be MemPalace's "Drawer not found", and
// nothing queued or hidden. Before, it answered success "deleted on the
// primary", and the queued delete was refused there for ever (outside
// tester, attack5 08).
func TestAnAdminDeleteOfADrawerThatExistsNowhereSaysNotFound(t *testing.T) {
	t.Parallel()
	e, _, _, ob := adminRouter(t)
	const id = "drawer_shared_n_00000000000000000000000"
	m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	if m["success"] != false || !strings.HasPrefix(fmt.Sprint(m["error"]), "Drawer not found") || strings.Contains(fmt.Sprint(m), "deleted on the primary") {
		t.Errorf("an admin's delete of a drawer that exists nowhere is answered %s, want success false, Drawer not found", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("a delete of a drawer that exists nowhere is queued for the primary: %+v", ops)
	}
	if ts, _ := ob.Tombstones(context.Background()); len(ts) != 0 {
		t.Errorf("a delete of a drawer that exists nowhere left tombstones: %+v", ts)
	}
}

// The primary holds the drawer (another device wrote it): the delete is
// queued and the answer says it is deleted on the primary, as before.
func TestAnAdminDeleteOfAPrimaryOnlyDrawerIsQueued(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := adminRouter(t)
	id := sharedDrawer(t, primary, "shared", "written by another device")
	m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	if m["success"] != true || !strings.Contains(fmt.Sprint(m["message"]), "queued to be deleted on the primary") {
		t.Errorf("an admin's delete of a drawer only the primary holds is answered %s", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 1 || ops[0].Tool != "mempalace_delete_drawer" {
		t.Errorf("queued: %+v", ops)
	}
}

// blind is a primary that is up but cannot answer the edge's look-up of
// the drawer (get_drawer): whether it holds it is not known.
type blind struct{ inProcessPrimary }

func (s blind) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	if p.Name == "mempalace_get_drawer" {
		return nil, errors.New("the answer was cut off")
	}
	return s.inProcessPrimary.Call(ctx, p, retry)
}

// The primary cannot say whether it holds the drawer: the delete is
// queued for it, and the answer says so, never that it was deleted there.
func TestAnAdminDeleteThePrimaryCannotConfirmSaysQueued(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := adminRouter(t)
	e.remote = blind{inProcessPrimary{primary}}
	const id = "drawer_shared_n_00000000000000000000001"
	m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	msg := fmt.Sprint(m["message"])
	if m["success"] == true || strings.Contains(msg, "deleted on the primary") || !strings.Contains(msg, "queued") || !strings.Contains(msg, "may not hold") {
		t.Errorf("an admin's delete the primary could not confirm is answered %s, want it queued for a primary that may not hold it", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 1 {
		t.Errorf("queued: %+v", ops)
	}
}

// The same through a real gateway, whose answer to the edge's look-up of
// an id that exists nowhere is -31003 "the target is not visible to this
// device" (it answers missing and unreadable alike): for the device, the
// drawer is not there. Before, the edge took that answer for a primary it
// could not ask, and queued and hid the delete (an outside tester,
// attack6 11).
func TestAnAdminDeleteOfADrawerThatExistsNowhereThroughAGateway(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "ops-0001", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["ops-0001"]})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.Admin })
	const id = "drawer_shared_n_00000000000000000000000"
	m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if m["success"] != false || !strings.HasPrefix(fmt.Sprint(m["error"]), "Drawer not found") || strings.Contains(fmt.Sprint(m), "queued") {
		t.Errorf("an admin's delete of a drawer that exists nowhere is answered %s, want success false, Drawer not found, nothing queued", mustJSON(m))
	}
	if ops := pending(t, h.edge.outbox); len(ops) != 0 {
		t.Errorf("a delete of a drawer that exists nowhere is queued for the primary: %+v", ops)
	}
	if ts, _ := h.edge.outbox.Tombstones(context.Background()); len(ts) != 0 {
		t.Errorf("a delete of a drawer that exists nowhere left tombstones: %+v", ts)
	}
}

// bulkItem is the item of a delete_drawers answer for id.
func bulkItem(t *testing.T, m map[string]any, id string) map[string]any {
	t.Helper()
	items, _ := m["results"].([]any)
	for _, x := range items {
		if it, _ := x.(map[string]any); it["drawer_id"] == id {
			return it
		}
	}
	t.Fatalf("no item for %s in %s", id, mustJSON(m))
	return nil
}

// An admin's delete_drawers of one drawer of its own and one only the
// primary holds (the ids edge status advises for a re-filed source, whose
// deleted drawers are gone locally): both are deleted, one here and one on
// the primary, where the delete is queued. Before, the answer said
// "deleted 1, errors 1, Drawer not found" for a delete that took effect
// (an outside tester, attack11), and an agent would try it again.
func TestAnAdminBulkDeleteOfAPrimaryOnlyDrawerSaysItIsQueued(t *testing.T) {
	t.Parallel()
	e, local, primary, ob := adminRouter(t)
	mine := sharedDrawer(t, local, "shared", "written here")
	theirs := sharedDrawer(t, primary, "shared", "written by another device")
	m := routed(t, e, "mempalace_delete_drawers", map[string]any{"drawer_ids": []any{mine, theirs}})
	it := bulkItem(t, m, theirs)
	if it["error"] != nil || !strings.Contains(fmt.Sprint(it["message"]), "queued to be deleted on the primary") || fmt.Sprint(m["errors"]) != "0" || fmt.Sprint(m["deleted"]) != "2" {
		t.Errorf("an admin's delete_drawers of a drawer only the primary holds is answered %s, want it deleted on the primary (queued), errors 0", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 1 || ops[0].Tool != "mempalace_delete_drawers" {
		t.Errorf("queued: %+v", ops)
	}
}

// The primary cannot say whether it holds the drawer: its item keeps the
// local palace's error and says the delete is queued for a primary that
// may not hold it.
func TestAnAdminBulkDeleteThePrimaryCannotConfirmSaysQueued(t *testing.T) {
	t.Parallel()
	e, local, primary, ob := adminRouter(t)
	e.remote = blind{inProcessPrimary{primary}}
	mine := sharedDrawer(t, local, "shared", "written here")
	const unknown = "drawer_shared_n_00000000000000000000001"
	m := routed(t, e, "mempalace_delete_drawers", map[string]any{"drawer_ids": []any{mine, unknown}})
	it := bulkItem(t, m, unknown)
	msg := fmt.Sprint(it["message"])
	if !strings.HasPrefix(fmt.Sprint(it["error"]), "Drawer not found") || !strings.Contains(msg, "queued") || !strings.Contains(msg, "may not hold") {
		t.Errorf("an admin's delete_drawers the primary could not confirm is answered %s, want its item queued for a primary that may not hold it", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 1 {
		t.Errorf("queued: %+v", ops)
	}
}

// Every id exists nowhere, the primary up and asked: MemPalace's answer,
// nothing queued or hidden, as for delete_drawer.
func TestAnAdminBulkDeleteOfDrawersThatExistNowhereQueuesNothing(t *testing.T) {
	t.Parallel()
	e, _, _, ob := adminRouter(t)
	ids := []any{"drawer_shared_n_00000000000000000000000", "drawer_shared_n_00000000000000000000002"}
	m := routed(t, e, "mempalace_delete_drawers", map[string]any{"drawer_ids": ids})
	if fmt.Sprint(m["errors"]) != "2" || strings.Contains(mustJSON(m), "queued") {
		t.Errorf("an admin's delete_drawers of drawers that exist nowhere is answered %s, want errors 2, nothing queued", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("a delete of drawers that exist nowhere is queued for the primary: %+v", ops)
	}
	if ts, _ := ob.Tombstones(context.Background()); len(ts) != 0 {
		t.Errorf("a delete of drawers that exist nowhere left tombstones: %+v", ts)
	}
}

// A narrow admin's delete_drawers names one drawer the primary holds and
// one it does not show (in a wing this device may not read, which a
// gateway answers "not visible", or nowhere): the one found is queued
// alone, the other neither queued nor hidden, and its item says so
// (attack104 F2). Before, the whole batch was queued, the gateway refused
// it (-31003) until it was dead, and the drawer found was never deleted
// on the primary, though the answer said it was queued.
func TestAnAdminBulkDeleteLeavesOutTheIdsFoundNowhere(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := adminRouter(t)
	theirs := sharedDrawer(t, primary, "wing_nar", "nar wing: the router admin page is at port 8443")
	const unseen = "drawer_shared_ops_d37879e9d093f0bcd4aa81ef"
	m := routed(t, e, "mempalace_delete_drawers", map[string]any{"drawer_ids": []any{theirs, unseen}})
	if it := bulkItem(t, m, theirs); !strings.Contains(fmt.Sprint(it["message"]), "queued to be deleted on the primary") {
		t.Errorf("the item of the drawer the primary holds: %s", mustJSON(it))
	}
	if it := bulkItem(t, m, unseen); !strings.HasPrefix(fmt.Sprint(it["error"]), "Drawer not found") || !strings.Contains(fmt.Sprint(it["message"]), "nothing queued or hidden") {
		t.Errorf("the item of the drawer found nowhere: %s (want Drawer not found, nothing queued or hidden)", mustJSON(it))
	}
	ops := pending(t, ob)
	if len(ops) != 1 || strings.Contains(string(ops[0].Payload), unseen) || !strings.Contains(string(ops[0].Payload), theirs) {
		t.Fatalf("queued: %+v (want one delete_drawers of %s alone)", ops, theirs)
	}
	ts, _ := ob.Tombstones(context.Background())
	for _, tb := range ts {
		if tb.Key == unseen {
			t.Errorf("the drawer found nowhere is hidden: %+v", tb)
		}
	}
	if len(ts) != 1 {
		t.Errorf("tombstones: %+v (want the one of %s)", ts, theirs)
	}
}

// The same through a real gateway, for a narrow admin (admin, wing_nar
// only) naming a drawer of its wing and one of a wing it may not read:
// the drawer of its wing is deleted on the primary, the other stays
// there, and nothing is left dead in the outbox (attack104 F2).
func TestANarrowAdminsBulkDeleteThroughAGatewayDeletesWhatItSees(t *testing.T) {
	t.Parallel()
	pl, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "nar-0003", Label: "edge-test", Read: []string{"wing_nar"}, Write: []string{"wing_nar"}, KG: "write", Admin: true, Agents: []string{"opencode@edge-test"}})
	mine := sharedDrawer(t, &inProcess{pl: pl}, "wing_nar", "nar wing: the router admin page is at port 8443")
	unseen := sharedDrawer(t, &inProcess{pl: pl}, "shared", "a shared drawer nar may not read")
	h := start(t, harnessOpts{primaryURL: url, token: tokens["nar-0003"]})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.Admin })
	m, _ := h.call("delete_drawers", map[string]any{"drawer_ids": []any{mine, unseen}})
	if fmt.Sprint(m["deleted"]) != "1" || fmt.Sprint(m["errors"]) != "1" {
		t.Errorf("the narrow admin's delete_drawers is answered %s, want deleted 1 (queued), errors 1", mustJSON(m))
	}
	h.eventually("the drawer of its wing deleted on the primary", func() bool { return pl.Dump().Drawers[mine] == nil })
	if pl.Dump().Drawers[unseen] == nil {
		t.Errorf("the drawer nar may not read was deleted on the primary")
	}
	for _, o := range pending(t, h.edge.outbox) {
		if o.State == outbox.Dead {
			t.Errorf("a dead op: %+v", o)
		}
	}
}

// A narrow admin's delete_by_source (a tool the gateway takes only from
// an admin that reads and writes every wing) is not sent, and the answer
// says why and to delete the drawers by id; the primary keeps them.
// Before, it was answered queued, refused -31003 until dead, and the
// drawers stayed on the primary (attack104 F2's check of delete_by_source).
func TestANarrowAdminsDeleteBySourceIsNotSent(t *testing.T) {
	t.Parallel()
	pl, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "nar-0003", Label: "edge-test", Read: []string{"wing_nar"}, Write: []string{"wing_nar"}, KG: "write", Admin: true, Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["nar-0003"]})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.Admin })
	id, _ := h.call("add_drawer", map[string]any{"wing": "wing_nar", "room": "r", "content": "nar note", "source_file": "/w/notes.md"})
	h.eventually("the drawer on the primary", func() bool { return pl.Dump().Drawers[fmt.Sprint(id["drawer_id"])] != nil })
	m, _ := h.call("delete_by_source", map[string]any{"source_file": "/w/notes.md", "dry_run": false})
	if r := fmt.Sprint(edgeOf(m)["replication"]); !strings.HasPrefix(r, "local only") || !strings.Contains(r, "delete_drawers") {
		t.Errorf("a narrow admin's delete_by_source is answered %s, want local only, saying to delete by id", mustJSON(m))
	}
	for _, o := range pending(t, h.edge.outbox) {
		if o.Tool == "mempalace_delete_by_source" {
			t.Errorf("queued: %+v", o)
		}
	}
}
