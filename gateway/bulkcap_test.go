package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// seedDrawers files n drawers in wing "shared" through the admin and
// returns their ids.
func seedDrawers(t *testing.T, g *gw, token, source string, n int) []any {
	t.Helper()
	var ids []any
	for i := range n {
		res, rpc, _ := g.call(token, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": fmt.Sprintf("note %d from %s", i, source), "source_file": source})
		if rpc != nil || res["drawer_id"] == nil {
			t.Fatalf("seeding: %v %v", res, rpc)
		}
		ids = append(ids, res["drawer_id"])
	}
	return ids
}

// A delete that would remove more drawers than the cap (default 10) is
// refused for a device without the bulk-delete grant, and nothing is
// deleted; at the cap it goes through.
func TestBulkDeleteCap(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	ids := seedDrawers(t, g, admin, "bulk.md", 11)
	if _, rpc, _ := g.call(admin, "delete_by_source", map[string]any{"source_file": "bulk.md", "dry_run": false}); rpc == nil || rpc["code"] != float64(CodeDenied) {
		t.Errorf("delete_by_source of 11 drawers by an admin without the grant: %v", rpc)
	}
	if _, rpc, _ := g.call(admin, "delete_drawers", map[string]any{"drawer_ids": ids}); rpc == nil || rpc["code"] != float64(CodeDenied) {
		t.Errorf("delete_drawers of 11 drawers by an admin without the grant: %v", rpc)
	}
	if res, _, _ := g.call(admin, "list_drawers", map[string]any{"wing": "shared", "limit": 100}); res["total"] != 11.0 {
		t.Fatalf("a refused delete removed drawers: %v left", res["total"])
	}
	if _, rpc, _ := g.call(admin, "delete_drawers", map[string]any{"drawer_ids": ids[:10]}); rpc != nil {
		t.Errorf("delete_drawers of 10 drawers (the cap): %v", rpc)
	}
	if res, _, _ := g.call(admin, "list_drawers", map[string]any{"wing": "shared", "limit": 100}); res["total"] != 1.0 {
		t.Fatalf("after deleting 10 of 11: %v left", res["total"])
	}
}

// With the bulk-delete grant, a delete over the cap goes through, and
// every drawer it removed is in the trash; the cap is the config's.
func TestBulkDeleteGrant(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{{ID: "cleanup-01", Label: "cleanup", Read: []string{"*"}, Write: []string{"*"}, Admin: true, BulkDelete: true}})
	tok := g.tokens["cleanup-01"]
	seedDrawers(t, g, tok, "old-bench.jsonl", 12)
	if res, rpc, _ := g.call(tok, "delete_by_source", map[string]any{"source_file": "old-bench.jsonl", "dry_run": false}); rpc != nil || res["deleted"] != 12.0 {
		t.Fatalf("a bulk delete with the grant: %v %v", res, rpc)
	}
	if ds := g.kept(t); len(ds) != 1 || len(ds[0].Drawers) != 12 {
		t.Fatalf("the trash after a bulk delete: %+v", ds)
	}
	if err := (&Config{SecretFile: "s", AuditLog: "a", Devices: []Device{{ID: "d1", BulkDelete: true}}}).Validate(); err == nil || !strings.Contains(err.Error(), "devices[0].bulk_delete") {
		t.Errorf("bulk_delete on a device that may not delete: %v", err)
	}
	cfg := *g.srv.cfg.Load()
	cfg.DeleteCap, cfg.Devices[0].BulkDelete = 2, false
	g.srv.cfg.Store(&cfg)
	ids := seedDrawers(t, g, tok, "three.md", 3)
	if _, rpc, _ := g.call(tok, "delete_drawers", map[string]any{"drawer_ids": ids}); rpc == nil || !strings.Contains(fmt.Sprint(rpc["message"]), "more than the 2 (delete_cap)") {
		t.Fatalf("delete_cap 2, three drawers: %v", rpc)
	}
}
