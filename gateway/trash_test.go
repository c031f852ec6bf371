package gateway

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/testbed"
)

// restorer is the operator's restore for a test gateway.
func (g *gw) restorer(t *testing.T) Restorer {
	t.Helper()
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	return Restorer{Trash: bin, Upstream: g.up.url, Token: func() string { return upstreamToken }, Provenance: g.srv.prov}
}

// kept lists the trash's deletes, newest first.
func (g *gw) kept(t *testing.T) []trash.Delete {
	t.Helper()
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := bin.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// An admin's delete through the gateway lands in the trash, with who made
// it and the audit line written before it; the restore brings the drawer
// back under the same id, with the same content, and only once.
func TestAdminDeleteGoesToTrashAndRestores(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	content := "the release checklist: tag, build, announce"
	added, _, _ := g.call(admin, "add_drawer", map[string]any{"wing": "shared", "room": "release", "content": content})
	id := added["drawer_id"].(string)
	before, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id})
	if res, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's delete: %v %v", res, rpc)
	}
	if res, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id}); res["content"] != nil {
		t.Fatalf("the drawer is still on the primary: %v", res)
	}
	ds := g.kept(t)
	if len(ds) != 1 || ds[0].State != trash.StateDeleted || ds[0].Device != "admin-0001" || ds[0].Label != "ops" || ds[0].Tool != "delete_drawer" || len(ds[0].Drawers) != 1 {
		t.Fatalf("the trash: %+v", ds)
	}
	kept := ds[0].Drawers[0]
	if kept.ID != id || kept.Content != content || kept.Kind != trash.KindFiled || kept.Meta("filed_at") == "" || !strings.Contains(kept.Meta("added_by"), "admin-0001") {
		t.Fatalf("the kept drawer: %+v", kept)
	}
	log, _ := os.ReadFile(g.srv.cfg.Load().AuditLog)
	if ds[0].Audit == "" || !strings.Contains(string(log), `"hash":"`+ds[0].Audit+`"`) || !strings.Contains(string(log), `"decision":"pending"`) {
		t.Fatalf("the trash's audit reference %q is not a line of the audit log", ds[0].Audit)
	}

	rs, err := g.restorer(t).Restore(context.Background(), []string{id})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].As != id || rs[0].Already {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	after, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id})
	if after["content"] != content || after["wing"] != "shared" || after["room"] != "release" {
		t.Fatalf("restored drawer: %v", after)
	}
	if am, bm := after["metadata"].(map[string]any), before["metadata"].(map[string]any); am["added_by"] != bm["added_by"] {
		t.Errorf("added_by not restored: %v, was %v", am["added_by"], bm["added_by"])
	}
	if rs, _ := g.restorer(t).Restore(context.Background(), []string{id}); len(rs) != 1 || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), "restored already") {
		t.Fatalf("a second restore: %+v", rs)
	}
}

// Each kind comes back as trash.Kind says: a diary entry as a new entry,
// an update's replaced version in place, the drawers of a source with the
// whole path a delete_by_source named.
func TestRestoreKinds(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin, desk := g.tokens["admin-0001"], g.tokens["desk-9b21"]
	ctx := context.Background()
	// A diary entry.
	w, _, _ := g.call(desk, "diary_write", map[string]any{"agent_name": "pi", "entry": "found the flaky test", "topic": "ci"})
	entry := w["entry_id"].(string)
	g.call(admin, "delete_drawer", map[string]any{"drawer_id": entry})
	if r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
		t.Fatalf("the entry was not deleted: %v", r)
	}
	rs, err := g.restorer(t).Restore(ctx, []string{entry})
	if err != nil || rs[0].Err != nil || rs[0].Drawer.Kind != trash.KindDiary || rs[0].As == entry || !strings.HasPrefix(rs[0].As, "diary_") {
		t.Fatalf("restore of a diary entry: %+v %v", rs, err)
	}
	r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"})
	if es := r["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["content"] != "found the flaky test" || es[0].(map[string]any)["topic"] != "ci" {
		t.Fatalf("the restored entry: %v", r)
	}
	// An update's replaced version: desk may update its own wing's drawer
	// (a write, not an admin delete), and the old text is kept.
	a, _, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "the right answer"})
	id := a["drawer_id"].(string)
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": "a wrong answer"}); rpc != nil {
		t.Fatal(rpc)
	}
	ds := g.kept(t)
	if ds[0].Tool != "update_drawer" || ds[0].Device != "desk-9b21" || ds[0].Drawers[0].Content != "the right answer" || ds[0].Drawers[0].Kind != trash.KindPrior {
		t.Fatalf("the update's prior version: %+v", ds[0])
	}
	if rs, err := g.restorer(t).Restore(ctx, []string{fmt.Sprint(ds[0].ID)}); err != nil || rs[0].Err != nil || rs[0].As != id {
		t.Fatalf("restore of a prior version: %+v %v", rs, err)
	}
	if got, _, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != "the right answer" {
		t.Fatalf("after restoring the prior version: %v", got)
	}
	// delete_by_source: the drawers of the source, with its whole path.
	src := "/workspace/repo/docs/notes.md"
	ids := seedDrawers(t, g, admin, src, 3)
	g.call(admin, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "another file's note", "source_file": "/workspace/repo/other.md"})
	if res, rpc, _ := g.call(admin, "delete_by_source", map[string]any{"source_file": src, "dry_run": false}); rpc != nil || res["deleted"] != 3.0 {
		t.Fatalf("delete_by_source: %v %v", res, rpc)
	}
	ds = g.kept(t)
	if ds[0].Tool != "delete_by_source" || ds[0].Source != src || len(ds[0].Drawers) != 3 {
		t.Fatalf("the source's delete: %+v", ds[0])
	}
	for i, dr := range ds[0].Drawers {
		if dr.SourceFile != src || !containsAny(ids, dr.ID) {
			t.Errorf("kept drawer %d: %+v", i, dr)
		}
	}
	if rs, err := g.restorer(t).Restore(ctx, []string{fmt.Sprint(ds[0].ID)}); err != nil || len(rs) != 3 {
		t.Fatalf("restore of the source's delete: %+v %v", rs, err)
	}
	if dry, _, _ := g.call(admin, "delete_by_source", map[string]any{"source_file": src}); dry["match_count"] != 3.0 {
		t.Fatalf("the restored drawers do not carry the source's whole path: %v", dry)
	}
}

