package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// Hits from MemPalace 3.6.0 have no drawer_id: the same wing, room and
// text on both sides is one hit (origin both); a hit without a distance
// (BM25 only) sorts last; the result is cut to the limit and keeps the
// primary's envelope.
func TestMergeSearchWithoutDrawerIDs(t *testing.T) {
	t.Parallel()
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
			Room, Text string
			Origin     origin.Origin
			Distance   *float64
		}
		Edge map[string]any
	}
	if err := json.Unmarshal(e.mergeSearch(local, primary, 5, marksFor(deviceinfo.Info{})), &got); err != nil {
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
		if r := got.Results[i]; r.Room != w.room || r.Text != w.text || r.Origin.Palace != w.origin {
			t.Errorf("hit %d: %+v, want %+v", i, r, w)
		}
	}
	if got.TotalBeforeFilter != 3 || got.Edge["merged"] != true {
		t.Fatalf("envelope: %+v", got)
	}
	if err := json.Unmarshal(e.mergeSearch(local, primary, 2, marksFor(deviceinfo.Info{})), &got); err != nil || len(got.Results) != 2 {
		t.Fatalf("limit 2: %v %+v", err, got.Results)
	}
}

// A drawer both palaces return with two texts (this device's update not on
// the primary yet, or refused for good while an operator restored the old
// text there) is the local text, so it is this device's, palace "local",
// never "both" with the primary's writer (outside tester attack37 A2: the
// local edit read as the shared record, palace both).
func TestMergeSearchMarksADrawerWithTwoTextsLocal(t *testing.T) {
	t.Parallel()
	local := `{"query":"q","results":[{"drawer_id":"d1","wing":"w","room":"r","text":"version two, edited offline","distance":0.2},
	  {"drawer_id":"d2","wing":"w","room":"r","text":"the same here and there","distance":0.3}]}`
	primary := `{"query":"q","results":[{"drawer_id":"d1","wing":"w","room":"r","text":"version one","distance":0.25,"origin":{"device":"laptop-7f3a","trusted":true}},
	  {"drawer_id":"d2","wing":"w","room":"r","text":"the same here and there","distance":0.3,"origin":{"device":"laptop-7f3a","trusted":true}}]}`
	e := &Edge{log: slog.New(slog.DiscardHandler)}
	var got struct {
		Results []struct {
			DrawerID string `json:"drawer_id"`
			Text     string
			Origin   origin.Origin
		}
	}
	if err := json.Unmarshal(e.mergeSearch(local, primary, 5, marksFor(deviceinfo.Info{ID: "desk-9b21"})), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][3]string{"d1": {"version two, edited offline", "local", "desk-9b21"}, "d2": {"the same here and there", "both", "laptop-7f3a"}}
	if len(got.Results) != 2 {
		t.Fatalf("got %d hits: %+v", len(got.Results), got.Results)
	}
	for _, r := range got.Results {
		if w := want[r.DrawerID]; r.Text != w[0] || r.Origin.Palace != w[1] || r.Origin.Device != w[2] {
			t.Errorf("%s: %q palace %s device %s, want %v", r.DrawerID, r.Text, r.Origin.Palace, r.Origin.Device, w)
		}
	}
	// list_drawers' page the same.
	mk := func(preview string, o map[string]any) map[string]any {
		return map[string]any{"drawers": []any{map[string]any{"drawer_id": "d1", "content_preview": preview, origin.Key: o}}}
	}
	mine := map[string]any{"device": "desk-9b21", "palace": "local"}
	for _, c := range []struct{ primary, palace string }{{"version one", "local"}, {"version two", "both"}} {
		page := union(mk("version two", mine), mk(c.primary, map[string]any{"device": "laptop-7f3a", "palace": "primary"}), "drawers", "drawer_id", nil)
		if o, _ := page[0].rec[origin.Key].(map[string]any); len(page) != 1 || o["palace"] != c.palace {
			t.Errorf("list_drawers, the primary's text %q: %+v, want palace %s", c.primary, page, c.palace)
		}
	}
}

