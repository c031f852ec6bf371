package edge

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRealAFreshDeviceReadsTheFleet is a devbox that joins a fleet with an
// empty local palace: real mempalace-mcp has no drawer collection yet and
// answers every drawer read with an error ("Chroma database missing"
// before its first search, "Backend open failed" after it, since a search
// creates the database file without the collection, and search itself
// "No palace found"). The fleet's memory must read as it is, not as
// degraded, and a shared drawer must be readable and deletable by id,
// before this device has written a drawer of its own.
func TestRealAFreshDeviceReadsTheFleet(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	shared := r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "the deploy key rotates on fridays"})
	r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "staging runs on the old cluster"})
	r.srv.MustCall(t, "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "a diary entry written elsewhere"})
	id := fmt.Sprint(shared["drawer_id"])

	notDegraded := func(when, tool string, m map[string]any) {
		t.Helper()
		if m["degraded"] != nil || m["error"] != nil {
			t.Errorf("%s: %s on a fresh device: %v", when, tool, m)
		}
	}
	// The first read is a search: it leaves the database file without a
	// collection, and every later read meets "Backend open failed".
	for i, when := range []string{"first search", "second search"} {
		m, _ := h.call("search", map[string]any{"query": "deploy key"})
		notDegraded(when, "search", m)
		if hits := hitsOf(t, m); len(hits) == 0 || hits[0]["drawer_id"] != id {
			t.Errorf("%s (%d): the primary's drawer is not the first hit: %v", when, i, m)
		}
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		list string
		want int
	}{
		{"list_drawers", map[string]any{"wing": "shared"}, "drawers", 2},
		{"list_drawers", map[string]any{}, "drawers", 3},
		{"diary_read", map[string]any{"agent_name": "pi"}, "entries", 1},
		{"check_duplicate", map[string]any{"content": "the deploy key rotates on fridays"}, "matches", 1},
	} {
		m, _ := h.call(c.tool, c.args)
		notDegraded("after a search", c.tool, m)
		if l, _ := m[c.list].([]any); len(l) != c.want {
			t.Errorf("%s %v: %d %s, want %d: %v", c.tool, c.args, len(l), c.list, c.want, m)
		}
	}
	if got, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); got["content"] != "the deploy key rotates on fridays" {
		t.Errorf("get_drawer of a shared drawer on a fresh device: %v", got)
	}
	// A delete of the shared drawer hides it here (this device may not
	// delete on the primary).
	if d, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); d["success"] != true && d["edge"] == nil {
		t.Errorf("delete_drawer of a shared drawer on a fresh device: %v", d)
	}
	if m, _ := h.call("list_drawers", map[string]any{"wing": "shared"}); len(m["drawers"].([]any)) != 1 {
		t.Errorf("after the delete, list_drawers still shows it: %v", m)
	}
	// The device's first own drawer: both palaces merge as always.
	h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "a note of this device"})
	m, _ := h.call("list_drawers", map[string]any{"wing": "shared"})
	notDegraded("after a local write", "list_drawers", m)
	if l, _ := m["drawers"].([]any); len(l) != 2 {
		t.Errorf("after a local write: %v", m)
	}
}

