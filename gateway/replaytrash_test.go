package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// The replay mark alone (without the join mark an edge sends beside it
// for older gateways) is checked too, and its refusal is worded for a
// replay: to an admin device with the delete and its restore first (a
// dead note cuts the reason at 120 characters), to any other without the
// trash's entry. A write with neither mark is made.
func TestTheReplayMarkIsCheckedAndWordedForAReplay(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	args := map[string]any{"wing": "shared", "room": "gone", "content": "a planted note"}
	a, _, _ := g.call(desk, "add_drawer", args)
	id, _ := a["drawer_id"].(string)
	if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's delete: %v %v", res, rpc)
	}
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
	if res, rpc, _ := g.call(desk, "add_drawer", args); rpc != nil || res["success"] != true {
		t.Fatalf("a fresh write of the same words (no mark) is made: %v %v", res, rpc)
	}
}
