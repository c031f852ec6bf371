package edge

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hiddenEverywhere fails the test if any merged read through h shows the
// deleted drawer (id, content) or the deleted diary entry (agent, text).
func hiddenEverywhere(t *testing.T, h *harness, when, id, content, agent, entry string) {
	t.Helper()
	m, _ := h.call("search", map[string]any{"query": content, "limit": 10})
	if s := mustJSON(m["results"]); strings.Contains(s, id) || strings.Contains(s, content) {
		t.Errorf("%s: search shows the deleted drawer: %s", when, s)
	}
	m, _ = h.call("list_drawers", map[string]any{"limit": 100})
	if s := mustJSON(m["drawers"]); strings.Contains(s, id) {
		t.Errorf("%s: list_drawers shows the deleted drawer: %s", when, s)
	}
	if m, _ = h.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != nil {
		t.Errorf("%s: get_drawer finds the deleted drawer: %v", when, m)
	}
	m, _ = h.call("check_duplicate", map[string]any{"content": content, "threshold": 0.5})
	if s := mustJSON(m["matches"]); strings.Contains(s, id) {
		t.Errorf("%s: check_duplicate matches the deleted drawer: %s", when, s)
	}
	m, _ = h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 50})
	if s := mustJSON(m["entries"]); strings.Contains(s, entry) {
		t.Errorf("%s: diary_read shows the deleted entry: %s", when, s)
	}
}

// A drawer and a diary entry deleted through an edge whose primary is no
// gateway (so the delete stays local, RFC 001 §4.2) never come back from
// the primary's side of a merged read: with the primary up and down,
// across a restart. edge status names what the primary still holds; a
// write of the same content lifts the tombstone.
func TestADeleteStaysDeleted(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	palace := filepath.Join(t.TempDir(), "palace")
	const content, entry, agent = "the staging password is hunter2, do not share", "decided: ship the poisoned build", "pi"
	id := DrawerIDFor("shared", "ops", content)
	var entryID string

	t.Run("delete", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
		w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": entry})
		entryID, _ = w["entry_id"].(string)
		h.eventually("both on the primary", func() bool {
			d := primary.Dump()
			return d.Drawers[id] != nil && len(d.Drawers) == 2
		})
		m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id})
		if ed, _ := m["edge"].(map[string]any); m["success"] != true || !strings.HasPrefix(asString(ed["replication"]), "local only") {
			t.Fatalf("delete_drawer: %v", m)
		}
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": entryID}); m["success"] != true {
			t.Fatalf("deleting the diary entry: %v", m)
		}
		if primary.Dump().Drawers[id] == nil {
			t.Fatal("a non-admin device's delete reached the primary")
		}
		hiddenEverywhere(t, h, "primary up", id, content, agent, entry)
	})
	t.Run("restarted", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		hiddenEverywhere(t, h, "after a restart", id, content, agent, entry)
	})
	t.Run("edge status", func(t *testing.T) {
		s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p := NewPrimary(srv.URL(), func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
		defer p.Close()
		r, err := CheckTombstones(context.Background(), s, p)
		got := strings.Join(r.OnPrimary, "\n")
		if err != nil || r.Total != 3 || r.Unchecked != "" || len(r.OnPrimary) != 2 || !strings.Contains(got, "drawer "+id) || !strings.Contains(got, "diary entry of pi") {
			t.Fatalf("what edge status says remains on the primary: %+v %v", r, err)
		}
	})
	srv.Stop()
	t.Run("primary down", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		hiddenEverywhere(t, h, "primary down", id, content, agent, entry)
		s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p := NewPrimary(srv.URL(), func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: time.Second})
		defer p.Close()
		if r, err := CheckTombstones(context.Background(), s, p); err != nil || r.Total != 3 || !strings.Contains(r.Unchecked, "could not ask the primary") {
			t.Fatalf("edge status with the primary down: %+v %v", r, err)
		}
	})
	if err := srv.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Run("recreated", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
		h.call("diary_write", map[string]any{"agent_name": agent, "entry": entry})
		if m, _ := h.call("search", map[string]any{"query": content, "limit": 10}); !strings.Contains(mustJSON(m["results"]), id) {
			t.Errorf("a recreated drawer stays hidden: %v", m)
		}
		if m, _ := h.call("diary_read", map[string]any{"agent_name": agent}); !strings.Contains(mustJSON(m["entries"]), entry) {
			t.Errorf("a rewritten diary entry stays hidden: %v", m)
		}
	})
}