// TestRealAFreshDeviceDeletesUpdatesAndGoesOffline is a devbox with an
// empty local palace (real mempalace-mcp: "Backend open failed" after
// its first search) that deletes a shared drawer, updates another, and
// reads with the primary gone: a deleted match is no duplicate, get_drawer
// of it says this device's own delete hides it, the update reaches the primary, and the
// offline reads are empty and degraded (get_drawer of the primary's
// drawer: not answered, never "Drawer not found"), never MemPalace's advice to repair
// a palace that is merely new: the drawer reads, and the overview reads
// (list_wings, list_rooms, get_taxonomy, status) in the primary's shapes.
func TestRealAFreshDeviceDeletesUpdatesAndGoesOffline(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	gone := fmt.Sprint(r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "a shared kiwi note"})["drawer_id"])
	fix := fmt.Sprint(r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "staging runs on the old clutser"})["drawer_id"])
	h.call("search", map[string]any{"query": "kiwi"}) // the local palace now answers "Backend open failed"

	h.call("delete_drawer", map[string]any{"drawer_id": gone})
	if m, _ := h.call("check_duplicate", map[string]any{"content": "a shared kiwi note"}); m["is_duplicate"] != false || len(m["matches"].([]any)) != 0 {
		t.Errorf("check_duplicate of a deleted shared drawer: %v", m)
	}
	if m, res := h.call("get_drawer", map[string]any{"drawer_id": gone}); !strings.HasPrefix(fmt.Sprint(m["error"]), "hidden by this device's own delete: "+gone) || m["content"] != nil || res.IsError {
		t.Errorf("get_drawer of a deleted shared drawer: %v", m)
	}

	u, _ := h.call("update_drawer", map[string]any{"drawer_id": fix, "content": "staging runs on the old cluster"})
	if u["success"] != true || edgeOf(u)["replication"] != "queued (not in the local palace)" {
		t.Errorf("update_drawer of a shared drawer: %v", u)
	}
	waitFor(t, 30*time.Second, "the update on the primary", func() bool {
		return r.srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": fix})["content"] == "staging runs on the old cluster"
	})

	// The overview reads' shapes, as the primary (a palace with drawers)
	// answers them.
	overviews := map[string]map[string]any{}
	for _, tool := range []string{"list_wings", "list_rooms", "get_taxonomy", "status"} {
		overviews[tool] = r.srv.MustCall(t, "mempalace_"+tool, map[string]any{})
	}
	sameShape := func(tool string, m map[string]any) {
		t.Helper()
		for k, v := range m {
			if k != "degraded" && k != "edge" && fmt.Sprintf("%T", v) != fmt.Sprintf("%T", overviews[tool][k]) {
				t.Errorf("%s on a fresh device, the primary down: %s is %#v, the primary's %#v", tool, k, v, overviews[tool][k])
			}
		}
	}

	r.srv.Stop()
	for _, tool := range []string{"list_wings", "list_rooms", "get_taxonomy"} {
		m, res := h.call(tool, map[string]any{})
		if res.IsError || m["error"] != nil || m["degraded"] != true || edgeOf(m)["local"] != noDrawersYet {
			t.Errorf("%s on a fresh device, the primary down: %v", tool, m)
		}
		sameShape(tool, m)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		list string
	}{
		{"search", map[string]any{"query": "zebra"}, "results"},
		{"list_drawers", map[string]any{}, "drawers"},
		{"diary_read", map[string]any{"agent_name": "me"}, "entries"},
		{"check_duplicate", map[string]any{"content": "zebra"}, "matches"},
	} {
		m, res := h.call(c.tool, c.args)
		if l, ok := m[c.list].([]any); !ok || len(l) != 0 || res.IsError || m["degraded"] != true || edgeOf(m)["local"] != noDrawersYet {
			t.Errorf("%s on a fresh device, the primary down: %v", c.tool, m)
		}
	}
	if m, _ := h.call("get_drawer", map[string]any{"drawer_id": fix}); !strings.HasPrefix(fmt.Sprint(m["error"]), notAnsweredPrefix+fix) || m["degraded"] != true {
		t.Errorf("get_drawer on a fresh device, the primary down: %v", m)
	}
	graphReadsOffline(t, h, "after a search")
	reconnectsFresh(t, h, "after a search")
	// status last: real MemPalace creates the drawer collection of a
	// palace whose database file exists (this one's, since the search),
	// and answers it as it is, with its protocol.
	m, res := h.call("status", map[string]any{})
	if res.IsError || m["error"] != nil || m["degraded"] != true || m["total_drawers"] != 0.0 {
		t.Errorf("status on a fresh device, the primary down: %v", m)
	}
	sameShape("status", m)
}

