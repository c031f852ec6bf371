package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/origin"
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

// A delete the trash holds pending or unconfirmed that the primary never
// made (its entry still there) counts as nothing: a join's second copy of
// an equal diary entry (the next day's "Standup: all green.") is made,
// where it was refused as deleted on the primary, an entry nobody deleted
// (attack89 F1). Deleted again, the entry counts once, not once per
// delete that kept it: of a third day's three copies, the one the delete
// removed is refused and the other sent.
func TestJoinSendsAnEqualEntryADeleteNeverMadeLeft(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	for _, state := range []trash.State{trash.StatePending, trash.StateUnconfirmed} {
		diary := map[string]any{"agent_name": "pi", "entry": "Standup: all green, " + state.String(), "topic": "standup"}
		copyN := func(n int) map[string]any { return map[string]any{origin.JoinKey: true, origin.JoinCopyKey: n} }
		first := g.mustResult(t, desk, "diary_write", diary)["entry_id"].(string)
		p, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": first})
		g.keepUnmade(t, keptDrawer("delete_drawer", p, ""), state)
		// Two copies in the join's palace, one on the primary: the second
		// is the first copy the primary lacks.
		if _, rpc := g.withMeta(t, desk, "diary_write", diary, copyN(1)); rpc != nil {
			t.Errorf("%s: a join's second equal entry, the first never deleted: %v", state, rpc)
		}
		g.mustResult(t, admin, "delete_drawer", map[string]any{"drawer_id": first})
		// Three copies, one on the primary: of the two it lacks, one the
		// delete made again removed.
		if _, rpc := g.withMeta(t, desk, "diary_write", diary, copyN(1)); rpc == nil {
			t.Errorf("%s: a join filed again the entry a delete removed", state)
		}
		if _, rpc := g.withMeta(t, desk, "diary_write", diary, copyN(2)); rpc != nil {
			t.Errorf("%s: one entry kept by two deletes counted as two: %v", state, rpc)
		}
		if n := g.entriesWith(t, desk, diary["entry"].(string)); n != 2 {
			t.Errorf("%s: the primary holds %d copies, want 2 (the second and third days')", state, n)
		}
	}
}

// keepUnmade keeps dr in the trash as a delete_drawer the primary never
// made, settled state (the gateway stopped before forwarding it, or its
// answer lost in a proxy that did not pass it on).
func (g *gw) keepUnmade(t *testing.T, dr trash.Drawer, state trash.State) {
	t.Helper()
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	id, err := bin.Keep(context.Background(), trash.Delete{Device: "admin-0001", Tool: "delete_drawer", Drawers: []trash.Drawer{dr}})
	if err == nil {
		err = bin.Settle(context.Background(), id, state, "", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// entriesWith counts agent pi's diary entries holding text.
func (g *gw) entriesWith(t *testing.T, token, text string) (n int) {
	t.Helper()
	r, _, _ := g.call(token, "diary_read", map[string]any{"agent_name": "pi", "last_n": 100})
	es, ok := r["entries"].([]any)
	if !ok {
		t.Fatalf("diary_read: %v", r)
	}
	for _, e := range es {
		if e.(map[string]any)["content"] == text {
			n++
		}
	}
	return n
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
	// attack89 F1: an unconfirmed delete the primary never got counts as
	// nothing, and deleted again, its entry counts once.
	standup := map[string]any{"agent_name": "pi", "entry": "Standup: all green.", "topic": "standup", "wing": "wing_pi"}
	first := srv.MustCall(t, "mempalace_diary_write", standup)["entry_id"].(string)
	g.keepUnmade(t, keptDrawer("delete_drawer", srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": first}), ""), trash.StateUnconfirmed)
	copyN := func(n int) map[string]any { return map[string]any{origin.JoinKey: true, origin.JoinCopyKey: n} }
	if _, rpc := g.withMeta(t, ops, "diary_write", standup, copyN(1)); rpc != nil {
		t.Errorf("a join's second equal entry, the first never deleted: %v", rpc)
	}
	g.mustResult(t, ops, "delete_drawer", map[string]any{"drawer_id": first})
	if _, rpc := g.withMeta(t, ops, "diary_write", standup, copyN(1)); rpc == nil {
		t.Error("a join filed again the entry a delete removed")
	}
	if _, rpc := g.withMeta(t, ops, "diary_write", standup, copyN(2)); rpc != nil {
		t.Errorf("one entry kept by two deletes counted as two: %v", rpc)
	}
	n := 0
	for _, e := range srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "pi", "last_n": 100})["entries"].([]any) {
		if e.(map[string]any)["content"] == standup["entry"] {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the primary holds %d copies of the standup, want 2", n)
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

// `trash restore` of a diary entry's delete the primary never made (kept
// pending for good or unconfirmed, the entry still there) writes nothing: before,
// it wrote a second copy beside the entry. The trash records the entry as
// restored, as itself, so a join's equal entry is sent.
func TestRestoreOfADiaryDeleteNeverMadeWritesNothing(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	for _, state := range []trash.State{trash.StatePending, trash.StateUnconfirmed} {
		diary := map[string]any{"agent_name": "pi", "entry": "Standup: all green, " + state.String(), "topic": "standup"}
		entry := g.mustResult(t, desk, "diary_write", diary)["entry_id"].(string)
		p, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": entry})
		g.keepUnmade(t, keptDrawer("delete_drawer", p, ""), state)
		g.advance(writeBound + time.Minute) // pending or unconfirmed for good (never made): a recent one may be in flight
		rs, err := g.restorer(t).Restore(context.Background(), []string{entry})
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: restore: %+v %v", state, rs, err)
		}
		if rs[0].Err != nil || !rs[0].Already || rs[0].As != entry {
			t.Fatalf("%s: restore: as %s, already %v (want %s, true): %v", state, rs[0].As, rs[0].Already, entry, rs[0].Err)
		}
		if n := g.entriesWith(t, desk, diary["entry"].(string)); n != 1 {
			t.Errorf("%s: the primary holds %d copies after the restore, want 1", state, n)
		}
		if d := g.kept(t)[0].Drawers[0]; d.RestoredAt == nil || d.RestoredAs != entry || d.RestoringAt != nil {
			t.Errorf("%s: the trash's record: %+v", state, d)
		}
		if _, rpc := g.withMeta(t, desk, "diary_write", diary, map[string]any{origin.JoinKey: true, origin.JoinCopyKey: 1}); rpc != nil {
			t.Errorf("%s: a join's second equal entry after the restore: %v", state, rpc)
		}
	}
}
