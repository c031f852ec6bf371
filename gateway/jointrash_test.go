package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/trash"
)

// joined sends a write as a join's replay (params._meta[origin.JoinKey]);
// it returns the result text decoded, or the JSON-RPC error.
func (g *gw) joined(t *testing.T, token, tool string, args map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	return g.withMeta(t, token, tool, args, map[string]any{origin.JoinKey: true})
}

// withMeta sends a write with params._meta as given; it returns the
// result text decoded, or the JSON-RPC error.
func (g *gw) withMeta(t *testing.T, token, tool string, args, meta map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args, "_meta": meta}})
	_, m := g.post(token, string(b))
	if e := rpcError(m); e != nil {
		return nil, e
	}
	return resultOf(encodeJSON(m)), nil
}

// wantTrashed checks a join's write refused because the trash holds what
// it would file again as deleted by delete n, naming the fix.
func wantTrashed(t *testing.T, what string, rpc map[string]any, n int64, id string) {
	t.Helper()
	data, _ := rpc["data"].(map[string]any)
	msg, _ := rpc["message"].(string)
	if rpc == nil || rpc["code"] != float64(ledger.CodeDeletedOnPrimary) || data["rule"] != ruleJoinDeleted.String() ||
		!strings.Contains(msg, fmt.Sprintf("gateway trash restore %d", n)) || !strings.Contains(msg, id) {
		t.Fatalf("%s: want the join's write refused (code %d, rule %q) naming delete %d and %s: %v", what, ledger.CodeDeletedOnPrimary, ruleJoinDeleted, n, id, rpc)
	}
}

// wantTold checks a join's write of a non-admin device refused as deleted
// on the primary, saying the operator can restore it and nothing of the
// trash's entry: not its number, when, by what or by whom (the trash is
// the operator's; attack17 n3).
func wantTold(t *testing.T, what string, rpc map[string]any, deleter string) {
	t.Helper()
	data, _ := rpc["data"].(map[string]any)
	msg, _ := rpc["message"].(string)
	if rpc == nil || rpc["code"] != float64(ledger.CodeDeletedOnPrimary) || data["rule"] != ruleJoinDeleted.String() {
		t.Fatalf("%s: want the join's write refused (code %d, rule %q): %v", what, ledger.CodeDeletedOnPrimary, ruleJoinDeleted, rpc)
	}
	if !strings.Contains(msg, "deleted on the primary") || !strings.Contains(msg, "operator") {
		t.Errorf("%s: the refusal does not say it was deleted on the primary and the operator can restore it: %s", what, msg)
	}
	for _, secret := range []string{"restore 1", "delete 1", deleter, "delete_drawer", "2026-"} {
		if strings.Contains(msg, secret) {
			t.Errorf("%s: a non-admin device's refusal tells the trash's entry (%q): %s", what, secret, msg)
		}
	}
}