// A merged read asks both palaces at once (its latency is the slower
// side's, not the sum): the local palace has the search while the
// primary is still holding its answer, and the answer merges both.
func TestMergedReadAsksBothPalacesAtOnce(t *testing.T) {
	t.Parallel()
	// The call timeout is well past the wait below: a primary given up on
	// would let the local half start late and still look parallel.
	h := start(t, harnessOpts{childEnv: []string{"FAKEPALACE_TRACE=1"}, timeout: 30 * time.Second})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "parallel halves of one search"})
	h.eventually("replication", func() bool { return len(h.primary.Dump().Drawers) == 1 })
	release := make(chan struct{})
	h.primary.SetHold("mempalace_search", release)
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := h.s.CallTool(context.Background(), &mcp.CallToolParams{Name: "mempalace_search", Arguments: map[string]any{"query": "parallel halves"}})
		done <- answer{res, err}
	}()
	localHasIt := false
	for deadline := time.Now().Add(5 * time.Second); !localHasIt && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range received(h.childLog.String()) {
			localHasIt = localHasIt || m.Method == "tools/call" && m.Name == "mempalace_search"
		}
	}
	t.Logf("localHasIt=%v at %v", localHasIt, time.Now())
	select {
	case a := <-done:
		t.Logf("answered before release: %+v", a)
	default:
	}
	close(release)
	a := <-done
	if !localHasIt {
		t.Fatal("the local palace did not get the search while the primary was working on it: the halves ran one after the other")
	}
	if a.err != nil || a.res.IsError {
		t.Fatalf("merged search: %v %+v", a.err, a.res)
	}
	var got struct {
		Results []struct{ Origin origin.Origin }
		Edge    map[string]any
	}
	json.Unmarshal([]byte(a.res.Content[0].(*mcp.TextContent).Text), &got)
	if len(got.Results) != 1 || got.Results[0].Origin.Palace != "both" || got.Edge["merged"] != true {
		t.Errorf("merged answer: %+v", got)
	}
}

// A merged diary read orders entries by the instant they were written,
// whatever form their timestamps take: MemPalace 3.11 writes the local
// time of the palace's machine without an offset (datetime.now()), 3.12
// writes it with a UTC offset. On an edge whose machine is two hours
// east of UTC, a local 3.11 entry written at 05:00 (03:00 UTC) is older
// than a 3.12 primary's entry of 04:00+00:00, and a +02:00 entry of
// 05:30 (03:30 UTC) sits between them. Comparing the strings puts the
// local entry first.
func TestMergeDiaryOrdersTimestampsWithAndWithoutOffsets(t *testing.T) {
	t.Parallel()
	east := time.FixedZone("east", 2*3600)
	entry := func(ts, content string) any {
		return map[string]any{"timestamp": ts, "content": content, "topic": "general"}
	}
	local := map[string]any{"agent": "pi", "entries": []any{
		entry("2026-12-02T05:00:00.000000", "local, 03:00 UTC"),
		entry("2026-12-02T01:15:00.250000", "local, 23:15 UTC the day before"),
	}, "total": 2.0}
	primary := map[string]any{"agent": "pi", "entries": []any{
		entry("2026-12-02T04:00:00.000000+00:00", "primary, 04:00 UTC"),
		entry("2026-12-02T05:30:00+02:00", "primary, 03:30 UTC"),
		entry("2026-12-01T23:30:00Z", "primary, 23:30 UTC the day before"),
	}, "total": 3.0}
	got := mergeDiary(local, primary, 10, east, marks{})
	var order []string
	for _, e := range got["entries"].([]any) {
		order = append(order, e.(map[string]any)["content"].(string))
	}
	want := []string{"primary, 04:00 UTC", "primary, 03:30 UTC", "local, 03:00 UTC", "primary, 23:30 UTC the day before", "local, 23:15 UTC the day before"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("merged, newest first:\n got %q\nwant %q", order, want)
	}
	if two := mergeDiary(local, primary, 2, east, marks{})["entries"].([]any); len(two) != 2 || two[1].(map[string]any)["content"] != "primary, 03:30 UTC" {
		t.Errorf("last_n 2 keeps the two newest: %v", two)
	}
}

