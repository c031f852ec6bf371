package edge

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// diarySearchOnce writes a diary entry and two drawers that share its
// words, waits until all three are on the primary (the entry's copy there
// has another id: the primary's own timestamp), and searches with limit
// 3: the entry shows once, "palace": "both", under the id the agent was
// given, and the other two hits fill the limit. Before, the entry showed
// twice (its local id, palace local, and its primary id, palace primary),
// taking two of the three slots (outside tester, attack35 F10).
func diarySearchOnce(t *testing.T, h *harness, onPrimary func() bool) {
	t.Helper()
	const entry = "Edge-mode diary line about giraffes."
	w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": entry})
	id, _ := w["entry_id"].(string)
	if id == "" {
		t.Fatalf("diary_write: %v", w)
	}
	for _, c := range []string{"A note about giraffes in the diary line of the zoo.", "Giraffes: a second diary line, edge mode."} {
		h.call("add_drawer", map[string]any{"wing": "zoo", "room": "notes", "content": c})
	}
	h.drained()
	waitFor(t, 30*time.Second, "the three writes on the primary", onPrimary)
	got, _ := h.call("search", map[string]any{"query": "giraffes diary line", "limit": 3})
	hits := hitsOf(t, got)
	var seen []string
	entries := 0
	for _, x := range hits {
		o, _ := x["origin"].(map[string]any)
		seen = append(seen, fmt.Sprintf("%v %v", x["drawer_id"], o["palace"]))
		if x["text"] == entry || strings.HasPrefix(fmt.Sprint(x["drawer_id"]), "diary_") {
			entries++
			if x["drawer_id"] != id || o["palace"] != "both" {
				t.Errorf("the entry's hit is %v (palace %v), want %s, palace both", x["drawer_id"], o["palace"], id)
			}
		}
	}
	if entries != 1 || len(hits) != 3 {
		t.Fatalf("search shows the diary entry %d times in %d hits, want once in 3: %v", entries, len(hits), seen)
	}
}

func TestSearchShowsADiaryEntryOnce(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	diarySearchOnce(t, h, func() bool { return diaryCopies(h.primary, "Edge-mode diary line about giraffes.") == 1 })
}

// TestRealSearchShowsADiaryEntryOnce is the same against real MemPalace
// 3.11.0: mempalace-mcp the local palace, mempalace serve the primary.
func TestRealSearchShowsADiaryEntryOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	r := startRealEdge(t, harnessOpts{}, "")
	diarySearchOnce(t, r.harness, func() bool { return len(r.onServe(t, "wing_opencode")) == 1 && len(r.onServe(t, "zoo")) == 2 })
}
