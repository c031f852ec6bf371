package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/testbed"
)

// deleteCalls are the ways an admin deletes the drawer id (filed in
// shared/r from source).
var deleteCalls = []struct {
	tool string
	args func(id, source string) map[string]any
}{
	{"delete_drawer", func(id, _ string) map[string]any { return map[string]any{"drawer_id": id} }},
	{"delete_drawers", func(id, _ string) map[string]any { return map[string]any{"drawer_ids": []any{id}} }},
	{"delete_by_source", func(_, src string) map[string]any { return map[string]any{"source_file": src, "dry_run": false} }},
}

// TestRefiledAfterDeleteIsTheRefilers: ids come from wing, room and
// content, so a drawer an admin deleted can be filed again, under the
// same id, by any device that may write its wing. The refile is the
// refiler's (operator.md, "Who wrote what"): a device that trusts only
// the admin must not read laptop's refile of the admin's deleted text as
// the admin's. Restoring the admin's delete then finds the drawer filed
// and keeps laptop's origin (trash.md).
func TestRefiledAfterDeleteIsTheRefilers(t *testing.T) {
	t.Parallel()
	for _, mode := range []Untrusted{UntrustedMark, UntrustedWithhold} {
		for _, del := range deleteCalls {
			t.Run(mode.String()+"/"+del.tool, func(t *testing.T) {
				t.Parallel()
				g := newGW(t, trustingDevices(mode))
				laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
				text := "rotate the signing key with the admin's script"
				file := map[string]any{"wing": "shared", "room": "r", "content": text, "source_file": "/notes/keys.md"}
				id := str(must1(t, g, admin, "add_drawer", file)["drawer_id"])
				must1(t, g, admin, del.tool, del.args(id, "/notes/keys.md"))
				if again := must1(t, g, laptop, "add_drawer", file); again["drawer_id"] != id || again["reason"] == "already_exists" {
					t.Fatalf("not a refile under %s: %v", id, again)
				}

				got, rpc, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": id})
				if rpc != nil {
					t.Fatal(rpc)
				}
				o := originOf(t, got)
				switch {
				case o["device"] != "laptop-7f3a" || o["trusted"] != false:
					t.Errorf("get_drawer of laptop's refile: origin %v, want laptop-7f3a untrusted (%v)", o, got)
				case mode == UntrustedWithhold && got["content"] != nil:
					t.Errorf("get_drawer of laptop's refile was not withheld: %v", got)
				}
				hits := must1(t, g, desk, "search", map[string]any{"query": "rotate signing key", "wing": "shared"})
				list, _ := hits["results"].([]any)
				for _, h := range list {
					if o := originOf(t, h); o["device"] != "laptop-7f3a" || o["trusted"] != false {
						t.Errorf("search: the refile's origin %v, want laptop-7f3a untrusted", o)
					}
				}
				if mode == UntrustedWithhold && (len(list) != 0 || hits["untrusted_withheld"] != 1.0) {
					t.Errorf("search: laptop's refile was not withheld: %v", hits)
				}

				res, err := g.restorer(t).Restore(context.Background(), []string{id})
				if err != nil || len(res) != 1 || res[0].Err != nil || !res[0].Already {
					t.Fatalf("restore over the refile: %+v %v", res, err)
				}
				got, _, _ = g.call(desk, "get_drawer", map[string]any{"drawer_id": id})
				if o := originOf(t, got); o["device"] != "laptop-7f3a" || o["trusted"] != false {
					t.Errorf("after restoring the admin's delete over laptop's refile: origin %v, want laptop-7f3a untrusted", o)
				}
			})
		}
	}
}

// TestRestoredAfterDeleteIsItsWritersAgain: the delete drops the
// drawer's origin from the index, and the trash keeps it: the restore
// brings the admin's drawer back as the admin's, trusted.
func TestRestoredAfterDeleteIsItsWritersAgain(t *testing.T) {
	t.Parallel()
	g := newGW(t, trustingDevices(UntrustedMark))
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	id := str(must1(t, g, admin, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "the admin's runbook"})["drawer_id"])
	must1(t, g, admin, "delete_drawer", map[string]any{"drawer_id": id})
	if _, known := g.srv.prov.Lookup(provenance.Drawer(id)); known {
		t.Errorf("the index still holds the origin of deleted drawer %s", id)
	}
	kept := g.kept(t)
	if len(kept) != 1 || kept[0].Drawers[0].Origin == nil || kept[0].Drawers[0].Origin.Device != "admin-0001" {
		t.Fatalf("the trash did not keep the admin's origin: %+v", kept)
	}
	if res, err := g.restorer(t).Restore(context.Background(), []string{fmt.Sprint(kept[0].ID)}); err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("restore: %+v %v", res, err)
	}
	got := must1(t, g, desk, "get_drawer", map[string]any{"drawer_id": id})
	if o := originOf(t, got); o["device"] != "admin-0001" || o["trusted"] != true {
		t.Errorf("the restored drawer's origin %v, want admin-0001 trusted", o)
	}
}

