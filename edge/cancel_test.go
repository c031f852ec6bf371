package edge

import (
	"context"
	"strings"
	"testing"
)

// What a delete cancels of the writes still waiting in the outbox: every
// unsent write of the deleted drawer or entry, and nothing else (found by
// an outside tester against real MemPalace, issues 11, 12, 13 and 18).

// drained waits until the outbox holds no pending op (sent or cancelled).
func (h *harness) drained() {
	h.t.Helper()
	h.eventually("the outbox drained", func() bool {
		n, _, err := h.edge.outbox.Pending(context.Background())
		return err == nil && n == 0
	})
}

// stopPrimary stops the primary and waits until the edge knows it is
// down: a write made before that may go to a flush that meets the closing
// connection, and one in doubt (maybe applied) is rightly never cancelled.
func (h *harness) stopPrimary() {
	h.t.Helper()
	h.srv.Stop()
	h.eventually("the edge sees the primary down", func() bool {
		h.call("kg_stats", nil)
		return !h.edge.remote.Up()
	})
}

func cancelledNote(m map[string]any) string {
	ed, _ := m["edge"].(map[string]any)
	return asString(ed["cancelled"])
}

// A secret edited into a drawer offline, then the drawer deleted: the
// unsent update_drawer is cancelled with it, so the primary never holds
// the secret (it keeps the drawer as it was sent, hidden on this device).
func TestADeleteCancelsTheUnsentUpdate(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const note = "deploy notes"
	id := DrawerIDFor("notes", "leak", note)
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "leak", "content": note})
	h.eventually("the note on the primary", func() bool { return h.primary.Dump().Drawers[id] != nil })
	h.stopPrimary()
	h.call("update_drawer", map[string]any{"drawer_id": id, "content": note + " password=hunter2"})
	m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if m["success"] != true || !strings.Contains(cancelledNote(m), "1 ") {
		t.Errorf("delete_drawer does not say the unsent update was cancelled: %v", m)
	}
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.drained()
	if d := h.primary.Dump().Drawers[id]; d == nil || strings.Contains(d.Content, "hunter2") {
		t.Fatalf("the primary holds %+v, want the note as it was sent, without the deleted update", d)
	}
}

// A secret edited offline into a drawer already on the primary, then its
// source deleted: the unsent update_drawer is cancelled with it, as
// delete_drawer's is. Before, delete_by_source cancelled only the adds
// (an update names the drawer, not its source): the edit went out, and the
// deleted text showed in every other device's reads.
func TestADeleteBySourceCancelsTheUnsentUpdate(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const note, src = "deploy notes, from the runbook", "/work/runbook.md"
	id := DrawerIDFor("notes", "src", note)
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": note, "source_file": src})
	h.eventually("the note on the primary", func() bool { return h.primary.Dump().Drawers[id] != nil })
	h.stopPrimary()
	h.call("update_drawer", map[string]any{"drawer_id": id, "content": note + " password=hunter2"})
	m, _ := h.call("delete_by_source", map[string]any{"source_file": src, "dry_run": false})
	if m["success"] != true || !strings.Contains(cancelledNote(m), "1 ") {
		t.Errorf("delete_by_source does not say the unsent update was cancelled: %v", m)
	}
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.drained()
	if d := h.primary.Dump().Drawers[id]; d == nil || strings.Contains(d.Content, "hunter2") {
		t.Fatalf("the primary holds %+v, want the note as it was sent, without the deleted update", d)
	}
}

// delete_by_source cancels the unsent adds of that source's drawers.
func TestADeleteBySourceCancelsTheUnsentAdds(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryDown: true})
	const secret, note, src = "sourced secret", "a note that stays", "/work/leak.txt"
	id := DrawerIDFor("notes", "src", secret)
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": secret, "source_file": src})
	m, _ := h.call("delete_by_source", map[string]any{"source_file": src, "dry_run": false})
	if m["success"] != true || !strings.Contains(cancelledNote(m), "1 ") {
		t.Errorf("delete_by_source does not say the unsent add was cancelled: %v", m)
	}
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": note})
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.drained()
	if h.primary.Dump().Drawers[DrawerIDFor("notes", "src", note)] == nil {
		t.Fatal("the note never reached the primary")
	}
	if h.primary.Dump().Drawers[id] != nil {
		t.Fatal("the drawer deleted by source before it was sent reached the primary")
	}
}

// An unsent checkpoint loses what is deleted of it (an item, its diary
// entry) and still carries the rest to the primary.
func TestADeleteCutsTheUnsentCheckpoint(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryDown: true})
	const secret, keep, entry = "checkpoint secret token=abc123", "checkpoint keep", "diary of the secret"
	r, _ := h.call("checkpoint", map[string]any{"items": []any{
		map[string]any{"wing": "notes", "room": "cp", "content": secret},
		map[string]any{"wing": "notes", "room": "cp", "content": keep},
	}, "diary": map[string]any{"agent_name": "me", "entry": entry}})
	d, _ := r["diary"].(map[string]any)
	diaryID, _ := d["entry_id"].(string)
	if diaryID == "" {
		t.Fatalf("checkpoint answered no diary entry id: %v", r)
	}
	id := DrawerIDFor("notes", "cp", secret)
	for _, del := range []string{id, diaryID} {
		m, _ := h.call("delete_drawer", map[string]any{"drawer_id": del})
		if m["success"] != true || !strings.Contains(cancelledNote(m), "1 ") {
			t.Errorf("deleting %s does not say it was cut from the unsent checkpoint: %v", del, m)
		}
	}
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.drained()
	dump := h.primary.Dump()
	if dump.Drawers[DrawerIDFor("notes", "cp", keep)] == nil {
		t.Error("the checkpoint's kept item never reached the primary")
	}
	if dump.Drawers[id] != nil {
		t.Error("the checkpoint item deleted before it was sent reached the primary")
	}
	for _, dr := range dump.Drawers {
		if dr.Diary && dr.Content == entry {
			t.Error("the checkpoint's diary entry deleted before it was sent reached the primary")
		}
	}
}

// Deleting a diary entry already sent cancels nothing: not a later entry
// of the same agent and text waiting in the outbox, in another wing or in
// the same one.
func TestDeletingASentDiaryEntryKeepsAnotherUnsentOne(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const text = "standup: nothing new"
	w, _ := h.call("diary_write", map[string]any{"agent_name": "me", "entry": text})
	sent, _ := w["entry_id"].(string)
	h.drained()
	h.stopPrimary()
	h.call("diary_write", map[string]any{"agent_name": "me", "entry": text, "wing": "wing_team", "topic": "team"})
	h.call("diary_write", map[string]any{"agent_name": "me", "entry": text})
	m, _ := h.call("delete_drawer", map[string]any{"drawer_id": sent})
	if m["success"] != true || cancelledNote(m) != "" {
		t.Errorf("deleting an entry already sent cancelled a write: %v", m)
	}
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.drained()
	byWing := map[string]int{}
	for _, d := range h.primary.Dump().Drawers {
		if d.Diary && d.Content == text {
			byWing[d.Wing]++
		}
	}
	if byWing["wing_team"] != 1 || byWing["wing_me"] != 2 {
		t.Fatalf("the primary holds the text %v, want wing_team 1 and wing_me 2 (the deleted entry's copy and the later one)", byWing)
	}
}