// A join's replay of a drawer an admin deleted on the primary is refused:
// the trash holds it as deleted, and the message says how to have it back.
// The same write from a live edge goes through from any device but the
// drawer's writer; after a restore, or once filed again, the join's write is
// accepted (MemPalace finds it there).
func TestJoinDoesNotRefileWhatTheTrashHolds(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	args := map[string]any{"wing": "shared", "room": "notes", "content": "a note the admin deleted"}
	a, _, _ := g.call(desk, "add_drawer", args)
	id := a["drawer_id"].(string)
	g.advance(time.Second)
	if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's delete: %v %v", res, rpc)
	}
	n := g.kept(t)[0].ID

	_, rpc := g.joined(t, desk, "add_drawer", args)
	wantTold(t, "a non-admin join's add of the deleted drawer", rpc, "admin-0001")
	_, rpc = g.joined(t, admin, "add_drawer", args)
	wantTrashed(t, "an admin's join's add of the deleted drawer", rpc, n, id)
	if got, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != nil {
		t.Fatalf("the join's refused add filed the drawer again: %v", got)
	}
	if e := g.auditLog(); e[len(e)-3].Rule != ruleJoinDeleted || e[len(e)-3].Decision != VerdictDeny {
		t.Errorf("the non-admin's refusal's audit line: %+v", e[len(e)-3])
	}
	if e := g.auditLog(); e[len(e)-2].Rule != ruleJoinDeleted || e[len(e)-2].Decision != VerdictDeny {
		t.Errorf("the refusal's audit line: %+v", e[len(e)-2])
	}

	if rs, err := g.restorer(t).Restore(context.Background(), []string{id}); err != nil || rs[0].Err != nil {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	if res, rpc := g.joined(t, desk, "add_drawer", args); rpc != nil || res["success"] != true {
		t.Fatalf("a join's add after the restore: %v %v", res, rpc)
	}

	// Deleted again: the writer's live write does not file it again
	// (writerStep), another device's does, and a join's write after that
	// finds it there.
	g.advance(time.Second)
	g.call(admin, "delete_drawer", map[string]any{"drawer_id": id})
	g.advance(time.Second)
	if _, rpc := g.joined(t, desk, "add_drawer", args); rpc == nil {
		t.Fatal("a join's add after the second delete went through")
	}
	if _, rpc, _ := g.call(desk, "add_drawer", args); rpc == nil || rpc["code"] != float64(ledger.CodeDeletedOnPrimary) {
		t.Fatalf("the writer's live add of the same content: %v", rpc)
	}
	if res, rpc, _ := g.call(g.tokens["laptop-7f3a"], "add_drawer", args); rpc != nil || res["success"] != true || res["drawer_id"] != id {
		t.Fatalf("another device's live add of the same content: %v %v", res, rpc)
	}
	if res, rpc := g.joined(t, desk, "add_drawer", args); rpc != nil || res["success"] != true {
		t.Fatalf("a join's add of a drawer filed again since its delete: %v %v", res, rpc)
	}

	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_add_drawer", "arguments": args, "_meta": map[string]any{origin.JoinKey: "yes"}}})
	if _, m := g.post(desk, string(b)); rpcError(m)["code"] != -32602.0 {
		t.Fatalf("a join mark that is not true: %v", m)
	}
}

// A join's replay of a diary entry an admin deleted on the primary is
// refused alike (the trash holds its agent, wing and text); a live
// diary_write of the same text is a new entry and goes through.
func TestJoinDoesNotRewriteADeletedDiaryEntry(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	args := map[string]any{"agent_name": "pi", "entry": "found the flaky test", "topic": "ci"}
	w, _, _ := g.call(desk, "diary_write", args)
	entry := w["entry_id"].(string)
	g.call(admin, "delete_drawer", map[string]any{"drawer_id": entry})
	n := g.kept(t)[0].ID

	_, rpc := g.joined(t, desk, "diary_write", args)
	wantTold(t, "a non-admin join's diary_write of the deleted entry", rpc, "admin-0001")
	// Its text as "content", 3.11's alias of "entry", is the same entry
	// (attack44 F5: the trash was not asked).
	_, rpc = g.joined(t, desk, "diary_write", map[string]any{"agent_name": "pi", "content": "found the flaky test", "topic": "ci"})
	wantTold(t, "a join's diary_write of the deleted entry as content", rpc, "admin-0001")
	// MemPalace lower-cases the agent (and the wing it gives): "Pi" writes
	// pi's entry again (attack46 N7: it was filed again).
	_, rpc = g.joined(t, desk, "diary_write", map[string]any{"agent_name": "Pi", "entry": "found the flaky test", "topic": "ci"})
	wantTold(t, "a join's diary_write of the deleted entry by a case variant of its agent", rpc, "admin-0001")
	if del := g.deleteOf(t, entry); del != n {
		t.Fatalf("the trash's delete of %s is %d, want %d", entry, del, n)
	}
	if r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
		t.Fatalf("the join's refused write wrote the entry again: %v", r)
	}
	if res, rpc := g.joined(t, desk, "diary_write", map[string]any{"agent_name": "pi", "entry": "another entry", "topic": "ci"}); rpc != nil || res["success"] != true {
		t.Fatalf("a join's diary_write of another text: %v %v", res, rpc)
	}
	if res, rpc, _ := g.call(desk, "diary_write", args); rpc != nil || res["success"] != true {
		t.Fatalf("a live diary_write of the same text: %v %v", res, rpc)
	}
}

