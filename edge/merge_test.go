package edge

import (
	"encoding/json"
	"log/slog"
	"testing"
)

// Hits from MemPalace 3.6.0 have no drawer_id: the same wing, room and
// text on both sides is one hit (origin both); a hit without a distance
// (BM25 only) sorts last; the result is cut to the limit and keeps the
// primary's envelope.
func TestMergeSearchWithoutDrawerIDs(t *testing.T) {
	local := `{"query":"q","results":[
	  {"wing":"w","room":"r","text":"shared words","distance":0.2},
	  {"wing":"w","room":"r","text":"only here","distance":0.1},
	  {"wing":"w","room":"r","text":"keyword only"}]}`
	primary := `{"query":"q","total_before_filter":3,"results":[
	  {"wing":"w","room":"r","text":"shared words","distance":0.2},
	  {"wing":"w","room":"other","text":"shared words","distance":0.3},
	  {"wing":"w","room":"r","text":"on the primary","distance":0.15,"origin":"stale"}]}`
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	var got struct {
		TotalBeforeFilter int `json:"total_before_filter"`
		Results           []struct {
			Room, Text, Origin string
			Distance           *float64
		}
		Edge map[string]any
	}
	if err := json.Unmarshal(e.mergeSearch(local, primary, 5), &got); err != nil {
		t.Fatal(err)
	}
	want := []struct{ room, text, origin string }{
		{"r", "only here", "local"},
		{"r", "on the primary", "primary"},
		{"r", "shared words", "both"},
		{"other", "shared words", "primary"}, // another room: another hit
		{"r", "keyword only", "local"},       // no distance: last
	}
	if len(got.Results) != len(want) {
		t.Fatalf("got %d hits: %+v", len(got.Results), got.Results)
	}
	for i, w := range want {
		if r := got.Results[i]; r.Room != w.room || r.Text != w.text || r.Origin != w.origin {
			t.Errorf("hit %d: %+v, want %+v", i, r, w)
		}
	}
	if got.TotalBeforeFilter != 3 || got.Edge["merged"] != true {
		t.Fatalf("envelope: %+v", got)
	}
	if err := json.Unmarshal(e.mergeSearch(local, primary, 2), &got); err != nil || len(got.Results) != 2 {
		t.Fatalf("limit 2: %v %+v", err, got.Results)
	}
}