// TestRealAFreshFleetReadsEmpty is a fleet's first minute: neither the
// device's palace nor the primary holds a drawer (real MemPalace answers
// "Chroma database missing" on both). Every drawer read answers as an
// empty palace does, not degraded, never MemPalace's advice to repair a
// palace that is merely new. A search leaves the primary's database file
// without a collection, "Backend open failed" to every later read (and
// "No palace found" to a search), which the edge cannot tell from a broken
// primary without its files: from then on until the first drawer reaches
// the primary, the reads answer empty and degraded, the primary's words
// in edge.primary, still never its advice (attack107 F1); and a
// delete_by_source dry run answers as for a source with no drawers (F2).
func TestRealAFreshFleetReadsEmpty(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	reads := []struct {
		tool string
		args map[string]any
		list string
	}{
		{"list_drawers", map[string]any{}, "drawers"},
		{"diary_read", map[string]any{"agent_name": "me"}, "entries"},
		{"check_duplicate", map[string]any{"content": "zebra"}, "matches"},
	}
	for _, c := range reads {
		m, res := r.harness.call(c.tool, c.args)
		if l, ok := m[c.list].([]any); !ok || len(l) != 0 || res.IsError || m["error"] != nil || m["degraded"] != nil || edgeOf(m)["primary"] != primaryNoDrawers {
			t.Errorf("%s on a fresh fleet: %v", c.tool, m)
		}
	}
	if m, _ := r.harness.call("delete_by_source", map[string]any{"source_file": "notes.md"}); m["dry_run"] != true || m["match_count"] != 0.0 || m["error"] != nil {
		t.Errorf("a delete_by_source dry run on a fresh fleet: %v", m)
	}
	overviews := func(when string) {
		t.Helper()
		for _, tool := range []string{"list_wings", "list_rooms", "get_taxonomy", "graph_stats", "find_tunnels"} {
			m, _ := r.harness.call(tool, map[string]any{})
			if all := fmt.Sprint(m); strings.Contains(all, "hint") || strings.Contains(all, "repair") || strings.Contains(all, "chroma.sqlite3") {
				t.Errorf("%s on a fresh fleet %s: %v", tool, when, m)
			}
		}
	}
	overviews("before a search") // attack109 F1
	for _, c := range append([]struct {
		tool string
		args map[string]any
		list string
	}{{"search", map[string]any{"query": "zebra"}, "results"}}, reads...) {
		m, res := r.harness.call(c.tool, c.args)
		if l, ok := m[c.list].([]any); !ok || len(l) != 0 || res.IsError || m["error"] != nil || m["hint"] != nil || m["degraded"] != true || !unopened(fmt.Sprint(edgeOf(m)["primary"])) {
			t.Errorf("%s on a fresh fleet after a search: %v", c.tool, m)
		}
	}
	overviews("after a search")
}

// graphReadsOffline checks the reads spanning wings of a device whose
// palace is new, the primary down: never MemPalace's advice to repair
// nor its path; its error for an unopened palace alone, degraded,
// edge.local "no drawers yet" (attack110 F1).
func graphReadsOffline(t *testing.T, h *harness, when string) {
	t.Helper()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"graph_stats", map[string]any{}},
		{"find_tunnels", map[string]any{}},
		{"traverse", map[string]any{"start_room": "r"}},
		{"follow_tunnels", map[string]any{"wing": "shared", "room": "r"}},
	} {
		m, _ := h.call(c.tool, c.args) // find_tunnels may answer [], traverse "Room 'r' not found": MemPalace's own
		all := fmt.Sprint(m)
		bad := strings.Contains(all, "hint") || strings.Contains(all, "repair") || strings.Contains(all, "chroma.sqlite3")
		if bad || unopened(asString(m["error"])) && (m["degraded"] != true || edgeOf(m)["local"] != noDrawersYet) {
			t.Errorf("%s on a fresh device %s, the primary down: %v", c.tool, when, m)
		}
	}
}

// TestRealAFreshDeviceOfflineReadsTheGraphEmpty is a devbox new to the
// fleet that starts with the primary down, before any search (real
// MemPalace: "Chroma database missing", with its advice to repair).
func TestRealAFreshDeviceOfflineReadsTheGraphEmpty(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	r.srv.Stop()
	graphReadsOffline(t, r.harness, "before a search")
	reconnectsFresh(t, r.harness, "before a search")
}

// reconnectsFresh checks reconnect on a device whose palace is new:
// MemPalace's words alone, edge.local "no drawers yet", never its advice
// to repair nor the palace's path (attack113 F6).
func reconnectsFresh(t *testing.T, h *harness, when string) {
	t.Helper()
	m, _ := h.call("reconnect", map[string]any{})
	all := fmt.Sprint(m)
	if strings.Contains(all, "hint") || strings.Contains(all, "repair") || strings.Contains(all, "chroma.sqlite3") ||
		m["success"] != true && edgeOf(m)["local"] != noDrawersYet {
		t.Errorf("reconnect on a fresh device %s: %v", when, m)
	}
}