// TestUndecidedDeleteKeepsTheOrigin: a delete the primary did not
// confirm (it failed, or its answer was lost) may have left the drawer
// there, so its origin stays: the admin's drawer still reads as the
// admin's to a device that trusts only the admin.
func TestUndecidedDeleteKeepsTheOrigin(t *testing.T) {
	t.Parallel()
	pl, up := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: upstreamToken})
	g := newGWAt(t, trustingDevices(UntrustedWithhold), &upstream{name: "fakepalace", url: up.URL(), palace: pl})
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	id := str(must1(t, g, admin, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "the admin's runbook"})["drawer_id"])
	up.FailTool("mempalace_delete_drawer", 1, fakepalace.FailInternal)
	if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc == nil && res["success"] == true {
		t.Fatalf("the delete did not fail: %v", res)
	}
	if kept := g.kept(t); len(kept) != 1 || kept[0].State != "unconfirmed" {
		t.Fatalf("not an unconfirmed delete: %+v", kept)
	}
	got := must1(t, g, desk, "get_drawer", map[string]any{"drawer_id": id})
	if o := originOf(t, got); o["device"] != "admin-0001" || o["trusted"] != true || !strings.Contains(str(got["content"]), "runbook") {
		t.Errorf("the drawer an unconfirmed delete left: %v", got)
	}
}

// TestRefileAfterAnUnseenDeleteIsTheRefilers: a drawer deleted where the
// gateway could not see it go (one made around the gateway) keeps its
// origin in the index; add_drawer filing the same content again then
// answers that it filed it (not already_exists), so the drawer is the
// refiler's all the same. A delete whose answer was lost is looked up
// (settledDelete): seen, its drawer's origin goes.
func TestRefileAfterAnUnseenDeleteIsTheRefilers(t *testing.T) {
	t.Parallel()
	pl, up := testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: upstreamToken})
	g := newGWAt(t, trustingDevices(UntrustedMark), &upstream{name: "fakepalace", url: up.URL(), palace: pl})
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	for _, how := range []string{"answer lost", "around the gateway"} {
		file := map[string]any{"wing": "shared", "room": "r", "content": "the admin's runbook, " + how}
		id := str(must1(t, g, admin, "add_drawer", file)["drawer_id"])
		if how == "around the gateway" {
			g.around(t, "delete_drawer", map[string]any{"drawer_id": id})
		} else {
			up.DropAfterApplyTool("mempalace_delete_drawer", 1)
			if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["recovered"] == nil {
				t.Fatalf("the delete whose answer was lost was not looked up: %v %v", res, rpc)
			}
		}
		if again := must1(t, g, laptop, "add_drawer", file); again["drawer_id"] != id || again["reason"] == "already_exists" {
			t.Fatalf("%s: not a refile under %s: %v", how, id, again)
		}
		if o := originOf(t, must1(t, g, desk, "get_drawer", map[string]any{"drawer_id": id})); o["device"] != "laptop-7f3a" || o["trusted"] != false {
			t.Errorf("%s: laptop's refile reads with origin %v, want laptop-7f3a untrusted", how, o)
		}
	}
}

// TestReplayedAddKeepsTheRefilersOrigin: the op-id ledger answers a
// resent add_drawer from its record of the first send ("filed"), without
// the upstream: when the admin's edge resends its add after the drawer
// was deleted and laptop filed it again, the drawer stays laptop's.
func TestReplayedAddKeepsTheRefilersOrigin(t *testing.T) {
	t.Parallel()
	g := newGW(t, trustingDevices(UntrustedMark))
	g.withLedger()
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	file := map[string]any{"wing": "shared", "room": "r", "content": "the admin's runbook"}
	op := strings.Repeat("ab", 32)
	if status, _ := g.postOp(admin, "mempalace_add_drawer", file, op); status != 200 {
		t.Fatalf("add_drawer: HTTP %d", status)
	}
	id := fakepalace.DrawerID("shared", "r", "the admin's runbook")
	must1(t, g, admin, "delete_drawer", map[string]any{"drawer_id": id})
	must1(t, g, laptop, "add_drawer", file)
	if status, ans := g.postOp(admin, "mempalace_add_drawer", file, op); status != 200 || !strings.Contains(fmt.Sprint(ans), "replayed") {
		t.Fatalf("the resend was not replayed: HTTP %d %v", status, ans)
	}
	if o := originOf(t, must1(t, g, desk, "get_drawer", map[string]any{"drawer_id": id})); o["device"] != "laptop-7f3a" {
		t.Errorf("after the admin's replayed add: origin %v, want laptop-7f3a's", o)
	}
}
