package gateway

import (
	"context"
	"testing"

	"github.com/joakimp/devbox-config/gateway/trash"
)

// A delete the primary made but the trash holds pending (the gateway
// stopped before recording the answer) or unconfirmed (the answer was
// lost) stays made: a join's replay of the drawer or diary entry it
// removed is refused, as for a delete the primary confirmed (before, only
// state deleted refused it, and a join of an older copy filed a deleted
// secret again; attack87 F2). A drawer such a delete did not remove is
// still on the primary, and a join's write of it is made (MemPalace finds
// it there): refusing nothing it lacks.
func TestJoinDoesNotRefileWhatAnUndecidedDeleteRemoved(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []trash.State{trash.StatePending, trash.StateUnconfirmed} {
		drawer := map[string]any{"wing": "shared", "room": "notes", "content": "db root pw is swordfish, " + state.String()}
		diary := map[string]any{"agent_name": "pi", "entry": "the vpn psk is octopus, " + state.String(), "topic": "ci"}
		id := g.mustResult(t, desk, "add_drawer", drawer)["drawer_id"].(string)
		entry := g.mustResult(t, desk, "diary_write", diary)["entry_id"].(string)
		for _, x := range []string{id, entry} {
			g.mustResult(t, admin, "delete_drawer", map[string]any{"drawer_id": x})
			if err := bin.Settle(context.Background(), g.deleteOf(t, x), state, "", nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, rpc := g.joined(t, desk, "add_drawer", drawer); rpc == nil {
			t.Errorf("%s: a join's add of the drawer the delete removed was made", state)
		}
		if _, rpc := g.joined(t, desk, "diary_write", diary); rpc == nil {
			t.Errorf("%s: a join's diary_write of the entry the delete removed was made", state)
		}
		if got, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != nil {
			t.Errorf("%s: the drawer is back: %v", state, got)
		}
		if r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
			t.Errorf("%s: the entry is back: %v", state, r)
		}
	}
	// Kept, never removed (the gateway stopped before forwarding it): the
	// drawer is on the primary, and a join's add of it is made.
	kept := map[string]any{"wing": "shared", "room": "notes", "content": "a delete that never left"}
	id := g.mustResult(t, desk, "add_drawer", kept)["drawer_id"].(string)
	if _, err := bin.Keep(context.Background(), trash.Delete{Device: "admin-0001", Tool: "delete_drawer", Drawers: []trash.Drawer{{ID: id, Wing: "shared", Room: "notes", Content: "a delete that never left", Kind: trash.KindFiled}}}); err != nil {
		t.Fatal(err)
	}
	if res, rpc := g.joined(t, desk, "add_drawer", kept); rpc != nil || res["success"] != true {
		t.Fatalf("a join's add of a drawer a pending delete did not remove: %v %v", res, rpc)
	}
}

// mustResult calls tool and fails the test unless it succeeded.
func (g *gw) mustResult(t *testing.T, token, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, rpc, _ := g.call(token, tool, args)
	if rpc != nil || res == nil || res["success"] != true {
		t.Fatalf("%s: %v %v", tool, res, rpc)
	}
	return res
}

// Against real MemPalace 3.11.0 (the primary attack87 F2 ran): a delete
// the primary made, held unconfirmed or pending, stops a join's replay of
// the drawer and of the diary entry; a drawer a pending delete did not
// remove is on the primary, and a join's write of it is made.
func TestRealJoinDoesNotRefileWhatAnUndecidedDeleteRemoved(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, deleters, u)
	ops := g.tokens["ops-0001"]
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []trash.State{trash.StatePending, trash.StateUnconfirmed} {
		drawer := map[string]any{"wing": "proj_a", "room": "pend", "content": "Pending-delete secret: db root pw is swordfish, " + state.String()}
		diary := map[string]any{"agent_name": "pi", "entry": "Diary secret: the vpn psk is octopus, " + state.String(), "topic": "ci", "wing": "wing_pi"}
		id := srv.MustCall(t, "mempalace_add_drawer", drawer)["drawer_id"].(string)
		entry := srv.MustCall(t, "mempalace_diary_write", diary)["entry_id"].(string)
		for _, x := range []string{id, entry} {
			g.mustResult(t, ops, "delete_drawer", map[string]any{"drawer_id": x})
			if err := bin.Settle(context.Background(), g.deleteOf(t, x), state, "", nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, rpc := g.joined(t, ops, "add_drawer", drawer); rpc == nil {
			t.Errorf("%s: a join's add of the drawer the delete removed was made", state)
		}
		if _, rpc := g.joined(t, ops, "diary_write", diary); rpc == nil {
			t.Errorf("%s: a join's diary_write of the entry the delete removed was made", state)
		}
		if got, _ := srv.Call("mempalace_get_drawer", map[string]any{"drawer_id": id}); got["error"] == nil {
			t.Errorf("%s: the drawer is back: %v", state, got)
		}
	}
	if r := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
		t.Errorf("an entry is back: %v", r)
	}
	kept := map[string]any{"wing": "proj_a", "room": "pend", "content": "a delete that never left"}
	id := srv.MustCall(t, "mempalace_add_drawer", kept)["drawer_id"].(string)
	if _, err := bin.Keep(context.Background(), trash.Delete{Device: "ops-0001", Tool: "delete_drawer", Drawers: []trash.Drawer{{ID: id, Wing: "proj_a", Room: "pend", Content: "a delete that never left", Kind: trash.KindFiled}}}); err != nil {
		t.Fatal(err)
	}
	if res, rpc := g.joined(t, ops, "add_drawer", kept); rpc != nil || res["success"] != true {
		t.Fatalf("a join's add of a drawer a pending delete did not remove: %v %v", res, rpc)
	}
}
