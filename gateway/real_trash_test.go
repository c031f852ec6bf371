package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// deleters are an admin without the bulk-delete grant and one with it.
var deleters = []Device{
	{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"pi@ops"}, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "cleanup-02", Label: "cleanup", Read: []string{"*"}, Write: []string{"*"}, Admin: true, BulkDelete: true, ReadRate: 1e9, WriteRate: 1e9},
}

// allIDs lists every drawer id on the real primary (list_drawers, paged).
func allIDs(t *testing.T, srv *realpalace.Server) []string {
	t.Helper()
	var ids []string
	for off := 0; ; off += 100 {
		page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"limit": 100, "offset": off})["drawers"].([]any)
		for _, d := range page {
			ids = append(ids, d.(map[string]any)["drawer_id"].(string))
		}
		if len(page) < 100 {
			slices.Sort(ids)
			return ids
		}
	}
}

// Against real MemPalace 3.11.0: an admin's delete_drawer through the
// gateway is kept in the trash and the restore brings the drawer back
// under the same id with the same content (a chunked one too); a diary
// entry comes back as a new entry, and one a delete never removed is not
// written again; delete_drawers is capped.
func TestRealDeleteKeptAndRestored(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, deleters, u)
	ops := g.tokens["ops-0001"]
	long := strings.Repeat("a long runbook line about rotating the staging keys. ", 40) // more than one 800-character chunk
	var ids []string
	for _, c := range []string{"the release checklist: tag, build, announce", long} {
		res, rpc, _ := g.call(ops, "add_drawer", map[string]any{"wing": "shared", "room": "runbooks", "content": c})
		if rpc != nil || res["success"] != true {
			t.Fatalf("add_drawer: %v %v", res, rpc)
		}
		ids = append(ids, res["drawer_id"].(string))
	}
	before := srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": ids[1]})
	if before["chunks"] == nil {
		t.Fatalf("the long drawer is not chunked: %v", before)
	}
	for _, id := range ids {
		if res, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["success"] != true {
			t.Fatalf("delete_drawer %s: %v %v", id, res, rpc)
		}
		if got, _ := srv.Call("mempalace_get_drawer", map[string]any{"drawer_id": id}); got["error"] == nil {
			t.Fatalf("%s is still on the primary: %v", id, got)
		}
	}
	ds := g.kept(t)
	if len(ds) != 2 || ds[0].Drawers[0].ID != ids[1] || ds[0].Drawers[0].Content != long || ds[0].Drawers[0].Kind != trash.KindFiled || ds[0].State != trash.StateDeleted {
		t.Fatalf("the trash: %+v", ds)
	}
	rs, err := g.restorer(t).Restore(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Err != nil || r.As != ids[i] {
			t.Fatalf("restore %s: %+v", ids[i], r)
		}
	}
	after := srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": ids[1]})
	if after["content"] != long || fmt.Sprint(after["chunk_ids"]) != fmt.Sprint(before["chunk_ids"]) {
		t.Fatalf("the chunked drawer came back as %v", after)
	}
	if am, bm := after["metadata"].(map[string]any), before["metadata"].(map[string]any); am["added_by"] != bm["added_by"] || am["filed_at"] == bm["filed_at"] {
		t.Errorf("added_by kept, filed_at not (as documented): %v / %v", am, bm)
	}
	// A diary entry: back as a new entry diary_read lists.
	w := srv.MustCall(t, "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "bisected the flaky test to the clock", "topic": "ci"})
	entry := w["entry_id"].(string)
	if _, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": entry}); rpc != nil {
		t.Fatal(rpc)
	}
	if r := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 0 {
		t.Fatalf("the entry was not deleted: %v", r)
	}
	rs, _ = g.restorer(t).Restore(context.Background(), []string{entry})
	if len(rs) != 1 || rs[0].Err != nil || rs[0].Drawer.Kind != trash.KindDiary || rs[0].As == entry {
		t.Fatalf("restore of a diary entry: %+v", rs)
	}
	es := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "pi"})["entries"].([]any)
	if len(es) != 1 || es[0].(map[string]any)["content"] != "bisected the flaky test to the clock" || es[0].(map[string]any)["topic"] != "ci" {
		t.Fatalf("the restored entry: %v", es)
	}
	// A delete the primary never made (unconfirmed, older than any
	// send's bound): the restore finds the entry still there and writes
	// no second copy.
	g.keepUnmade(t, keptDrawer("delete_drawer", srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": rs[0].As}), ""), trash.StateUnconfirmed)
	g.advance(writeBound + time.Minute)
	again, _ := g.restorer(t).Restore(context.Background(), []string{rs[0].As})
	if len(again) != 1 || again[0].Err != nil || !again[0].Already || again[0].As != rs[0].As {
		t.Fatalf("restore of an entry whose delete was never made: %d results (want 1 already there as %s)", len(again), rs[0].As)
	}
	if es := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "pi"})["entries"].([]any); len(es) != 1 {
		t.Fatalf("%d entries after restoring a delete never made, want 1: %v", len(es), es)
	}
	// delete_drawers: capped for ops, not for the device with the grant.
	var many []any
	for i := range 11 {
		res := srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "bulk", "content": fmt.Sprintf("bulk note %d", i)})
		many = append(many, res["drawer_id"])
	}
	if _, rpc, _ := g.call(ops, "delete_drawers", map[string]any{"drawer_ids": many}); rpc == nil || rpc["code"] != float64(CodeDenied) {
		t.Fatalf("delete_drawers of 11 by ops: %v", rpc)
	}
	res, rpc, _ := g.call(g.tokens["cleanup-02"], "delete_drawers", map[string]any{"drawer_ids": append(many, "drawer_shared_bulk_000000000000000000000000")})
	if rpc != nil || res["deleted"] != 11.0 || res["errors"] != 1.0 {
		t.Fatalf("delete_drawers of 11 and a missing id with the grant: %v %v", res, rpc)
	}
	if ds := g.kept(t); len(ds[0].Drawers) != 11 || ds[0].Device != "cleanup-02" {
		t.Fatalf("the bulk delete's trash: %d drawers by %s", len(ds[0].Drawers), ds[0].Device)
	}
	// A chunk of a drawer is not deleted on its own.
	chunk := fmt.Sprint(after["chunk_ids"].([]any)[0])
	if _, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": chunk}); rpc == nil || !strings.Contains(fmt.Sprint(rpc["message"]), "delete the whole drawer") {
		t.Fatalf("deleting one chunk: %v", rpc)
	}
}

