package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// joined sends a write as a join's replay (params._meta[origin.JoinKey]);
// it returns the result text decoded, or the JSON-RPC error.
func (g *gw) joined(t *testing.T, token, tool string, args map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args, "_meta": map[string]any{origin.JoinKey: true}}})
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

// A join's replay of a drawer an admin deleted on the primary is refused:
// the trash holds it as deleted, and the message says how to have it back.
// The same write from a live edge (an agent filing it again on purpose)
// goes through; after a restore, or once filed again, the join's write is
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
	wantTrashed(t, "a join's add of the deleted drawer", rpc, n, id)
	if got, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != nil {
		t.Fatalf("the join's refused add filed the drawer again: %v", got)
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

	// Deleted again: a live write files it again, and a join's write after
	// that finds it there.
	g.advance(time.Second)
	g.call(admin, "delete_drawer", map[string]any{"drawer_id": id})
	g.advance(time.Second)
	if _, rpc := g.joined(t, desk, "add_drawer", args); rpc == nil {
		t.Fatal("a join's add after the second delete went through")
	}
	if res, rpc, _ := g.call(desk, "add_drawer", args); rpc != nil || res["success"] != true || res["drawer_id"] != id {
		t.Fatalf("a live add of the same content: %v %v", res, rpc)
	}
	if res, rpc := g.joined(t, desk, "add_drawer", args); rpc != nil || res["success"] != true {
		t.Fatalf("a join's add of a drawer filed again since its delete: %v %v", res, rpc)
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
	wantTrashed(t, "a join's diary_write of the deleted entry", rpc, n, entry)
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