// A delete_by_source hides the primary's drawers of that source (matched
// by file name, as MemPalace answers carry it); a dry run keeps nothing.
func TestADeleteBySourceHidesThePrimarysDrawers(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const src = "/home/me/notes/plan.md"
	h.call("add_drawer", map[string]any{"wing": "shared", "room": "plan", "content": "step one: migrate the schema", "source_file": src})
	h.eventually("on the primary", func() bool { return len(h.primary.Dump().Drawers) == 1 })
	if m, _ := h.call("delete_by_source", map[string]any{"source_file": src}); m["dry_run"] != true || m["edge"] != nil {
		t.Fatalf("a dry run: %v", m)
	}
	if m, _ := h.call("delete_by_source", map[string]any{"source_file": src, "dry_run": false}); m["success"] != true || m["edge"] == nil {
		t.Fatalf("delete_by_source: %v", m)
	}
	m, _ := h.call("search", map[string]any{"query": "migrate the schema", "limit": 10})
	if s := mustJSON(m["results"]); strings.Contains(s, "migrate") {
		t.Fatalf("search shows a deleted source's drawer: %s", s)
	}
	if m, _ := h.call("list_drawers", map[string]any{}); strings.Contains(mustJSON(m["drawers"]), "migrate") {
		t.Fatalf("list_drawers shows a deleted source's drawer: %v", m)
	}
	// The source filed again: the new drawer shows, on this device and
	// (once sent) from the primary too; the deleted one stays hidden. Before,
	// the write lifted the source's tombstone and the deleted drawer came
	// back in every merged read (outside tester, attack8 08).
	h.call("add_drawer", map[string]any{"wing": "shared", "room": "plan", "content": "step two: backfill", "source_file": src})
	h.eventually("the new drawer on the primary", func() bool { return len(h.primary.Dump().Drawers) == 2 })
	m, _ = h.call("search", map[string]any{"query": "migrate the schema backfill", "limit": 10})
	if s := mustJSON(m["results"]); strings.Contains(s, "migrate") || !strings.Contains(s, "backfill") {
		t.Fatalf("after the source is filed again, search shows %s: want the new drawer, not the deleted one", s)
	}
	if m, _ := h.call("list_drawers", map[string]any{}); strings.Contains(mustJSON(m["drawers"]), "migrate") || !strings.Contains(mustJSON(m["drawers"]), "backfill") {
		t.Fatalf("after the source is filed again, list_drawers shows %v: want the new drawer, not the deleted one", m)
	}
	if m, _ := h.call("list_drawers", map[string]any{}); !strings.Contains(mustJSON(m["drawers"]), `"palace":"both"`) {
		t.Errorf("the primary's copy of the new drawer is hidden by the source's tombstone: %v", m)
	}
	// The advice names the deleted drawer to delete by id: a
	// delete_by_source would take the new drawer too (outside tester,
	// attack10 14).
	oldID := DrawerIDFor("shared", "plan", "step one: migrate the schema")
	if r := statusOf(t, h.palace, h.srv.URL()); len(r.OnPrimary) != 1 || !strings.Contains(r.OnPrimary[0], "source "+src) ||
		!strings.Contains(r.OnPrimary[0], "delete_drawers") || !strings.Contains(r.OnPrimary[0], oldID) || strings.Contains(r.OnPrimary[0], "(delete_by_source") {
		t.Errorf("edge status after the source is filed again: %+v, want the deleted drawer's source still named on the primary, and its id to delete", r)
	}
}

// A drawer deleted before its add went out never reaches the primary,
// where this device (no admin) could not take it back: the unsent add is
// cancelled. Found by an outside tester, with a secret pasted by mistake
// while the primary was away and deleted at once: the next flush uploaded
// it for every device to read.
func TestADeleteBeforeTheAddWentOutCancelsIt(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	srv.Stop()
	h := start(t, harnessOpts{palace: filepath.Join(t.TempDir(), "palace"), primaryURL: srv.URL()})
	const secret, note = "api key sk-test-0123456789 pasted by mistake", "a note that stays"
	id := DrawerIDFor("shared", "ops", secret)
	h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": secret})
	m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if ed, _ := m["edge"].(map[string]any); m["success"] != true || !strings.Contains(asString(ed["cancelled"]), "1 add") {
		t.Fatalf("delete_drawer does not say the unsent add was cancelled: %v", m)
	}
	h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": note})
	if err := srv.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	noteID := DrawerIDFor("shared", "ops", note)
	h.eventually("the note on the primary", func() bool { return primary.Dump().Drawers[noteID] != nil })
	if primary.Dump().Drawers[id] != nil {
		t.Fatal("the drawer deleted before it was sent reached the primary")
	}
}