// A merged list_drawers pages the union of both palaces, sorted by id as
// MemPalace sorts, a drawer both hold once (palace "both"); an offset out
// of range gives an empty page, never a crash.
func TestMergeDrawersPagesTheUnion(t *testing.T) {
	t.Parallel()
	d := func(id, palace string) any {
		return map[string]any{"drawer_id": id, "origin": map[string]any{"device": "x", "palace": palace}}
	}
	lm := map[string]any{"drawers": []any{d("d3", "local"), d("d1", "local")}, "total": float64(2)}
	pm := map[string]any{"drawers": []any{d("d2", "primary"), d("d3", "primary"), d("d4", "primary")}, "total": float64(3)}
	ids := func(m map[string]any) (out []string) {
		for _, x := range m["drawers"].([]any) {
			r := x.(map[string]any)
			out = append(out, r["drawer_id"].(string)+"/"+r["origin"].(map[string]any)["palace"].(string))
		}
		return out
	}
	got := mergeDrawers(lm, pm, 1, 2, nil)
	if s := fmt.Sprint(ids(got)); s != "[d2/primary d3/both]" || got["count"] != 2 || got["total"] != float64(4) {
		t.Errorf("page 1+2 of the union: %v (count %v, total %v)", s, got["count"], got["total"])
	}
	if s := fmt.Sprint(ids(mergeDrawers(lm, pm, 0, 20, nil))); s != "[d1/local d2/primary d3/both d4/primary]" {
		t.Errorf("the whole union: %v", s)
	}
	for _, off := range []int{-1, 4, 99} {
		if got := mergeDrawers(lm, pm, off, 20, nil); off >= 0 && len(got["drawers"].([]any)) != 0 {
			t.Errorf("offset %d past the end: %v", off, got["drawers"])
		}
	}
}

// With one palace failing, a list_drawers answer is the page the agent
// asked for from the palace that answered, marked degraded: not the
// widened page (from the first drawer to the end of the requested page)
// the merge asks each side for. An agent paging with the primary down
// would otherwise see the first drawers again, and more than its limit.
func TestDegradedListDrawersIsTheRequestedPage(t *testing.T) {
	t.Parallel()
	contents := []string{"page one", "page two", "page three", "page four"}
	var ids []string
	for _, c := range contents {
		ids = append(ids, DrawerIDFor("w", "r", c))
	}
	sort.Strings(ids)
	check := func(t *testing.T, h *harness, palace string) {
		t.Helper()
		got, res := h.call("list_drawers", map[string]any{"wing": "w", "offset": 1, "limit": 2})
		var page []string
		ds, _ := got["drawers"].([]any)
		for _, d := range ds {
			page = append(page, fmt.Sprint(d.(map[string]any)["drawer_id"]))
		}
		if res.IsError || got["degraded"] != true || fmt.Sprint(page) != fmt.Sprint(ids[1:3]) ||
			got["count"] != 2.0 || got["offset"] != 1.0 || got["limit"] != 2.0 || got["total"] != 4.0 {
			t.Fatalf("offset 1, limit 2 of %v from the %s palace, degraded; got %s", ids, palace, mustJSON(got))
		}
		for _, d := range ds {
			if o := d.(map[string]any)["origin"].(map[string]any)["palace"]; o != palace {
				t.Errorf("drawer's origin palace %v, want %s", o, palace)
			}
		}
	}
	t.Run("primary down", func(t *testing.T) {
		h := start(t, harnessOpts{primaryDown: true})
		for _, c := range contents {
			h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": c})
		}
		check(t, h, "local")
	})
	t.Run("local down", func(t *testing.T) {
		h := start(t, harnessOpts{childEnv: []string{"FAKEPALACE_CRASH_ON=mempalace_list_drawers"}})
		for _, c := range contents {
			h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": c})
		}
		check(t, h, "primary")
	})
}

// A merged read does not wait for a local palace that is busy (mempalace-mcp
// answers one call at a time, and a mine takes minutes): once the primary
// has answered, the local half has the call timeout, then the answer is the
// primary's alone, marked degraded with the local palace's reason. The
// call timeout is the harness's 3 s, not 500 ms: it bounds the primary's
// answer too, and on a loaded machine (the race detector, two cores busy)
// the primary's dial took longer, so the read was the busy local
// palace's alone and waited its 120 s (the test's call gave up at 30 s).
func TestAMergedReadAnswersFromThePrimaryWhileTheLocalPalaceIsBusy(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_search=120000,mempalace_list_drawers=120000"}})
	h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})

	got, _ := h.call("search", map[string]any{"query": "fleet knows"})
	ed, _ := got["edge"].(map[string]any)
	if hits, _ := got["results"].([]any); len(hits) != 1 || palaceOf(hits[0]) != "primary" || got["degraded"] != true || ed["primary"] != "ok" || !strings.Contains(asString(ed["local"]), "busy") {
		t.Errorf("search with the local palace busy: %v, want the primary's hit, marked degraded, saying the local palace is busy", got)
	}
	got, _ = h.call("list_drawers", map[string]any{"wing": "w"})
	if ed, _ := got["edge"].(map[string]any); got["count"] != 1.0 || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") {
		t.Errorf("list_drawers with the local palace busy: %v, want the primary's drawer, marked degraded", got)
	}
}
