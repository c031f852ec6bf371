package edge

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// An agent pages through a merged list_drawers past MemPalace's cap of
// 100 drawers a call: 210 drawers across the two palaces (140 on each,
// 70 on both), asked 20 at a time, come back each exactly once, in id
// order, the pages at offsets 90, 100 and 150 full. With one palace down
// the other's 140 page the same way (degraded). Asked of each palace as
// one page of at most 100, a page past the 100th came back short or
// empty.
func TestListDrawersPagesPastOneHundred(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	const n = 210
	var localIDs, primaryIDs, union []string
	var primaryContents []string
	st := fakepalace.State{Drawers: map[string]*fakepalace.Drawer{}}
	for i := range n {
		content := fmt.Sprintf("drawer number %03d", i)
		id := DrawerIDFor("w", "r", content)
		union = append(union, id)
		if i%3 != 2 {
			localIDs = append(localIDs, id)
			st.Drawers[id] = &fakepalace.Drawer{ID: id, Wing: "w", Room: "r", Content: content, AddedBy: "mcp", FiledAt: "2026-12-01T10:00:00", Seq: int64(i + 1)}
		}
		if i%3 != 0 {
			primaryIDs = append(primaryIDs, id)
			primaryContents = append(primaryContents, content)
		}
	}
	st.NextSeq = n + 1
	for _, ids := range [][]string{localIDs, primaryIDs, union} {
		slices.Sort(ids)
	}
	// seededLocal is a local palace directory holding the local drawers.
	seededLocal := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "palace")
		b, err := json.Marshal(&st)
		if err == nil {
			err = os.MkdirAll(dir, 0o700)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "fakepalace.json"), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	seedPrimary := func(h *harness) {
		for _, c := range primaryContents {
			if r := h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": c}); r["success"] != true {
				t.Fatalf("add_drawer on the primary: %v", r)
			}
		}
	}
	t.Run("merged", func(t *testing.T) {
		h := start(t, harnessOpts{palace: seededLocal(t)})
		seedPrimary(h)
		walkDrawers(t, h, union, false)
		if n := len(h.primary.Dump().Drawers); n != len(primaryIDs) {
			t.Fatalf("the primary holds %d drawers, want its own %d", n, len(primaryIDs))
		}
		// An offset past any palace's end costs a page past each one's
		// last drawer, not offset/100 calls.
		calls := h.primary.Calls("mempalace_list_drawers")
		if got, res := h.call("list_drawers", map[string]any{"wing": "w", "offset": 1e12}); res.IsError || got["count"] != 0.0 || h.primary.Calls("mempalace_list_drawers")-calls != 2 {
			t.Errorf("offset 1e12: %s after %d calls to the primary", mustJSON(got), h.primary.Calls("mempalace_list_drawers")-calls)
		}
	})
	t.Run("primary down", func(t *testing.T) {
		h := start(t, harnessOpts{palace: seededLocal(t), primaryDown: true})
		walkDrawers(t, h, localIDs, true)
	})
	t.Run("local down", func(t *testing.T) {
		// Not installed, rather than crashing at each list_drawers: each
		// page would then wait out the restart's growing backoff (6 s).
		h := start(t, harnessOpts{child: []string{filepath.Join(t.TempDir(), "mempalace-mcp-not-installed")}})
		seedPrimary(h)
		walkDrawers(t, h, primaryIDs, true)
	})
}

// The same against real MemPalace 3.11 (mempalace-mcp as the local
// palace, mempalace serve as the primary, each capping limit at 100 and
// sorting by drawer_id): 160 drawers, 120 on each palace and 80 on both,
// paged 20 at a time, each once and in order; with the primary down the
// local palace's page at offset 100 (degraded).
func TestRealListDrawersPagesPastOneHundred(t *testing.T) {
	local, primary := realpalace.New(t), realpalace.New(t)
	var onLocal, onPrimary []realpalace.Call
	for i := range 160 {
		d := realpalace.Drawer("w", "r", fmt.Sprintf("drawer number %03d", i))
		if i%4 != 3 {
			onLocal = append(onLocal, d)
		}
		if i%4 != 0 {
			onPrimary = append(onPrimary, d)
		}
	}
	idsOf := func(answers []map[string]any) (ids []string) {
		for _, a := range answers {
			ids = append(ids, fmt.Sprint(a["drawer_id"]))
		}
		return ids
	}
	localIDs := func() []string {
		seeder, err := local.StartStdio()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { // the edge's child opens the palace next
			if err := seeder.Stop(); err != nil {
				t.Fatal(err)
			}
		}()
		return idsOf(seeder.Seed(t, onLocal...))
	}()
	srv := primary.Serve(t, testToken)
	union := slices.Compact(slices.Sorted(slices.Values(append(idsOf(srv.Seed(t, onPrimary...)), localIDs...))))
	slices.Sort(localIDs)
	if len(union) != 160 {
		t.Fatalf("%d drawers across the two palaces, want 160", len(union))
	}
	h := start(t, harnessOpts{realLocal: local, primaryURL: srv.URL, timeout: 30 * time.Second})
	walkDrawers(t, h, union, false)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	got, _ := h.call("list_drawers", map[string]any{"wing": "w", "offset": 100, "limit": 20})
	if ids := pageIDs(got); got["degraded"] != true || !slices.Equal(ids, localIDs[100:]) {
		t.Errorf("offset 100 with the primary down: %d drawers, degraded %v; want the local palace's last 20", len(ids), got["degraded"])
	}
}

// walkDrawers pages through wing w 20 at a time and checks each page is
// the next 20 of want (ids sorted), up to an empty page past the end.
func walkDrawers(t *testing.T, h *harness, want []string, degraded bool) {
	t.Helper()
	for offset := 0; offset <= len(want); offset += 20 {
		got, res := h.call("list_drawers", map[string]any{"wing": "w", "offset": offset, "limit": 20})
		ids, wantPage := pageIDs(got), page(want, offset, 20)
		if res.IsError || !slices.Equal(ids, wantPage) || got["count"] != float64(len(wantPage)) || (got["degraded"] == true) != degraded {
			t.Fatalf("offset %d, limit 20 of %d drawers (degraded %v): got %d drawers (%d of them the right ones), count %v, degraded %v",
				offset, len(want), degraded, len(ids), len(slices.DeleteFunc(ids, func(id string) bool { return !slices.Contains(wantPage, id) })), got["count"], got["degraded"])
		}
		// An agent pages until offset reaches total: total never says
		// fewer drawers than there are, and is exact on the last page.
		if tot, _ := got["total"].(float64); tot < float64(len(want)) || offset+20 >= len(want) && tot != float64(len(want)) {
			t.Fatalf("offset %d of %d drawers (degraded %v): total %v; an agent paging by it stops at %v", offset, len(want), degraded, got["total"], got["total"])
		}
	}
}

// pageIDs is the drawer_id of each drawer of a list_drawers answer.
func pageIDs(answer map[string]any) (ids []string) {
	ds, _ := answer["drawers"].([]any)
	for _, d := range ds {
		ids = append(ids, fmt.Sprint(d.(map[string]any)["drawer_id"]))
	}
	return ids
}
