package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// A restore never destroys what the primary holds now: restoring an
// update's replaced version keeps the drawer's current version in the
// trash, as a delete of its own that puts it back; a deleted drawer whose
// id was filed again and then changed is restored over the change, which
// is kept the same way (not "already on the primary"); an update's
// replaced version whose drawer was deleted since is filed again in its
// wing and room.
func TestRestoreKeepsWhatThePrimaryHolds(t *testing.T) {
	t.Parallel()
	restoreKeepsWhatThePrimaryHolds(t, newGW(t, devices))
}

// restoreKeepsWhatThePrimaryHolds is the test against g's primary (the
// fake or real MemPalace).
func restoreKeepsWhatThePrimaryHolds(t *testing.T, g *gw) {
	t.Helper()
	admin := g.tokens["admin-0001"]
	ctx := context.Background()
	do := func(t *testing.T, tool string, args map[string]any) map[string]any {
		t.Helper()
		res, rpc, _ := g.call(admin, tool, args)
		if rpc != nil || res["success"] == false {
			t.Fatalf("%s %v: %v %v", tool, args, res, rpc)
		}
		return res
	}
	add := func(t *testing.T, content string) string {
		t.Helper()
		return do(t, "add_drawer", map[string]any{"wing": "shared", "room": "runbooks", "content": content})["drawer_id"].(string)
	}
	content := func(id string) any {
		res, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id})
		return res["content"]
	}
	newest := func(t *testing.T) int64 { t.Helper(); return g.kept(t)[0].ID }
	restore := func(t *testing.T, ref int64) Restored {
		t.Helper()
		rs, err := g.restorer(t).Restore(ctx, []string{fmt.Sprint(ref)})
		if err != nil || len(rs) != 1 || rs[0].Err != nil {
			for _, r := range rs {
				t.Log(r.brief())
			}
			t.Fatalf("restore %d: %v", ref, err)
		}
		return rs[0]
	}
	keeps := func(t *testing.T, r Restored, id, want string) {
		t.Helper()
		bin, _ := g.srv.Trash()
		d, err := bin.Get(ctx, r.Kept)
		if r.Kept == 0 || err != nil || d.Tool != "update_drawer" || d.State != trash.StateDeleted || len(d.Drawers) != 1 ||
			d.Drawers[0].ID != id || d.Drawers[0].Content != want || d.Drawers[0].Kind != trash.KindPrior || !strings.Contains(d.Summary(), "restor") {
			t.Fatalf("the restore did not keep %q (what %s held) in the trash: %s; the trash's delete %d: %s %v", want, id, r.brief(), r.Kept, d.Summary(), err)
		}
	}

	t.Run("update over a later version", func(t *testing.T) {
		id := add(t, "v1 of the runbook")
		do(t, "update_drawer", map[string]any{"drawer_id": id, "content": "v2 of the runbook"})
		v1 := newest(t)
		do(t, "update_drawer", map[string]any{"drawer_id": id, "content": "v3 of the runbook, hours of work"})
		r := restore(t, v1)
		if r.As != id || r.Already || content(id) != "v1 of the runbook" {
			t.Fatalf("restoring v1: %s, the drawer holds %q", r.brief(), content(id))
		}
		keeps(t, r, id, "v3 of the runbook, hours of work")
		if r = restore(t, r.Kept); r.As != id || content(id) != "v3 of the runbook, hours of work" {
			t.Fatalf("restoring what the first restore replaced: %s, the drawer holds %q", r.brief(), content(id))
		}
		keeps(t, r, id, "v1 of the runbook")

	})
	// Deleted, the same content filed again (the same id), then changed:
	// the restore puts the content back and keeps the change.
	t.Run("delete whose id holds other content", func(t *testing.T) {
		const checklist = "deploy checklist: freeze, tag, ship"
		id := add(t, checklist)
		do(t, "delete_drawer", map[string]any{"drawer_id": id})
		del := newest(t)
		if again := add(t, checklist); again != id {
			t.Fatalf("the same content filed again as %s, not %s", again, id)
		}
		do(t, "update_drawer", map[string]any{"drawer_id": id, "content": "someone's new text"})
		r := restore(t, del)
		if r.Already || r.As != id || content(id) != checklist {
			t.Fatalf("restoring the delete over other content: %s, the drawer holds %q", r.brief(), content(id))
		}
		keeps(t, r, id, "someone's new text")
		// Filed again with the same content and left so: already there.
		do(t, "delete_drawer", map[string]any{"drawer_id": id})
		del = newest(t)
		add(t, checklist)
		if r = restore(t, del); !r.Already || r.Kept != 0 || r.As != id {
			t.Fatalf("restoring a delete whose content is back: %s", r.brief())
		}
	})
	// Updated, then deleted: the update's replaced version is filed again
	// (under the id its content gives: here the drawer's first id), and
	// the delete's version comes back beside it.
	t.Run("update of a deleted drawer", func(t *testing.T) {
		id := add(t, "v1 of the deploy notes")
		do(t, "update_drawer", map[string]any{"drawer_id": id, "content": "v2 of the deploy notes"})
		upd := newest(t)
		if d := g.kept(t)[0].Drawers[0]; !strings.Contains(d.ComesBackAs(), "filed again") {
			t.Errorf("trash list does not say what restoring a replaced version of a deleted drawer makes: %s", d.ComesBackAs())
		}
		do(t, "delete_drawer", map[string]any{"drawer_id": id})
		del := newest(t)
		r := restore(t, upd)
		if r.As != id || r.Already || r.Kept != 0 || content(id) != "v1 of the deploy notes" {
			t.Fatalf("restoring the replaced version of a deleted drawer: %s, %s holds %q", r.brief(), id, content(id))
		}
		v2 := catalogue.DrawerID("shared", "runbooks", "v2 of the deploy notes")
		if r = restore(t, del); r.As != v2 || content(v2) != "v2 of the deploy notes" || content(id) != "v1 of the deploy notes" {
			t.Fatalf("restoring the delete after its replaced version: %s, %s holds %q", r.brief(), v2, content(v2))
		}
	})
}