// Against real MemPalace 3.11.0: a join's replay of a drawer and of a
// diary entry an admin deleted through the gateway is refused (the trash
// holds them as the real server reported them: the entry by its agent,
// wing and text), nothing is filed; a live write of the drawer goes
// through; after a restore of the entry the join's write is made.
func TestRealJoinDoesNotRefileWhatTheTrashHolds(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, deleters, u)
	ops := g.tokens["ops-0001"]
	drawer := map[string]any{"wing": "shared", "room": "runbooks", "content": "rotate the staging keys every quarter"}
	diary := map[string]any{"agent_name": "pi", "entry": "bisected the flaky test to the clock", "topic": "ci", "wing": "wing_pi"}
	id := srv.MustCall(t, "mempalace_add_drawer", drawer)["drawer_id"].(string)
	entry := srv.MustCall(t, "mempalace_diary_write", diary)["entry_id"].(string)
	for _, x := range []string{id, entry} {
		if res, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": x}); rpc != nil || res["success"] != true {
			t.Fatalf("delete_drawer %s: %v %v", x, res, rpc)
		}
	}
	ds := g.kept(t) // newest first: the entry's delete, then the drawer's
	_, rpc := g.joined(t, ops, "add_drawer", drawer)
	wantTrashed(t, "a join's add_drawer", rpc, ds[1].ID, id)
	_, rpc = g.joined(t, ops, "diary_write", diary)
	wantTrashed(t, "a join's diary_write", rpc, ds[0].ID, entry)
	_, rpc = g.joined(t, ops, "diary_write", map[string]any{"agent_name": "pi", "content": diary["entry"], "topic": "ci", "wing": "wing_pi"})
	wantTrashed(t, "a join's diary_write of its text as content", rpc, ds[0].ID, entry)
	_, rpc = g.joined(t, ops, "diary_write", map[string]any{"agent_name": "PI", "entry": diary["entry"], "topic": "ci", "wing": "wing_pi"})
	wantTrashed(t, "a join's diary_write by a case variant of its agent", rpc, ds[0].ID, entry)
	if got, _ := srv.Call("mempalace_get_drawer", map[string]any{"drawer_id": id}); got["error"] == nil {
		t.Fatalf("the refused join filed the drawer: %v", got)
	}
	if r := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
		t.Fatalf("the refused join wrote the entry: %v", r)
	}
	if res, rpc, _ := g.call(ops, "add_drawer", drawer); rpc != nil || res["success"] != true || res["drawer_id"] != id {
		t.Fatalf("a live add_drawer of the deleted drawer: %v %v", res, rpc)
	}
	if rs, err := g.restorer(t).Restore(context.Background(), []string{entry}); err != nil || rs[0].Err != nil {
		t.Fatalf("restore of the entry: %+v %v", rs, err)
	}
	if res, rpc := g.joined(t, ops, "diary_write", diary); rpc != nil || res["success"] != true {
		t.Fatalf("a join's diary_write after the restore: %v %v", res, rpc)
	}
}

// deleteOf is the number of the trash's delete_drawer that removed id.
func (g *gw) deleteOf(t *testing.T, id string) int64 {
	t.Helper()
	for _, d := range g.kept(t) {
		if d.Tool == "delete_drawer" && len(d.Drawers) > 0 && d.Drawers[0].ID == id {
			return d.ID
		}
	}
	t.Fatalf("the trash holds no delete of %s", id)
	return 0
}

