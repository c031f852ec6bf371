package edge

import (
	"log/slog"
	"testing"

	"github.com/tidwall/gjson"

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