// brief is a restore's outcome in a line, for a failure.
func (r Restored) brief() string {
	return fmt.Sprintf("%s restored as %q, already %v, kept %d, err %v", r.Drawer.ID, r.As, r.Already, r.Kept, r.Err)
}

// A restore that cannot keep what the drawer holds now does not replace
// it: the drawer keeps its current version and the restore says why.
func TestRestoreThatCannotKeepReplacesNothing(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	added, _, _ := g.call(admin, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "v1"})
	id := added["drawer_id"].(string)
	g.call(admin, "update_drawer", map[string]any{"drawer_id": id, "content": "v2, the current one"})
	v1 := g.kept(t)[0].ID
	bin, _ := g.srv.Trash()
	db, err := sqlitewal.Open(bin.Path(), "FULL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() // the test's own handle
	if _, err := db.Exec(`CREATE TRIGGER full BEFORE INSERT ON deletes BEGIN SELECT RAISE(ABORT, 'disk full'); END`); err != nil {
		t.Fatal(err)
	}
	rs, err := g.restorer(t).Restore(context.Background(), []string{fmt.Sprint(v1)})
	if err != nil || len(rs) != 1 || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), "not replaced") || rs[0].Kept != 0 {
		t.Fatalf("a restore whose trash cannot keep: %+v %v", rs, err)
	}
	if got, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != "v2, the current one" {
		t.Fatalf("the current version was replaced without being kept: %v", got["content"])
	}
	if d, _ := bin.Get(context.Background(), v1); d.Drawers[0].RestoredAt != nil {
		t.Fatalf("marked restored: %+v", d.Drawers[0])
	}
}

// Outside tester, attack17 n5 (a): a drawer updated twice (v1, v2, v3)
// and deleted has three trash entries. `trash restore <drawer id>` brings
// back the newest (v3); a second restore by the id would file v2 as a
// drawer of its own beside it, so it is refused, naming the entry that
// keeps v2; `trash restore N` of that entry restores it.
func TestRestoreByIDTwiceNamesTheOlderEntry(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	res, _, _ := g.call(admin, "add_drawer", map[string]any{"wing": "shared", "room": "ra", "content": "alpha v1"})
	id := str(res["drawer_id"])
	for _, v := range []string{"alpha v2", "alpha v3"} {
		if _, rpc, _ := g.call(admin, "update_drawer", map[string]any{"drawer_id": id, "content": v}); rpc != nil {
			t.Fatal(rpc)
		}
	}
	if _, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil {
		t.Fatal(rpc)
	}
	kept := g.kept(t) // newest first: the delete (v3), v2, v1
	r := g.restorer(t)
	rs, err := r.Restore(context.Background(), []string{id})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].Delete.ID != kept[0].ID {
		t.Fatalf("the first restore by id: %+v %v, want delete %d's", rs, err, kept[0].ID)
	}
	before := len(g.primary.Dump().Drawers)
	rs, err = r.Restore(context.Background(), []string{id})
	if err != nil || len(rs) != 1 || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), fmt.Sprintf("trash restore %d", kept[1].ID)) {
		t.Errorf("a second restore by id: %+v %v, want it refused naming delete %d", rs, err, kept[1].ID)
	}
	if n := len(g.primary.Dump().Drawers); n != before {
		t.Errorf("a second restore by id filed %d drawer(s)", n-before)
	}
	rs, err = r.Restore(context.Background(), []string{fmt.Sprint(kept[1].ID)})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || g.primary.Dump().Drawers[rs[0].As].Content != "alpha v2" {
		t.Errorf("restore %d: %+v %v", kept[1].ID, rs, err)
	}
}