// A diary entry deleted on a device that may not delete on the primary
// stays deleted when the agent writes the same text again: merged reads
// show the new entry once, not the deleted one beside it (found by an
// outside tester: the rewrite lifted the tombstone, and the primary's copy
// of the deleted entry came back). A delete of the new entry hides it too.
func TestARewrittenDiaryEntryDoesNotBringBackTheDeletedOne(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent, text = "me", "standup: nothing new"
	diaryOnPrimary := func(n int) func() bool {
		return func() bool {
			k := 0
			for _, d := range h.primary.Dump().Drawers {
				if d.Diary {
					k++
				}
			}
			return k == n
		}
	}
	read := func() []map[string]any {
		m, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 50})
		var out []map[string]any
		es, _ := m["entries"].([]any)
		for _, e := range es {
			if en, ok := e.(map[string]any); ok && en["content"] == text {
				out = append(out, en)
			}
		}
		return out
	}

	w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
	old, _ := w["entry_id"].(string)
	h.eventually("the entry on the primary", diaryOnPrimary(1))
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": old}); m["success"] != true {
		t.Fatalf("deleting the entry: %v", m)
	}
	if es := read(); len(es) != 0 {
		t.Fatalf("diary_read after the delete shows %d entries: %v", len(es), es)
	}

	rewritten := time.Now()
	w, _ = h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
	fresh, _ := w["entry_id"].(string)
	h.eventually("the new entry on the primary beside the deleted one's copy", diaryOnPrimary(2))
	es := read()
	if len(es) != 1 {
		t.Fatalf("diary_read after writing the same text again shows %d entries, want 1 (the new one): %v", len(es), es)
	}
	ts, _ := es[0]["timestamp"].(string)
	o, _ := es[0]["origin"].(map[string]any)
	if at := entryTime(ts, time.Local); at.Before(rewritten.Add(-time.Millisecond)) || o["palace"] != "both" {
		t.Fatalf("diary_read shows %v, want the new entry (written at %s or later, in both palaces)", es[0], rewritten.Format(time.RFC3339Nano))
	}

	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": fresh}); m["success"] != true {
		t.Fatalf("deleting the new entry: %v", m)
	}
	if es := read(); len(es) != 0 {
		t.Fatalf("diary_read after deleting the new entry too shows %d entries: %v", len(es), es)
	}
}

// The same story while the primary is away: a diary entry deleted before
// it went out never reaches the primary (its unsent diary_write is
// cancelled, as an unsent add_drawer is), so once the primary is back the
// same text written again shows once, and the primary holds it once.
func TestADiaryEntryDeletedBeforeItWentOutNeverReachesThePrimary(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	srv.Stop()
	h := start(t, harnessOpts{palace: filepath.Join(t.TempDir(), "palace"), primaryURL: srv.URL()})
	const agent, text, later = "me", "the staging password is hunter2", "a later entry"
	w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
	old, _ := w["entry_id"].(string)
	m, _ := h.call("delete_drawer", map[string]any{"drawer_id": old})
	if ed, _ := m["edge"].(map[string]any); m["success"] != true || !strings.Contains(asString(ed["cancelled"]), "1 ") {
		t.Errorf("delete_drawer does not say the unsent diary_write was cancelled: %v", m)
	}
	h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
	h.call("diary_write", map[string]any{"agent_name": agent, "entry": later})
	if err := srv.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	onPrimary := func(content string) int {
		n := 0
		for _, d := range primary.Dump().Drawers {
			if d.Diary && d.Content == content {
				n++
			}
		}
		return n
	}
	h.eventually("the later entry on the primary (after the others: one diary, in order)", func() bool { return onPrimary(later) == 1 })
	if n := onPrimary(text); n != 1 {
		t.Fatalf("the primary holds the text %d times, want once (the deleted entry was sent)", n)
	}
	m, _ = h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 50})
	n := 0
	es, _ := m["entries"].([]any)
	for _, e := range es {
		if en, _ := e.(map[string]any); en["content"] == text {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("diary_read shows the text %d times, want once: %v", n, mustJSON(es))
	}
}