func containsAny(list []any, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// What the gateway cannot keep, it does not delete: a source whose file
// name two directories share (MemPalace's answers give only the name).
// And a delete that removed nothing leaves nothing in the trash.
func TestDeleteItCannotKeepIsRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	seedDrawers(t, g, admin, "/a/README.md", 2)
	seedDrawers(t, g, admin, "/b/README.md", 1)
	_, rpc, _ := g.call(admin, "delete_by_source", map[string]any{"source_file": "/a/README.md", "dry_run": false})
	if rpc == nil || rpc["code"] != float64(CodeDenied) || !strings.Contains(fmt.Sprint(rpc["message"]), "delete_drawers") {
		t.Fatalf("an ambiguous delete_by_source: %v", rpc)
	}
	if res, _, _ := g.call(admin, "list_drawers", map[string]any{"limit": 100}); res["total"] != 3.0 {
		t.Fatalf("the refused delete removed drawers: %v", res["total"])
	}
	// A dry run is a read: nothing kept, nothing refused.
	if res, rpc, _ := g.call(admin, "delete_by_source", map[string]any{"source_file": "/a/README.md"}); rpc != nil || res["match_count"] != 2.0 {
		t.Fatalf("a dry run: %v %v", res, rpc)
	}
	if res, _, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": "drawer_shared_notes_000000000000000000000000"}); res["success"] != false {
		t.Fatalf("deleting a drawer that is not there: %v", res)
	}
	if ds := g.kept(t); len(ds) != 0 {
		t.Fatalf("kept for deletes that removed nothing: %+v", ds)
	}
}

// A trash that cannot be written refuses deletes (fail closed).
func TestUnwritableTrashRefusesDeletes(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	cfg := *g.srv.cfg.Load()
	cfg.TrashFile = t.TempDir() // a directory: not a database
	g.srv.cfg.Store(&cfg)
	ids := seedDrawers(t, g, admin, "x.md", 1) // an add is made without it
	_, rpc, _ := g.call(admin, "delete_drawer", map[string]any{"drawer_id": ids[0]})
	if rpc == nil || !strings.Contains(fmt.Sprint(rpc["message"]), "trash cannot be opened") {
		t.Fatalf("a delete with no trash: %v", rpc)
	}
	if res, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": ids[0]}); res["content"] == nil {
		t.Fatal("deleted without a trash")
	}
}

// An id named twice in delete_drawers is removed once and fails the
// second time: it stays in the trash all the same. An id that names no
// drawer is not kept.
func TestDeleteDrawersTwiceNamedStaysKept(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := g.tokens["admin-0001"]
	ids := seedDrawers(t, g, admin, "twice.md", 2)
	res, rpc, _ := g.call(admin, "delete_drawers", map[string]any{"drawer_ids": []any{ids[0], ids[0], ids[1], "drawer_shared_notes_ffffffffffffffffffffffff"}})
	if rpc != nil || res["deleted"] != 2.0 || res["errors"] != 2.0 {
		t.Fatalf("delete_drawers: %v %v", res, rpc)
	}
	ds := g.kept(t)
	if len(ds) != 1 || len(ds[0].Drawers) != 2 {
		t.Fatalf("kept: %+v", ds)
	}
}