// A drawer updated after it was filed keeps its first id (MemPalace's
// update_drawer), so a join's add of its current content names another
// id than the one the trash holds it under. The join names its local id
// (params._meta[origin.JoinDrawerKey]) and the gateway checks the trash by
// that id too: an admin's delete of the updated drawer, or of its first
// version while the device edited it offline, is not undone (attack17
// n1). The id is honoured in the add's own wing alone, the mark must come
// with it, and it must be an id.
func TestJoinDoesNotRefileAnUpdatedDrawerTheTrashHolds(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	file := func(content, update string) string {
		t.Helper()
		a, _, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": content})
		id := a["drawer_id"].(string)
		if update != "" {
			if res, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": update}); rpc != nil || res["success"] != true {
				t.Fatalf("update_drawer: %v %v", res, rpc)
			}
		}
		g.advance(time.Second)
		if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
			t.Fatalf("the admin's delete: %v %v", res, rpc)
		}
		return id
	}
	updated := file("first draft", "the rewritten text the admin removed")
	offline := file("a note deleted while the device edited it", "")
	local := func(id string) map[string]any {
		return map[string]any{origin.JoinKey: true, origin.JoinDrawerKey: id}
	}
	for _, c := range []struct{ id, content string }{{updated, "the rewritten text the admin removed"}, {offline, "the device's offline edit"}} {
		args := map[string]any{"wing": "shared", "room": "notes", "content": c.content}
		_, rpc := g.withMeta(t, desk, "add_drawer", args, local(c.id))
		wantTold(t, "a non-admin join's add of "+c.id, rpc, "admin-0001")
		_, rpc = g.withMeta(t, admin, "add_drawer", args, local(c.id))
		wantTrashed(t, "an admin's join's add of "+c.id, rpc, g.deleteOf(t, c.id), c.id)
	}
	if st := g.primary.Dump(); len(st.Drawers) != 0 {
		t.Fatalf("the refused joins filed %d drawers", len(st.Drawers))
	}

	// The local id of a drawer deleted in another wing is no reason: the
	// add is made (the trash says nothing of other wings).
	elsewhere := map[string]any{"wing": "wing_pi", "room": "notes", "content": "the rewritten text the admin removed"}
	if res, rpc := g.withMeta(t, desk, "add_drawer", elsewhere, local(updated)); rpc != nil || res["success"] != true {
		t.Fatalf("a join's add naming a drawer deleted in another wing: %v %v", res, rpc)
	}
	for name, meta := range map[string]map[string]any{
		"a local id without the join mark": {origin.JoinDrawerKey: updated},
		"a local id that is not a string":  {origin.JoinKey: true, origin.JoinDrawerKey: 7},
		"an empty local id":                {origin.JoinKey: true, origin.JoinDrawerKey: ""},
	} {
		if _, rpc := g.withMeta(t, desk, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "x " + name}, meta); rpc["code"] != -32602.0 {
			t.Errorf("%s: want -32602, got %v", name, rpc)
		}
	}
	if _, rpc := g.withMeta(t, desk, "diary_write", map[string]any{"agent_name": "pi", "entry": "e"}, local(updated)); rpc["code"] != -32602.0 {
		t.Errorf("a local drawer id on a diary_write: want -32602, got %v", rpc)
	}
}

// Against real MemPalace 3.11.0: a drawer filed, updated (its id stays)
// and deleted through the gateway is not filed again by a join's add of
// its current content that names its local id.
func TestRealJoinDoesNotRefileAnUpdatedDrawer(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, deleters, u)
	ops := g.tokens["ops-0001"]
	first, now := "rotate the staging keys every quarter", "rotate the staging keys every month"
	id := srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "runbooks", "content": first})["drawer_id"].(string)
	if res := srv.MustCall(t, "mempalace_update_drawer", map[string]any{"drawer_id": id, "content": now}); res["success"] != true || res["drawer_id"] != id {
		t.Fatalf("update_drawer: %v", res)
	}
	if res, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatalf("delete_drawer: %v %v", res, rpc)
	}
	drawer := map[string]any{"wing": "shared", "room": "runbooks", "content": now}
	_, rpc := g.withMeta(t, ops, "add_drawer", drawer, map[string]any{origin.JoinKey: true, origin.JoinDrawerKey: id})
	wantTrashed(t, "a join's add_drawer of the updated drawer", rpc, g.deleteOf(t, id), id)
	if r := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "shared"}); len(r["drawers"].([]any)) != 0 {
		t.Fatalf("the refused join filed the drawer: %v", r)
	}
}

