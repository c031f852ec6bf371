package catalogue

import (
	"slices"
	"strings"
	"testing"
)

// The reference's own example of the v3 recipe (mempalace-surface §4).
func TestDrawerIDIsMemPalaces(t *testing.T) {
	if got := DrawerID("w", "r", "hello"); got != "drawer_w_r_5f071391b1962154702ebc8c" {
		t.Fatalf("DrawerID(w, r, hello) = %s", got)
	}
	// lengths count code points, not bytes: "é" is one
	if DrawerID("w", "r", "é") == DrawerID("w", "r", "e") {
		t.Fatal("different contents, one id")
	}
}

func TestCausalKeys(t *testing.T) {
	key := func(tool string, args map[string]any) []string {
		rec, _ := Lookup(tool)
		return rec.CausalKeys(args)
	}
	d := DrawerID("w", "r", "c")
	cases := []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "c", "source_file": "a.md"}, []string{"drawer:" + d, "source:a.md"}},
		{"mempalace_update_drawer", map[string]any{"drawer_id": d, "content": "new"}, []string{"drawer:" + d}},
		{"mempalace_delete_by_source", map[string]any{"source_file": "a.md"}, []string{"source:a.md"}},
		{"mempalace_delete_drawers", map[string]any{"drawer_ids": []any{"d2", "d1", "d2"}}, []string{"drawer:d1", "drawer:d2"}},
		{"mempalace_checkpoint", map[string]any{"items": []any{map[string]any{"wing": "w", "room": "r", "content": "c"}}, "diary": map[string]any{"agent_name": "Pi", "entry": "e"}},
			[]string{"diary:wing_pi", "drawer:" + d}},
		{"mempalace_diary_write", map[string]any{"agent_name": "Pi", "entry": "e"}, []string{"diary:wing_pi"}},
		{"mempalace_delete_drawer", map[string]any{"drawer_id": "diary_wing_pi_20260102_030405000006_0123456789ab"}, []string{"diary:wing_pi", "drawer:diary_wing_pi_20260102_030405000006_0123456789ab"}},
		{"mempalace_diary_write", map[string]any{"agent_name": "Pi", "wing": "journal", "entry": "e"}, []string{"diary:journal"}},
		// MemPalace's own normalisation: one fact however it is spelled
		{"mempalace_kg_add", map[string]any{"subject": "Ada Lovelace", "predicate": "Works At", "object": "x"}, []string{"fact:ada_lovelace/works_at"}},
		{"mempalace_kg_invalidate", map[string]any{"subject": "ada lovelace", "predicate": "works_at", "object": "x"}, []string{"fact:ada_lovelace/works_at"}},
		{"mempalace_kg_supersede", map[string]any{"subject": "Ada Lovelace", "predicate": "works at", "old_object": "x", "new_object": "y"}, []string{"fact:ada_lovelace/works_at"}},
		{"mempalace_event_append", map[string]any{"type": "ask", "correlation_id": "evt_1"}, []string{"event:evt_1"}},
		{"mempalace_event_append", map[string]any{"type": "ask"}, nil},
		{"mempalace_event_ack", map[string]any{"event_id": "evt_1"}, []string{"event:evt_1"}},
		{"mempalace_artifact_put", map[string]any{"kind": "note", "content": "x"}, nil},
		{"mempalace_task_create", map[string]any{"goal": "x"}, nil},
		{"mempalace_future_tool", map[string]any{}, []string{"tool:future_tool"}},
	}
	for _, c := range cases {
		if got := key(c.tool, c.args); !slices.Equal(got, c.want) {
			t.Errorf("%s %v: keys %q, want %q", c.tool, c.args, got, c.want)
		}
	}
}

func TestLanes(t *testing.T) {
	for _, rec := range All() {
		want := PalaceLane
		if rec.Route == CoordinationWrite {
			want = CoordinationLane
		}
		if rec.Lane() != want {
			t.Errorf("%s: lane %s", rec.Name, rec.Lane())
		}
	}
	if rec, _ := Lookup("mempalace_event_ack"); rec.Lane() != CoordinationLane {
		t.Error("event_ack is not on the coordination lane")
	}
}

func TestDiaryEntryID(t *testing.T) {
	stamp, suffix, ok := DiaryEntryID("diary_wing_my_agent_20260809_101112123456_0123456789ab")
	if !ok || stamp != "20260809_101112123456" || suffix != "0123456789ab" {
		t.Fatalf("%q %q %v", stamp, suffix, ok)
	}
	for _, bad := range []string{"drawer_w_r_0123456789ab", "diary_w_2026080_101112123456_0123456789ab", "diary_w_20260809_101112123456_0123456789aZ", "diary__x"} {
		if _, _, ok := DiaryEntryID(bad); ok {
			t.Errorf("%q parsed as a diary entry id", bad)
		}
	}
}

// MemPalace strips a fact's subject, object and predicate before it ids
// them (sanitize_kg_value, sanitize_name): " Alice" is Alice's fact, and
// orders with it.
func TestFactKeysAreMemPalacesIDs(t *testing.T) {
	rec, _ := Lookup("mempalace_kg_add")
	a := rec.CausalKeys(map[string]any{"subject": "Alice", "predicate": "works on", "object": "devbox"})
	b := rec.CausalKeys(map[string]any{"subject": " Alice\u00a0", "predicate": "works on\t", "object": "devbox"})
	if !slices.Equal(a, b) {
		t.Fatalf("padded names are another fact: %v vs %v", a, b)
	}
}

// A listed diary entry is counted by the hash of its text now: its
// preview when whole, its id's suffix for a long entry never edited, and
// none (read it whole) for a long one update_drawer edited, whose id
// hashes the text it was filed with (attack99 F9).
func TestListedEntrySuffix(t *testing.T) {
	longText := strings.Repeat("x", 201)
	id := "diary_wing_pi_20261207_132903481632_" + EntrySuffix("filed text")
	row := func(preview, filed, modified string) map[string]any {
		return map[string]any{"drawer_id": id, "content_preview": preview, "metadata": map[string]any{"filed_at": filed, "last_modified": modified}}
	}
	cut := longText[:200] + "..."
	for _, c := range []struct {
		name              string
		row               map[string]any
		suffix            string
		known, diaryEntry bool
	}{
		{"an edited short text: its preview", row("edited text", "t1", "t2"), EntrySuffix("edited text"), true, true},
		{"a long text never edited: its id", row(cut, "t1", "t1"), EntrySuffix("filed text"), true, true},
		{"a long text, no last_modified: its id", row(cut, "t1", ""), EntrySuffix("filed text"), true, true},
		{"an edited long text: read it", row(cut, "t1", "t2"), "", false, true},
		{"a drawer that is no entry", map[string]any{"drawer_id": "drawer_wing_pi_diary_0123456789abcdef", "content_preview": "x"}, "", false, false},
	} {
		sfx, known, ok := ListedEntrySuffix(c.row)
		if sfx != c.suffix || known != c.known || ok != c.diaryEntry {
			t.Errorf("%s: %q %v %v, want %q %v %v", c.name, sfx, known, ok, c.suffix, c.known, c.diaryEntry)
		}
	}
}
