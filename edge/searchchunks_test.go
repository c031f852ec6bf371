package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
)

// A merged search of limit N is N hits when the primary holds them,
// however many of the primary's rows are chunks of one long drawer:
// MemPalace 3.11 answers a row per matching chunk, each with its
// drawer's id, and the edge shows a drawer once. Before, the primary was
// asked for N rows (N plus one per tombstone), five chunks of one drawer
// were one hit, and the page came back short with more matching drawers
// on the primary: with tombstones (attack104 F3) and without. A search
// whose rows are distinct drawers asks the primary once.
func TestALongDrawersChunkRowsDoNotThinTheSearchPage(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const query = "cap item filler text number"
	long := fileElsewhere(t, h, strings.Repeat(query+" ", 12*fakepalace.ChunkSize/len(query+" "))) // a dozen chunks, each the query's words
	var short []string
	for i := range 8 {
		short = append(short, fileElsewhere(t, h, fmt.Sprintf("%s %d, with words of its own: item %d of the cap", query, i, i)))
	}
	page := func(when string, limit int, gone ...string) {
		t.Helper()
		m, _ := h.call("search", map[string]any{"query": query, "limit": limit, "wing": "shared"})
		ids := map[string]bool{}
		rs, _ := m["results"].([]any)
		for _, r := range rs {
			hit, _ := r.(map[string]any)
			ids[fmt.Sprint(hit["drawer_id"])] = true
		}
		if len(rs) != limit || len(ids) != limit || !ids[long] {
			t.Errorf("%s: search limit %d shows %d results of %d drawers, want %d, the long drawer's among them: %s", when, limit, len(rs), len(ids), limit, mustJSON(rs))
		}
		for _, id := range gone {
			if ids[id] {
				t.Errorf("%s: search shows %s, deleted here", when, id)
			}
		}
	}
	page("no tombstones", 5)
	for _, id := range short[:3] {
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
			t.Fatalf("delete_drawer %s: %v", id, m)
		}
	}
	page("three tombstones", 5, short[:3]...)
	before := primarySearches(h)
	page("a page of one, the primary's first row", 1)
	if n := primarySearches(h) - before; n != 1 {
		t.Errorf("a search its first answer fills asked the primary %d times, want once", n)
	}
}

// A search whose primary's 100 rows, MemPalace's most, are all chunks of
// one drawer says its page is short as MemPalace 3.11 says it of folded
// copies: distinct_results_truncated.
func TestASearchPageOneDrawerFillsSaysSo(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const query = "cap item filler text number"
	fileElsewhere(t, h, strings.Repeat(query+" ", 105*fakepalace.ChunkSize/len(query+" "))) // 105 chunks, each the query's words
	other := fileElsewhere(t, h, query+", and a hundred more words of another drawer")
	m, _ := h.call("search", map[string]any{"query": query, "limit": 5, "wing": "shared"})
	if rs, _ := m["results"].([]any); len(rs) != 1 || m["distinct_results_truncated"] != true {
		t.Errorf("search limit 5 past 100 rows of one drawer answers %s, want its one hit and distinct_results_truncated", mustJSON(m))
	}
	// With a tombstone, hidden_cut says so, of rows ranked by likeness,
	// not by age (attack107 F6: "the newest 100 rows").
	h.call("delete_drawer", map[string]any{"drawer_id": other})
	h.call("delete_drawer", map[string]any{"drawer_id": fileElsewhere(t, h, query)}) // the best row of all
	m, _ = h.call("search", map[string]any{"query": query, "limit": 5, "wing": "shared"})
	if cut, _ := m["hidden_cut"].(string); !strings.Contains(cut, "the best 100 rows") || !strings.Contains(cut, "less similar ones") || strings.Contains(cut, "newest") {
		t.Errorf("search past 100 rows with a tombstone: hidden_cut %q", cut)
	}
}