// A diary entry the operator purged from the trash (`gateway trash
// purge`, which keys its digest with the server secret as the gateway
// does) is still refused when a join replays it, and its text is not in
// the trash's file: before, the purge took the text the replay was
// matched by, and the entry came back.
func TestJoinDoesNotRewriteAPurgedDiaryEntry(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	args := map[string]any{"agent_name": "pi", "entry": "the vault password is hunter2", "topic": "ci"}
	w, _, _ := g.call(desk, "diary_write", args)
	g.call(admin, "delete_drawer", map[string]any{"drawer_id": w["entry_id"].(string)})
	cfg := g.srv.cfg.Load()
	operator, err := trash.Open(cfg.TrashPath(), cfg.TrashRetention(), nil) // as `gateway trash purge` opens it
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()
	secret, err := LoadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	operator.Key = PurgeKey(secret)
	if _, _, err := operator.Purge(context.Background(), w["entry_id"].(string)); err != nil {
		t.Fatal(err)
	}
	_, rpc := g.joined(t, desk, "diary_write", args)
	wantTold(t, "a join's diary_write of the purged entry", rpc, "admin-0001")
	if msg, _ := rpc["message"].(string); !strings.Contains(msg, "purged it for good") || strings.Contains(msg, "can restore") {
		t.Errorf("the refusal offers a restore of the purged entry: %s", msg)
	}
	drawer := map[string]any{"wing": "shared", "room": "keys", "content": "the vault password is hunter3"}
	a, _, _ := g.call(admin, "add_drawer", drawer)
	g.call(admin, "delete_drawer", map[string]any{"drawer_id": a["drawer_id"]})
	if _, _, err := operator.Purge(context.Background(), a["drawer_id"].(string)); err != nil {
		t.Fatal(err)
	}
	_, rpc = g.joined(t, admin, "add_drawer", drawer)
	if msg, _ := rpc["message"].(string); !strings.Contains(msg, "no restore brings it back") || strings.Contains(msg, "trash restore") {
		t.Errorf("the admin's refusal offers a restore of the purged drawer: %s", msg)
	}
	if r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
		t.Fatalf("the join wrote the purged entry again: %v", r)
	}
	if b, err := os.ReadFile(cfg.TrashPath()); err != nil || bytes.Contains(b, []byte("hunter2")) {
		t.Fatalf("the trash's file holds the purged text (%v)", err)
	}
	if res, rpc := g.joined(t, desk, "diary_write", map[string]any{"agent_name": "pi", "entry": "another entry", "topic": "ci"}); rpc != nil || res["success"] != true {
		t.Fatalf("a join's diary_write of another text: %v %v", res, rpc)
	}
}

// An edge tells a refusal of a purged drawer apart by ledger.PurgedWords
// (it then offers drop alone: no restore brings it back), so both of the
// gateway's words for it carry them, to an admin and to any other device,
// for a join and for a replay (review26 S4: a rewording would silently
// bring back the edge's generic "fix the cause, then retry").
func TestAPurgedDrawersRefusalCarriesTheWordsAnEdgeKnowsItBy(t *testing.T) {
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	del := trash.Delete{ID: 2, Tool: "delete_drawers", Device: "alpha", Drawers: []trash.Drawer{{ID: "drawer_w_r_1", Wing: "w", Room: "r", PurgedAt: &at}}}
	add, _ := catalogue.Lookup("mempalace_add_drawer")
	for _, admin := range []bool{true, false} {
		for _, again := range []string{"", "this device's palace held it before the delete"} {
			if msg, _ := deletedWords(&Device{Admin: admin}, add, del, again); !strings.Contains(msg, ledger.PurgedWords) {
				t.Errorf("admin %v, again %q: %q lacks %q", admin, again, msg, ledger.PurgedWords)
			}
		}
	}
}
