package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// An update of a drawer an admin deleted on the primary (an edge's
// offline update_drawer, flushed after the delete) is refused as deleted
// there, naming the trash's delete and the restore that brings it back,
// not as a drawer the device may not see; a drawer in a wing the device
// may not read stays "not visible" (its deletion is not told). Before,
// both were "the target is not visible to this device" (a grant reason;
// outside tester, attack48 F4).
func TestAnUpdateOfADrawerAnAdminDeletedSaysItIsInTheTrash(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	mine, _, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "del48", "content": "del48 original text"})
	hidden, _, _ := g.call(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "desk's own words"})
	for _, id := range []any{mine["drawer_id"], hidden["drawer_id"]} {
		if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
			t.Fatalf("the admin's delete of %v: %v %v", id, res, rpc)
		}
	}
	ds := g.kept(t)
	if len(ds) != 2 {
		t.Fatalf("the trash: %+v", ds)
	}
	if ds[0].Drawers[0].ID != mine["drawer_id"] {
		ds[0] = ds[1]
	}
	_, rpc, _ := g.call(laptop, "update_drawer", map[string]any{"drawer_id": mine["drawer_id"], "content": "del48 edited offline"})
	msg, _ := rpc["message"].(string)
	if code, _ := rpc["code"].(float64); int(code) != ledger.CodeDeletedOnPrimary || !strings.Contains(msg, "deleted on the primary") ||
		!strings.Contains(msg, fmt.Sprintf("gateway trash restore %d", ds[0].ID)) || strings.Contains(msg, "not visible") {
		t.Errorf("the update of its drawer an admin deleted: %v", rpc)
	}
	_, rpc, _ = g.call(laptop, "update_drawer", map[string]any{"drawer_id": hidden["drawer_id"], "content": "x"})
	if msg, _ := rpc["message"].(string); !strings.Contains(msg, "not visible") || strings.Contains(msg, "trash") || strings.Contains(msg, "deleted") {
		t.Errorf("the update of a deleted drawer in a wing it may not read: %v", rpc)
	}
}

// An update or delete of a drawer id the operator's restore brought back
// under another id (the drawer had been updated, so its id was no longer
// its content's) is refused naming the new id, with the code an edge
// makes dead at once, not as a drawer the device may not see (which an
// edge tried 5 times and told as "deleted on the primary, or in a wing
// this device may not read": outside tester attack63 F1). A device that
// may not read the wing is still told "not visible".
func TestAWriteOfADrawerRestoredUnderANewIDNamesTheNewID(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	restored := func(t *testing.T, tok, wing string) (old, as string) {
		t.Helper()
		res, _, _ := g.call(tok, "add_drawer", map[string]any{"wing": wing, "room": "r63", "content": "r63 first words " + wing})
		old, _ = res["drawer_id"].(string)
		if res, rpc, _ := g.call(tok, "update_drawer", map[string]any{"drawer_id": old, "content": "r63 edited " + wing}); rpc != nil || res["success"] != true {
			t.Fatalf("update: %v %v", res, rpc)
		}
		if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": old}); rpc != nil || res["success"] != true {
			t.Fatalf("the admin's delete: %v %v", res, rpc)
		}
		rs, err := g.restorer(t).Restore(context.Background(), []string{old})
		if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].As == old || rs[0].As == "" {
			t.Fatalf("restore %s: %+v %v", old, rs, err)
		}
		return old, rs[0].As
	}
	old, as := restored(t, laptop, "shared")
	for _, c := range []struct {
		tok, tool string
		args      map[string]any
	}{{laptop, "update_drawer", map[string]any{"drawer_id": old, "content": "r63 after the restore"}}, {admin, "delete_drawer", map[string]any{"drawer_id": old}}} {
		_, rpc, _ := g.call(c.tok, c.tool, c.args)
		msg, _ := rpc["message"].(string)
		verb := strings.TrimSuffix(c.tool, "_drawer")
		if code, _ := rpc["code"].(float64); int(code) != ledger.CodeDeletedOnPrimary || !strings.Contains(msg, ledger.RestoredAsWords+as+": "+verb+" "+as) || strings.Contains(msg, "not visible") {
			t.Errorf("%s of the old id: %v", c.tool, rpc)
		}
	}
	hidden, _ := restored(t, desk, "private_desk")
	_, rpc, _ := g.call(laptop, "update_drawer", map[string]any{"drawer_id": hidden, "content": "x"})
	if msg, _ := rpc["message"].(string); !strings.Contains(msg, "not visible") || strings.Contains(msg, "restored") {
		t.Errorf("the update of a restored drawer in a wing it may not read: %v", rpc)
	}
	// An update naming no drawer is refused as before, not a panic's
	// Internal error (the review of the restored-as refusal).
	for _, args := range []map[string]any{{"content": "x"}, {"drawer_id": "", "content": "x"}} {
		_, rpc, _ := g.call(laptop, "update_drawer", args)
		if msg, _ := rpc["message"].(string); !strings.Contains(msg, "not visible") {
			t.Errorf("an update with %v: %v", args, rpc)
		}
	}
}
