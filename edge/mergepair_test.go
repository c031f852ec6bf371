package edge

import (
	"log/slog"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// searchOrigins is each hit of a merged search answer, in order: its
// drawer id, text, origin device and palace.
func searchOrigins(out []byte) [][4]string {
	var hits [][4]string
	gjson.GetBytes(out, "results").ForEach(func(_, h gjson.Result) bool {
		hits = append(hits, [4]string{h.Get("drawer_id").Str, h.Get("text").Str, h.Get("origin.device").Str, h.Get("origin.palace").Str})
		return true
	})
	return hits
}

func wantHits(t *testing.T, what string, out []byte, want [][4]string) {
	t.Helper()
	got := searchOrigins(out)
	if len(got) != len(want) {
		t.Fatalf("%s: got %d hits %v, want %v", what, len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: hit %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// A hit of one drawer is "both" only when the other palace returned that
// drawer too: two chunk hits of one drawer with the same text on one side
// (repetitive logs, templated text) are one hit of that side's, and a
// local drawer whose chunk text equals another drawer's primary hit keeps
// its own origin (outside tester attack97 F3: a drawer only the primary
// held read "both"; F4: this device's own drawer read device "unknown",
// palace "both").
func TestMergeSearchPairsHitsOnlyAcrossPalacesByDrawerID(t *testing.T) {
	t.Parallel()
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	mk := marksFor(deviceinfo.Info{ID: "desk"})
	chunk := "wombat wombat wombat"
	local := `{"query":"q","results":[
	  {"drawer_id":"mine","wing":"w","room":"r","text":"` + chunk + `","distance":0.1},
	  {"drawer_id":"mine","wing":"w","room":"r","text":"` + chunk + `","distance":0.1}]}`
	primary := `{"query":"q","results":[
	  {"drawer_id":"theirs","wing":"w","room":"r","text":"` + chunk + `","distance":0.1,"origin":{"device":"laptop","trusted":true}},
	  {"drawer_id":"theirs","wing":"w","room":"r","text":"` + chunk + `","distance":0.1,"origin":{"device":"laptop","trusted":true}}]}`
	wantHits(t, "one drawer on each side, same chunk text", e.mergeSearch(local, primary, 10, mk), [][4]string{
		{"mine", chunk, "desk", "local"},
		{"theirs", chunk, "laptop", "primary"},
	})
	wantHits(t, "the primary's alone", e.mergeSearch(`{"query":"q","results":[]}`, primary, 10, mk), [][4]string{
		{"theirs", chunk, "laptop", "primary"},
	})
	wantHits(t, "the local palace's alone", e.mergeSearch(local, `{"query":"q","results":[]}`, 10, mk), [][4]string{
		{"mine", chunk, "desk", "local"},
	})
}

// While this device's write of a drawer waits in the outbox (an update
// queued, in flight, or refused there), the primary's text of it is not
// this device's: its hit gives way to the local palace's, and is dropped
// when the local palace did not rank the drawer (outside tester attack97
// F6: the text this device had replaced was the top hit, palace
// "primary", while get_drawer answered the new one).
func TestMergeSearchDropsThePrimarysHitOfADrawerWrittenHere(t *testing.T) {
	t.Parallel()
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	mk := marksFor(deviceinfo.Info{ID: "laptop"})
	mk.writtenHere = map[string]bool{"d5": true, "d6": true}
	local := `{"query":"q","results":[
	  {"drawer_id":"d6","wing":"w","room":"r","text":"backlog item 6, edited","distance":0.3},
	  {"drawer_id":"d7","wing":"w","room":"r","text":"backlog item 7","distance":0.4}]}`
	primary := `{"query":"q","results":[
	  {"drawer_id":"d5","wing":"w","room":"r","text":"backlog item 5: lorem ipsum","distance":0.1,"origin":{"device":"laptop","trusted":true}},
	  {"drawer_id":"d6","wing":"w","room":"r","text":"backlog item 6","distance":0.2,"origin":{"device":"laptop","trusted":true}},
	  {"drawer_id":"d7","wing":"w","room":"r","text":"backlog item 7","distance":0.4,"origin":{"device":"laptop","trusted":true}}]}`
	wantHits(t, "d5 and d6 updated here, not sent", e.mergeSearch(local, primary, 10, mk), [][4]string{
		{"d6", "backlog item 6, edited", "laptop", "local"},
		{"d7", "backlog item 7", "laptop", "both"},
	})
}

// The same for a diary entry: the primary keeps this device's entry
// under its copy's id (its own timestamp), so while an update of the entry
// waits in the outbox, the primary's hit of that copy is dropped too, and
// another device's entry of the same words stands (review31 F2: the old
// text showed as palace "primary" when the local palace did not rank the
// new one).
func TestMergeSearchDropsThePrimarysCopyOfADiaryEntryWrittenHere(t *testing.T) {
	t.Parallel()
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	mk := marksFor(deviceinfo.Info{ID: "laptop"})
	const mine, copyID, theirs = "diary_wing_opencode_20261207_132400123456_0123456789ab",
		"diary_wing_opencode_20261207_132401654321_0123456789ab",
		"diary_wing_opencode_20261207_132402000000_0123456789ab"
	mk.writtenHere = map[string]bool{mine: true}
	mk.copies = map[string]outbox.EntryCopy{"20261207_132400123456": {ID: copyID, Timestamp: "2026-12-07T13:24:01.654321"}}
	local := `{"query":"q","results":[
	  {"drawer_id":"d7","wing":"w","room":"r","text":"backlog item 7","distance":0.4}]}`
	primary := `{"query":"q","results":[
	  {"drawer_id":"` + copyID + `","wing":"wing_opencode","room":"diary","text":"standup: tests red","distance":0.1,"origin":{"device":"laptop","trusted":true}},
	  {"drawer_id":"` + theirs + `","wing":"wing_opencode","room":"diary","text":"standup: tests red","distance":0.1,"origin":{"device":"desk","trusted":true}},
	  {"drawer_id":"d7","wing":"w","room":"r","text":"backlog item 7","distance":0.4,"origin":{"device":"laptop","trusted":true}}]}`
	wantHits(t, "the entry updated here, not sent, not ranked here", e.mergeSearch(local, primary, 10, mk), [][4]string{
		{theirs, "standup: tests red", "desk", "primary"},
		{"d7", "backlog item 7", "laptop", "both"},
	})
}

// Through the edge: an update the primary refuses leaves its old text
// there; a search of the old words never finds the text this device
// replaced (attack97 F6: the local palace ranked another drawer over the
// new text, and the primary's old text was the top hit, palace
// "primary", while get_drawer answered the new one).
func TestASearchShowsNoTextThisDeviceReplaced(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const old = "backlog item 5: lorem ipsum"
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": old})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "backlog item 6: lorem ipsum dolor"})
	h.eventually("replication", func() bool { return h.primary.Dump().CountContent("backlog item 6: lorem ipsum dolor") == 1 })
	h.srv.FailTool("mempalace_update_drawer", 1000, fakepalace.FailErrorField)
	h.call("update_drawer", map[string]any{"drawer_id": r["drawer_id"], "content": "Completely rewritten: the cat sat on the mat."})
	got, _ := h.call("search", map[string]any{"query": old, "limit": 1})
	for _, x := range got["results"].([]any) {
		if x := x.(map[string]any); x["text"] == old {
			t.Errorf("the text this device replaced is a hit: %v", x)
		}
	}
}

// The same through the edge for a diary entry, which the primary keeps
// under another id (review31 F2).
func TestASearchShowsNoDiaryTextThisDeviceReplaced(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const old = "backlog item 5: lorem ipsum"
	w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": old})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "backlog item 6: lorem ipsum dolor"})
	h.eventually("replication", func() bool {
		return diaryCopies(h.primary, old) == 1 && h.primary.Dump().CountContent("backlog item 6: lorem ipsum dolor") == 1
	})
	h.srv.FailTool("mempalace_update_drawer", 1000, fakepalace.FailErrorField)
	h.call("update_drawer", map[string]any{"drawer_id": w["entry_id"], "content": "Completely rewritten: the cat sat on the mat."})
	got, _ := h.call("search", map[string]any{"query": old, "limit": 1})
	for _, x := range got["results"].([]any) {
		if x := x.(map[string]any); x["text"] == old {
			t.Errorf("the diary text this device replaced is a hit: %v", x)
		}
	}
}
