package gateway

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Against real MemPalace 3.11.0: an admin edge's delete of a drawer its
// (real) local palace never held carries the base of the primary's copy
// the edge read through the gateway, and that base is the one the gateway
// reads before the delete: an unchanged drawer (Unicode, CRLF, tabs) is
// deleted, not refused as a conflict; one another device edited while the
// delete was on its way is refused -32033 and keeps the edit (attack104 F1).
func TestRealAnAdminsDeleteOfAnotherDevicesDrawerIsChecked(t *testing.T) {
	g, onPrimary := realLaptopFleet(t)
	add := func(content string) string {
		a, rpc, _ := g.call(g.tokens["laptop-7f3a"], "add_drawer", map[string]any{"wing": "shared", "room": "f1", "content": content})
		if rpc != nil {
			t.Fatal(rpc)
		}
		return str(a["drawer_id"])
	}
	plain := add("naïve café — ünïcödé 日本語\r\n\tindented line  \n trailing blanks   ")
	edited := add("laptop note: the deploy key rotates monthly")
	hold := holdingDeletes(t, g.http.URL+"/mcp")
	hold.release() // the first delete goes straight through
	local := realpalace.New(t)
	s := edgeWith(t, hold.url, g.tokens["ops-0001"], local.Dir, local.MCPCommand(), local.Env(), 60*time.Second)
	ob, err := outbox.Open(filepath.Join(local.Dir, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	del := func(id string) string {
		t.Helper()
		res := edgeCall(t, s, "delete_drawer", map[string]any{"drawer_id": id})
		op, _ := res["edge"].(map[string]any)["op_id"].(string)
		if op == "" || res["success"] != true {
			t.Fatalf("the admin's delete of laptop's drawer: %v (want it queued)", res)
		}
		return op
	}
	settled := func(op string) outbox.Op {
		t.Helper()
		o := settledOp(t, ob, op, "the delete settled")
		return o
	}
	if o := settled(del(plain)); o.State != outbox.Done || onPrimary(plain) != "" {
		t.Fatalf("a delete of an unchanged drawer of another device: %s %s, primary %q (a false conflict)", o.State, o.Error, onPrimary(plain))
	}

	held := hold.arm()
	op := del(edited)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the queued delete was never sent")
	}
	const newer = "laptop note EDITED: weekly now"
	if _, rpc, _ := g.call(g.tokens["laptop-7f3a"], "update_drawer", map[string]any{"drawer_id": edited, "content": newer}); rpc != nil {
		t.Fatal(rpc)
	}
	hold.release()
	if o := settled(op); o.State != outbox.Dead || outbox.FailureOf(o.Error).Kind != outbox.ChangedOnPrimary || onPrimary(edited) != newer {
		t.Fatalf("a delete sent after another device's edit: %s %s, primary %q", o.State, o.Error, onPrimary(edited))
	}
}