// edge status goes on past a look-up the primary answered with an error
// (that record is named as not checked, with the error); a primary that
// cannot be asked stops the check, which says how many it left.
func TestStatusGoesOnPastAnAnsweredError(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	palace := filepath.Join(t.TempDir(), "palace")
	h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
	var ids []string
	for _, c := range []string{"first note to delete", "second note to delete"} {
		h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": c})
		ids = append(ids, DrawerIDFor("shared", "ops", c))
	}
	h.eventually("both on the primary", func() bool { return len(primary.Dump().Drawers) == 2 })
	for _, id := range ids {
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
			t.Fatalf("delete_drawer %s: %v", id, m)
		}
	}
	srv.FailTool("mempalace_get_drawer", 1, fakepalace.FailInternal)
	r := statusOf(t, palace, srv.URL())
	if len(r.CheckErrors) != 1 || !strings.HasPrefix(r.CheckErrors[0], "drawer "+ids[0]+": not checked: ") || len(r.OnPrimary) != 1 || !strings.Contains(r.OnPrimary[0], ids[1]) || r.Unchecked != "" {
		t.Fatalf("edge status after an answered error: %+v", r)
	}
	srv.FailNext(10, fakepalace.FailReset)
	if r := statusOf(t, palace, srv.URL()); len(r.OnPrimary) != 0 || !strings.HasPrefix(r.Unchecked, "could not ask the primary, 2 not checked: ") {
		t.Fatalf("edge status with the primary failing: %+v", r)
	}
}

// edge status's ON PRIMARY line says where the record's delete for the
// primary stands: queued, or refused for good (its op DEAD, not sent
// again), or in doubt. Before, a dead delete still read "its delete is
// queued" (outside tester, attack8 10).
func TestOnPrimarySaysWhereItsDeleteStands(t *testing.T) {
	for _, c := range []struct {
		state     outbox.State
		want, not string
	}{
		{outbox.Queued, "its delete is queued: op 0123456789ab", "refused"},
		{outbox.Dead, "refused for good", "queued"},
		{outbox.InDoubt, "in doubt", "queued"},
	} {
		got := deleteStands(&outbox.Op{ID: "0123456789abcdef", State: c.state})
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("%s: %q, want %q and not %q", c.state, got, c.want, c.not)
		}
	}
	if got := deleteStands(nil); got != "" {
		t.Errorf("no delete queued: %q", got)
	}
}

// A drawer longer than one chunk that this device deleted (the delete
// local only: the primary is no gateway) is hidden from the primary's
// check_duplicate too, where MemPalace 3.11.0 names each match by its
// chunk's row, {drawer_id}_chunk_NNNNNN (attack97: search hid it, and
// check_duplicate still said is_duplicate with five of its chunks).
func TestADeletedLongDrawersChunkMatchesAreHidden(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	h := start(t, harnessOpts{primaryURL: srv.URL()})
	const content = "a long drawer that MemPalace files in many chunks"
	id := DrawerIDFor("shared", "ops", content)
	h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	h.call("delete_drawer", map[string]any{"drawer_id": id})
	h.eventually("the delete's tombstone", func() bool { return h.edge.tombstones(context.Background()).drawers[id] })
	answer := fmt.Sprintf(`{"is_duplicate": true, "matches": [{"id": "%s_chunk_000003", "wing": "shared", "room": "ops", "similarity": 0.9, "content": "x"}, {"id": "%s_chunk_000011", "wing": "shared", "room": "ops", "similarity": 0.8, "content": "y"}, {"id": "drawer_shared_ops_0123456789abcdef01234567_chunk_000001", "wing": "shared", "room": "ops", "similarity": 0.7, "content": "z"}]}`, id, id)
	res, _ := h.edge.hideTombstoned(context.Background(), catalogue.FilterMatches, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}})
	got := res.Content[0].(*mcp.TextContent).Text
	if strings.Contains(got, id) {
		t.Errorf("check_duplicate shows chunks of the deleted drawer: %s", got)
	}
	if !strings.Contains(got, "0123456789abcdef01234567_chunk_000001") {
		t.Errorf("check_duplicate lost another drawer's chunk: %s", got)
	}
}