// fileElsewhere files content in wing shared on h's primary as another
// device would, and returns its drawer id.
func fileElsewhere(t *testing.T, h *harness, content string) string {
	t.Helper()
	other := NewPrimary(h.srv.URL(), func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 10 * time.Second})
	defer other.Close()
	args, _ := json.Marshal(map[string]any{"wing": "shared", "room": "cap", "content": content}) // plain values: they encode
	res, err := FlushTarget(other).Call(context.Background(), "mempalace_add_drawer", args)
	id, _ := res["drawer_id"].(string)
	if err != nil || res["success"] != true || id == "" {
		t.Fatalf("the other device's add_drawer: %v %v", res, err)
	}
	return id
}

// primarySearches is how many searches h's primary has been asked.
func primarySearches(h *harness) (n int) {
	for _, m := range received(h.primaryLog.String()) {
		if m.Name == "mempalace_search" {
			n++
		}
	}
	return n
}

// The same with real MemPalace 3.11 as both palaces: its search answers
// a row per matching chunk of the long drawer another device filed on
// the primary; two other drawers of the primary's this device deleted
// (tombstones) and the page is still five drawers (attack104 F3).
func TestRealALongDrawersChunkRowsDoNotThinTheSearchPage(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	const query = "cap item filler text number"
	file := func(content string) string {
		res := r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "cap", "content": content})
		id, _ := res["drawer_id"].(string)
		return id
	}
	h.call("add_drawer", map[string]any{"wing": "notes", "room": "misc", "content": "a palace here: the read is merged"})
	file(strings.Repeat(query+" ", 12*fakepalace.ChunkSize/len(query+" ")))
	var short []string
	for i := range 8 {
		short = append(short, file(fmt.Sprintf("%s %d, with words of its own: item %d of the cap", query, i, i)))
	}
	for _, id := range short[:2] {
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
			t.Fatalf("delete_drawer %s: %v", id, m)
		}
	}
	raw := r.srv.MustCall(t, "mempalace_search", map[string]any{"query": query, "limit": 7, "wing": "shared"})
	ids := map[string]bool{}
	for _, x := range hitsOf(t, raw) {
		ids[fmt.Sprint(x["drawer_id"])] = true
	}
	t.Logf("the primary's 7 best rows are of %d drawers", len(ids))
	m, _ := h.call("search", map[string]any{"query": query, "limit": 5, "wing": "shared"})
	ids = map[string]bool{}
	for _, x := range hitsOf(t, m) {
		ids[fmt.Sprint(x["drawer_id"])] = true
	}
	if ed, _ := m["edge"].(map[string]any); ed["merged"] != true || len(hitsOf(t, m)) != 5 || len(ids) != 5 || ids[short[0]] || ids[short[1]] {
		t.Errorf("search limit 5 shows %d hits of %d drawers, want 5 drawers, none deleted here, merged: %s", len(hitsOf(t, m)), len(ids), mustJSON(m))
	}
}

// The primary's page alone (the local palace unusable) shows a long
// drawer once, its chunk rows within the limit too (review33 R2: rows at
// or under the limit were passed as they came, the drawer three times).
func TestASearchFromThePrimaryAloneShowsADrawerOnce(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer = emptyLocal{}
	const query = "cap item filler text number"
	sharedDrawer(t, primary, "shared", strings.Repeat(query+" ", 3*fakepalace.ChunkSize/len(query+" "))) // 3 chunks
	sharedDrawer(t, primary, "shared", query+", once")
	m := routed(t, e, "mempalace_search", map[string]any{"query": query, "limit": 5})
	rs, _ := m["results"].([]any)
	seen := map[string]bool{}
	for _, r := range rs {
		seen[fmt.Sprint(r.(map[string]any)["drawer_id"])] = true
	}
	if len(rs) != 2 || len(seen) != 2 || edgeOf(m)["primary"] != "ok" {
		t.Errorf("search limit 5 from the primary alone: %d rows of %d drawers: %s", len(rs), len(seen), mustJSON(m))
	}
}
