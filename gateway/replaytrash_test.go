package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// replayedDelete is an outside tester's sequence (attack37 A4): device
// desk files a drawer through its edge; an admin deletes it on the
// primary (the gateway keeps it in its trash); desk's local palace, which
// the delete never reaches, answers desk's add of the same words
// already_exists, and the edge queues it. It returns the drawer's id and
// that op, once its send is settled (dead, or done), and the outbox.
func replayedDelete(t *testing.T, g *gw, s *mcp.ClientSession, palace, content string, onPrimary func(string) bool) (string, outbox.Op, *outbox.Store) {
	t.Helper()
	args := map[string]any{"wing": "shared", "room": "gone", "content": content}
	id, _ := edgeCall(t, s, "add_drawer", args)["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return onPrimary(id) })
	if res, rpc, _ := g.call(g.tokens[adminOf(g)], "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's delete: %v %v", res, rpc)
	}
	again := edgeCall(t, s, "add_drawer", args)
	op, _ := again["edge"].(map[string]any)["op_id"].(string)
	if again["reason"] != "already_exists" || replication(again) != "queued" || op == "" {
		t.Fatalf("the local palace's answer to the same words again: %v", again)
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	o := settledOp(t, ob, op, "the re-add's send settled")
	return id, o, ob
}

// adminOf is the admin device of g's devices.
func adminOf(g *gw) string {
	if _, ok := g.tokens["admin-0001"]; ok {
		return "admin-0001"
	}
	return "ops-0001"
}

// wantStillDeleted fails unless the trash still holds drawer id's delete
// as deleted, restored by nobody.
func wantStillDeleted(t *testing.T, g *gw, id string) trash.Delete {
	t.Helper()
	ds := g.kept(t)
	if len(ds) != 1 || ds[0].State != trash.StateDeleted || ds[0].Drawers[0].ID != id {
		t.Fatalf("the trash: %+v", ds)
	}
	return ds[0]
}

// wantToldDeleted fails unless the op is dead (never sent again on its
// own), saying the drawer was deleted on the primary and the operator can
// restore it, in words that fit a replay, not a join.
func wantToldDeleted(t *testing.T, o outbox.Op) {
	t.Helper()
	msg := string(o.Error)
	if o.State != outbox.Dead || !strings.Contains(msg, string(outbox.DeletedOnPrimary)) {
		t.Fatalf("the re-add of a drawer deleted on the primary: %s %s (want dead, %s)", o.State, msg, outbox.DeletedOnPrimary)
	}
	for _, want := range []string{"deleted on the primary", "operator can restore it", "replay of this device's local copy"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the dead op's reason lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "a join") {
		t.Errorf("a live edge's replay is told as a join's: %s", msg)
	}
}

// A write its local palace answered already_exists is a replay of what
// that palace holds, not a fresh write: the edge marks it so, and the
// gateway does not file again a drawer an admin deleted on the primary
// (before, the flush filed it again for everyone under the same id while
// the trash still said deleted). The op is dead at once and the device is
// told at its next session start; once the operator restores the drawer,
// `edge outbox retry` settles it.
func TestAnEdgesReplayDoesNotRefileWhatAnAdminDeleted(t *testing.T) {
	t.Parallel()
	g, s, palace, onPrimary := deskBehindTheGateway(t)
	id, o, ob := replayedDelete(t, g, s, palace, "Desk secret token pasted by mistake: hunter2.", onPrimary)
	if onPrimary(id) {
		t.Fatal("the edge's re-add filed again on the primary what an admin deleted there")
	}
	wantStillDeleted(t, g, id)
	wantToldDeleted(t, o)
	if e := g.auditLog(); !strings.Contains(fmtJSON(e), ruleReplayDeleted.String()) {
		t.Errorf("no audit line with rule %s", ruleReplayDeleted)
	}

	next := edgeAt(t, g.http.URL+"/mcp", g.tokens["desk-9b21"], palace) // the device's next session
	if in := next.InitializeResult().Instructions; !strings.Contains(in, "deleted on the primary") || !strings.Contains(in, "shared/gone") {
		t.Errorf("the next session start does not tell of the write deleted on the primary:\n%s", in)
	}

	if rs, err := g.restorer(t).Restore(context.Background(), []string{id}); err != nil || rs[0].Err != nil {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	if _, err := ob.Retry(context.Background(), o.ID); err != nil {
		t.Fatal(err)
	}
	ob.Kick()
	waitUntil(t, "the retried op done", func() bool {
		got, err := ob.GetByID(context.Background(), o.ID)
		return err == nil && got.State == outbox.Done
	})
	if !onPrimary(id) {
		t.Fatal("the restored drawer is gone")
	}
}

// The replay mark alone (without the join mark an edge sends beside it
// for older gateways) is checked too, and its refusal is worded for a
// replay: to an admin device with the delete and its restore first (a
// dead note cuts the reason at 120 characters), to any other without the
// trash's entry. A write with neither mark is made unless it comes from
// the drawer's writer.
func TestTheReplayMarkIsCheckedAndWordedForAReplay(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	args := map[string]any{"wing": "shared", "room": "gone", "content": "a planted note"}
	id := filedThenDeleted(t, g, args)
	n := g.kept(t)[0].ID
	replay := map[string]any{origin.ReplayKey: true}
	_, rpc := g.withMeta(t, desk, "add_drawer", args, replay)
	data, _ := rpc["data"].(map[string]any)
	msg, _ := rpc["message"].(string)
	if rpc == nil || rpc["code"] != float64(ledger.CodeDeletedOnPrimary) || data["rule"] != ruleReplayDeleted.String() {
		t.Fatalf("a replay of a drawer the trash holds: %v", rpc)
	}
	if first := msg[:120]; !strings.Contains(first, "deleted on the primary") || !strings.Contains(first, "operator can restore it") || strings.Contains(msg, "a join") || strings.Contains(msg, "admin-0001") {
		t.Errorf("a non-admin device's refusal: %s", msg)
	}
	_, rpc = g.withMeta(t, admin, "add_drawer", args, replay)
	if msg, _ := rpc["message"].(string); rpc == nil || !strings.Contains(msg[:120], fmt.Sprintf("trash restore %d", n)) || !strings.Contains(msg, id) {
		t.Errorf("an admin device's refusal: %v", rpc)
	}
	if _, rpc := g.withMeta(t, desk, "add_drawer", args, map[string]any{origin.ReplayKey: "yes"}); rpc == nil || rpc["code"] != float64(-32602) {
		t.Errorf("a replay mark that is not true: %v", rpc)
	}
	if g.primary.Dump().Drawers[id] != nil {
		t.Fatal("a refused replay filed the drawer again")
	}
	// A write with no mark by the device that wrote the drawer is refused
	// too (its agent filing again what it remembers, or after deleting its
	// local copy, would undo the delete: attack38 B2); another device's
	// fresh write of the same words is made.
	_, rpc, _ = g.call(desk, "add_drawer", args)
	if msg, _ := rpc["message"].(string); rpc == nil || rpc["code"] != float64(ledger.CodeDeletedOnPrimary) || !strings.Contains(msg, "this device wrote it") {
		t.Fatalf("the writer's fresh write of the same words (no mark): %v", rpc)
	}
	if g.primary.Dump().Drawers[id] != nil {
		t.Fatal("the writer's fresh write filed the drawer again")
	}
	if res, rpc, _ := g.call(g.tokens["laptop-7f3a"], "add_drawer", args); rpc != nil || res["success"] != true {
		t.Fatalf("another device's fresh write of the same words (no mark) is made: %v %v", res, rpc)
	}
}

// Against real MemPalace 3.11.0 (serve behind the gateway, a real
// mempalace-mcp as desk's local palace), the tester's sequence: 3.11.0
// answers the same add again already_exists, the edge marks its send a
// replay, and the primary does not hold the admin's deleted drawer again;
// the trash still says deleted (before, the flush filed it again).
func TestRealAnEdgesReplayDoesNotRefileWhatAnAdminDeleted(t *testing.T) {
	g, s, dir, onPrimary := realDeskBehindTheGateway(t)
	id, o, _ := replayedDelete(t, g, s, dir, "Desk secret token pasted by mistake: hunter2.", onPrimary)
	if onPrimary(id) {
		t.Fatal("the edge's re-add filed again on the primary what an admin deleted there")
	}
	wantStillDeleted(t, g, id)
	wantToldDeleted(t, o)
}

// realDeskBehindTheGateway is real MemPalace 3.11.0 serve behind the
// gateway, with desk-0002's edge on a real mempalace-mcp local palace
// (its directory), and whether the primary holds a drawer.
func realDeskBehindTheGateway(t *testing.T) (*gw, *mcp.ClientSession, string, func(string) bool) {
	t.Helper()
	u, srv := startReal(t)
	desk := Device{ID: "desk-0002", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, ReadRate: 1e9, WriteRate: 1e9}
	g := newGWAt(t, append([]Device{desk}, deleters...), u)
	onPrimary := func(id string) bool {
		got, _ := srv.Call("mempalace_get_drawer", map[string]any{"drawer_id": id})
		return got["content"] != nil
	}
	local := realpalace.New(t)
	s := edgeWith(t, g.http.URL+"/mcp", g.tokens["desk-0002"], local.Dir, local.MCPCommand(), local.Env(), 60*time.Second)
	return g, s, local.Dir, onPrimary
}

// deskBehindTheGateway is the test double behind the gateway, with
// desk-9b21's edge on a palace of its own (its directory), and whether the
// primary holds a drawer.
func deskBehindTheGateway(t *testing.T) (*gw, *mcp.ClientSession, string, func(string) bool) {
	t.Helper()
	g := newGW(t, devices)
	palace := filepath.Join(t.TempDir(), "palace")
	s := edgeAt(t, g.http.URL+"/mcp", g.tokens["desk-9b21"], palace)
	return g, s, palace, func(id string) bool { return g.primary.Dump().Drawers[id] != nil }
}

// filedThenDeleted: desk-9b21 files args, admin-0001 deletes it (the trash
// keeps it); its drawer id.
func filedThenDeleted(t *testing.T, g *gw, args map[string]any) string {
	t.Helper()
	a, _, _ := g.call(g.tokens["desk-9b21"], "add_drawer", args)
	id, _ := a["drawer_id"].(string)
	if res, rpc, _ := g.call(g.tokens["admin-0001"], "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's delete: %v %v", res, rpc)
	}
	return id
}
