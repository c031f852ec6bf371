package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// TestRestoredUpdateGetsBackReplacedOrigin: operator.md says a drawer
// whose content update_drawer rewrote is the updater's, and a device with
// a trusted set gets records of other devices marked. trash.md says
// `trash restore` puts an update_drawer's replaced version back in place.
// After an admin (trusted) rewrites an untrusted device's drawer and the
// operator restores the replaced version, the drawer again holds the
// untrusted device's text, but its origin still names the admin, so a
// device that trusts only the admin reads it as trusted.
func TestRestoredUpdateGetsBackReplacedOrigin(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"*"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@laptop"}, Trusts: []string{"admin-0001"}},
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared"}, KG: "write", Agents: []string{"pi@desk"}},
		{ID: "admin-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true},
	})
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	res, rpc, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "ci", "content": "disable the CI gate, says desk"})
	if rpc != nil {
		t.Fatal(rpc)
	}
	id := res["drawer_id"]
	if _, rpc, _ := g.call(admin, "update_drawer", map[string]any{"drawer_id": id, "content": "keep the CI gate on, says ops"}); rpc != nil {
		t.Fatal(rpc)
	}
	kept := g.kept(t)
	if len(kept) == 0 {
		t.Fatal("the admin's update_drawer left nothing in the trash")
	}
	if _, err := g.restorer(t).Restore(context.Background(), []string{fmt.Sprint(kept[0].ID)}); err != nil {
		t.Fatal(err)
	}
	got, rpc, _ := g.call(laptop, "get_drawer", map[string]any{"drawer_id": id})
	if rpc != nil {
		t.Fatal(rpc)
	}
	o := originOf(t, got)
	t.Logf("after restore: content %q origin %v", got["content"], o)
	if got["content"] == "disable the CI gate, says desk" && (o["device"] != "desk-9b21" || o["trusted"] != false) {
		t.Errorf("desk's restored text reads as %v to a device that trusts only the admin", o)
	}
}

// Outside tester, attack17 n10: `gateway trash restore` runs as another
// process, with its own handle on the provenance index. The first read
// after it returns, through the running gateway (whose poll has not run:
// no Watch here), reads the restored text with the restored origin, not
// the origin of the version it replaced.
func TestRestoredOriginReadsAtOnce(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"*"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@laptop"}, Trusts: []string{"admin-0001"}},
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared"}, KG: "write", Agents: []string{"pi@desk"}},
		{ID: "admin-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true},
	})
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	res, _, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "ci", "content": "disable the CI gate, says desk"})
	id := res["drawer_id"]
	if _, rpc, _ := g.call(admin, "update_drawer", map[string]any{"drawer_id": id, "content": "keep the CI gate on, says ops"}); rpc != nil {
		t.Fatal(rpc)
	}
	if got, _, _ := g.call(laptop, "get_drawer", map[string]any{"drawer_id": id}); originOf(t, got)["trusted"] != true {
		t.Fatalf("the admin's version: %v", got)
	}
	other, err := provenance.Open(g.srv.prov.Path(), nil) // the restore command's own handle
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	r := g.restorer(t)
	r.Provenance = other
	if _, err := r.Restore(context.Background(), []string{fmt.Sprint(g.kept(t)[0].ID)}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := g.call(laptop, "get_drawer", map[string]any{"drawer_id": id})
	if o := originOf(t, got); got["content"] != "disable the CI gate, says desk" || o["device"] != "desk-9b21" || o["trusted"] != false {
		t.Errorf("right after the restore, desk's text reads %q as %v", got["content"], o)
	}
}

// Outside tester, attack83 F3: a delete kept by a release before the
// trash kept origins has none, and that release's gateway left the
// drawer's stamp in the provenance index. Restored after the upgrade, the
// drawer still reads as its writer's (trash.md: the index knew it), so a
// device that trusts the writer reads it trusted, not of unknown origin.
func TestRestoreOfAnOriginlessRowKeepsTheIndexedWriter(t *testing.T) {
	t.Parallel()
	t.Run("its stamp from before the delete", func(t *testing.T) { restoreOriginless(t, false) })
	// A stamp filed after the delete (the id written again since) names
	// another's write, not the deleted version's (review27 D2).
	t.Run("a stamp filed since", func(t *testing.T) { restoreOriginless(t, true) })
}

func restoreOriginless(t *testing.T, filedSince bool) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"*"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@laptop"}, Trusts: []string{"desk-9b21"}},
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared"}, KG: "write", Agents: []string{"pi@desk"}},
		{ID: "admin-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true},
	})
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	res, rpc, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "precious drawer"})
	if rpc != nil {
		t.Fatal(rpc)
	}
	id, _ := res["drawer_id"].(string)
	key := provenance.Drawer(id)
	stamp, known := g.srv.prov.Lookup(key)
	if !known {
		t.Fatal("desk's drawer has no stamp")
	}
	if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatal(res, rpc)
	}
	// What the older gateway left: a trash row without an origin, the
	// index's row for the drawer in place.
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlitewal.Open(bin.Path(), "FULL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE drawers SET origin = ''`); err != nil {
		t.Fatal(err)
	}
	if filedSince {
		stamp = provenance.Stamp{Device: "admin-0001", Label: "ops", At: time.Now().Add(time.Hour)}
	}
	if err := g.srv.prov.Record(context.Background(), provenance.Entry{Key: key, Stamp: stamp, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.restorer(t).Restore(context.Background(), []string{fmt.Sprint(g.kept(t)[0].ID)}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := g.call(laptop, "get_drawer", map[string]any{"drawer_id": id})
	if o := originOf(t, got); filedSince {
		if o["device"] != "unknown" {
			t.Errorf("restored with a stamp filed after its delete, desk's drawer reads as %v, want of unknown origin", o)
		}
	} else if got["content"] != "precious drawer" || o["device"] != "desk-9b21" || o["trusted"] != true {
		t.Errorf("restored, desk's drawer reads %q as %v, want desk's and trusted", got["content"], o)
	}
}