// A source in more (wing, room) pairs than the dry run's sample names
// (five) is looked for pair by pair, as get_taxonomy lists them, not in
// the whole palace at once; its drawers are all kept.
func TestDeleteBySourceBeyondTheSample(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{{ID: "cleanup-01", Read: []string{"*"}, Write: []string{"*"}, Admin: true, BulkDelete: true}})
	tok := g.tokens["cleanup-01"]
	for i := range 7 {
		g.call(tok, "add_drawer", map[string]any{"wing": fmt.Sprintf("w%d", i), "room": "notes", "content": fmt.Sprintf("note %d", i), "source_file": "/srv/notes.md"})
		g.call(tok, "add_drawer", map[string]any{"wing": fmt.Sprintf("w%d", i), "room": "other", "content": fmt.Sprintf("other %d", i), "source_file": "/srv/other.md"})
	}
	if res, rpc, _ := g.call(tok, "delete_by_source", map[string]any{"source_file": "/srv/notes.md", "dry_run": false}); rpc != nil || res["deleted"] != 7.0 {
		t.Fatalf("delete_by_source: %v %v", res, rpc)
	}
	if ds := g.kept(t); len(ds) != 1 || len(ds[0].Drawers) != 7 {
		t.Fatalf("kept: %+v", ds)
	}
	if n := g.up.toolCalls(t, "get_taxonomy"); n != 1 {
		t.Fatalf("get_taxonomy called %d times, want once", n)
	}
}

// What the trash keeps is what the delete removes: a write from another
// device that arrives while a delete_by_source is between its look-up and
// the delete waits for the delete (the look-up and the delete hold the
// primary's write slot together), so the delete goes ahead with what it
// enumerated and the new drawer of that source stays.
func TestAWriteWaitsForTheDeleteItWouldRaceWith(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "cleanup-01", Read: []string{"*"}, Write: []string{"*"}, Admin: true},
		{ID: "desk-9b21", Read: []string{"*"}, Write: []string{"*"}},
	})
	admin, desk := g.tokens["cleanup-01"], g.tokens["desk-9b21"]
	for i := range 3 {
		g.call(admin, "add_drawer", map[string]any{"wing": "w", "room": "notes", "content": fmt.Sprintf("old note %d", i), "source_file": "/srv/notes.md"})
	}
	pl := g.up.palace
	trace := &testbed.SyncBuffer{}
	fakepalace.SetTrace(pl, trace)
	// the gateway's enumeration of the source's drawers is held mid-look-up
	hold := make(chan struct{})
	pl.SetHold("mempalace_list_drawers", hold)
	released := false
	defer func() {
		if !released {
			close(hold) // a failing test must not hang
		}
	}()
	deleted := make(chan map[string]any, 1)
	go func() {
		res, rpc, _ := g.call(admin, "delete_by_source", map[string]any{"source_file": "/srv/notes.md", "dry_run": false})
		if rpc != nil {
			res = map[string]any{"refused": rpc}
		}
		deleted <- res
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(trace.String(), `"name":"mempalace_list_drawers"`); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gateway never enumerated the source's drawers")
		}
	}
	added := make(chan map[string]any, 1)
	go func() {
		res, _, _ := g.call(desk, "add_drawer", map[string]any{"wing": "w", "room": "notes", "content": "a new note", "source_file": "/srv/notes.md"})
		added <- res
	}()
	// give the write its chance to overtake the delete (it cannot while the
	// slot is held; without it, it lands within milliseconds)
	for deadline := time.Now().Add(300 * time.Millisecond); pl.Calls("mempalace_add_drawer") < 4 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	released = true
	close(hold)
	if res := <-deleted; res["deleted"] != 3.0 {
		t.Fatalf("delete_by_source with a write arriving mid-look-up: %v", res)
	}
	res := <-added
	id, _ := res["drawer_id"].(string)
	if got, _, _ := g.call(admin, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != "a new note" {
		t.Fatalf("the write that arrived during the delete is gone from the primary: %v", got)
	}
	if ds := g.kept(t); len(ds) != 1 || len(ds[0].Drawers) != 3 || ds[0].Note != "" {
		t.Fatalf("kept: %+v", ds)
	}
}

// attack69 F4, through the gateway: a device rewriting a drawer over and
// over keeps in the trash only as much of its own replaced text as the
// quota holds, newest first, while the text of the device that wrote the
// drawer first stays restorable (rewrites an hour old or more: review 24
// O3).
func TestRewritesKeepOwnTextUnderTheQuota(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	bin.OwnQuota = 1 // only the newest of laptop's own texts
	// Each rewrite two hours after the one before: past the quota's floor.
	var hours atomic.Int64
	bin.Now = func() time.Time { return time.Now().Add(time.Duration(hours.Load()) * time.Hour) }
	a, _, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "desk's first text"})
	id := a["drawer_id"].(string)
	for i := range 5 {
		hours.Add(2)
		if _, rpc, _ := g.call(g.tokens["laptop-7f3a"], "update_drawer", map[string]any{"drawer_id": id, "content": fmt.Sprintf("laptop's rewrite number %d", i)}); rpc != nil {
			t.Fatal(rpc)
		}
	}
	var kept []string
	for _, d := range g.kept(t) {
		kept = append(kept, d.Drawers[0].Content)
	}
	if want := []string{"laptop's rewrite number 3", "desk's first text"}; !slices.Equal(kept, want) {
		t.Fatalf("the trash keeps %q, want %q", kept, want)
	}
}