// Against real MemPalace 3.11.0: the drawers the gateway enumerates for a
// delete_by_source are exactly the ones the real server then deletes,
// whether the dry run's sample names every (wing, room) pair (fewer than
// five) or not (the whole palace is listed); mined drawers come back with
// their whole source path, under the content id; a file name that two
// directories share is refused, and nothing is deleted.
func TestRealDeleteBySourceEnumeratesExactly(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, deleters, u)
	bulk := g.tokens["cleanup-02"]
	seed := func(src string, pairs int, perPair int) {
		for p := range pairs {
			for i := range perPair {
				content := fmt.Sprintf("note %d in pair %d from %s", i, p, src)
				if i == 0 {
					content += strings.Repeat(" padding", 150) // a chunked drawer: rows != drawers
				}
				srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": fmt.Sprintf("w%d", p), "room": "notes", "content": content, "source_file": src})
			}
		}
	}
	seed("/workspace/a/notes.md", 2, 3)   // two pairs: the sample is complete
	seed("/workspace/b/meeting.md", 6, 2) // six pairs: the sample stops at five
	seed("/workspace/c/other.md", 3, 2)   // stays
	srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "w0", "room": "notes", "content": "no source at all"})
	for _, c := range []struct {
		src  string
		want int
	}{{"/workspace/a/notes.md", 6}, {"/workspace/b/meeting.md", 12}} {
		before := allIDs(t, srv)
		res, rpc, _ := g.call(bulk, "delete_by_source", map[string]any{"source_file": c.src, "dry_run": false})
		if rpc != nil || res["success"] != true {
			t.Fatalf("delete_by_source %s: %v %v", c.src, res, rpc)
		}
		after := allIDs(t, srv)
		var gone []string
		for _, id := range before {
			if !slices.Contains(after, id) {
				gone = append(gone, id)
			}
		}
		d := g.kept(t)[0]
		var kept []string
		for _, dr := range d.Drawers {
			kept = append(kept, dr.ID)
			if dr.SourceFile != c.src {
				t.Errorf("%s kept with source %q", dr.ID, dr.SourceFile)
			}
		}
		slices.Sort(kept)
		if len(gone) != c.want || !slices.Equal(kept, gone) || d.Note != "" {
			t.Fatalf("%s: the gateway kept %v\nthe server deleted %v\nnote %q", c.src, kept, gone, d.Note)
		}
	}
	// Mined drawers: back with their whole source path, under the content
	// id (a mined drawer's id derives from its source file and chunk).
	proj := t.TempDir()
	os.WriteFile(filepath.Join(proj, "design.md"), []byte("# Design\n\nThe gateway keeps deleted drawers in a trash for thirty days, so that an operator can restore them.\n"), 0o644)
	srv.MustCall(t, "mempalace_mine", map[string]any{"source": proj, "wing": "proj"})
	src := ""
	for _, x := range srv.MustCall(t, "mempalace_search", map[string]any{"query": "trash thirty days", "wing": "proj"})["results"].([]any) {
		src = x.(map[string]any)["source_path"].(string)
	}
	if !strings.HasSuffix(src, "design.md") {
		t.Fatalf("mined source path: %q", src)
	}
	dry := srv.MustCall(t, "mempalace_delete_by_source", map[string]any{"source_file": src})
	if res, rpc, _ := g.call(bulk, "delete_by_source", map[string]any{"source_file": src, "dry_run": false}); rpc != nil || res["deleted"] != dry["match_count"] {
		t.Fatalf("delete_by_source of a mined file: %v %v (dry run %v)", res, rpc, dry)
	}
	d := g.kept(t)[0]
	rs, err := g.restorer(t).Restore(context.Background(), []string{fmt.Sprint(d.ID)})
	if err != nil || len(rs) == 0 {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	for _, r := range rs {
		if r.Err != nil || r.Drawer.Kind != trash.KindRefiled || r.As == r.Drawer.ID || r.As != r.Drawer.RefiledID() {
			t.Errorf("a mined drawer's restore: %+v", r)
		}
	}
	if again := srv.MustCall(t, "mempalace_delete_by_source", map[string]any{"source_file": src}); again["match_count"] != dry["match_count"] {
		t.Errorf("the restored drawers do not carry the whole source path: %v, was %v", again, dry)
	}
	// Two files of one name in two directories: refused, nothing deleted.
	seed("/workspace/d/README.md", 1, 2)
	seed("/workspace/e/README.md", 1, 1)
	before := allIDs(t, srv)
	if _, rpc, _ := g.call(bulk, "delete_by_source", map[string]any{"source_file": "/workspace/d/README.md", "dry_run": false}); rpc == nil || !strings.Contains(fmt.Sprint(rpc["message"]), "cannot tell exactly") {
		t.Fatalf("an ambiguous file name: %v", rpc)
	}
	if after := allIDs(t, srv); !slices.Equal(before, after) {
		t.Fatalf("the refused delete removed drawers: %d -> %d", len(before), len(after))
	}
}

// Against real MemPalace 3.11.0: a restore keeps what the primary holds
// now (the current version an update's restore replaces, a change made
// to a re-filed drawer's id) in the trash, and an update's replaced
// version whose drawer was deleted since is filed again.
func TestRealRestoreKeepsWhatThePrimaryHolds(t *testing.T) {
	u, _ := startReal(t)
	restoreKeepsWhatThePrimaryHolds(t, newGWAt(t, devices, u))
}

// TestADiaryRestoreComparesTheEntrysText against MemPalace 3.11.0 serve:
// its update_drawer puts a diary entry's kept text back in place.
func TestRealADiaryRestoreComparesTheEntrysText(t *testing.T) {
	u, _ := startReal(t)
	diaryRestoreCompares(t, newGWAt(t, devices, u))
}
