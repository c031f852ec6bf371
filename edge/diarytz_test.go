package edge

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// primaryIn is a primary whose MemPalace writes its naive timestamps in a
// zone off hours from the edge's (a server in UTC, a devbox in Tokyo or
// New York; or a clock that is off).
func primaryIn(t *testing.T, hours int, release string) (*fakepalace.Palace, *fakepalace.HTTPServer) {
	t.Helper()
	_, off := time.Now().Zone()
	zone := time.FixedZone(fmt.Sprintf("local%+dh", hours), off+hours*3600)
	return testbed.Primary(t, fakepalace.Options{Dir: t.TempDir(), Version: release, Now: func() time.Time { return time.Now().In(zone) }}, fakepalace.HTTPOptions{Token: testToken})
}

func diaryCopies(pl *fakepalace.Palace, text string) int {
	n := 0
	for _, d := range pl.Dump().Drawers {
		if d.Diary && d.Content == text {
			n++
		}
	}
	return n
}

func diaryCount(h *harness, agent, text string, lastN int) int {
	m, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": lastN})
	n := 0
	es, _ := m["entries"].([]any)
	for _, e := range es {
		if en, _ := e.(map[string]any); en["content"] == text {
			n++
		}
	}
	return n
}

func statusOf(t *testing.T, palace, url string) Remaining {
	t.Helper()
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := NewPrimary(url, func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
	defer p.Close()
	r, err := CheckTombstones(context.Background(), s, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A diary entry deleted on a device whose zone (or clock) differs from the
// primary's stays hidden, and the same text written again shows once:
// the primary's stamps are its own naive local time and are never
// compared with the device's (found by an outside tester with a devbox
// in Asia/Tokyo and one in America/New_York, the primary in UTC).
func TestADeletedDiaryEntryStaysHiddenAcrossTimezones(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hours   int
		release string
	}{{-9, ""}, {5, ""}, {-9, "3.12.0"}, {5, "3.12.0"}} {
		t.Run(fmt.Sprintf("primary %+dh %s", c.hours, c.release), func(t *testing.T) {
			primary, srv := primaryIn(t, c.hours, c.release)
			palace := filepath.Join(t.TempDir(), "palace")
			const agent, text = "me", "diary tz: decided to ship"
			t.Run("edge", func(t *testing.T) {
				h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
				w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
				id, _ := w["entry_id"].(string)
				h.eventually("the entry on the primary", func() bool { return diaryCopies(primary, text) == 1 })
				deleteAndRewriteDiary(h, primary, agent, text, id)
			})
			r := statusOf(t, palace, srv.URL())
			if got := strings.Join(r.OnPrimary, "\n"); len(r.OnPrimary) != 1 || !strings.Contains(got, "diary entry of me") {
				t.Fatalf("edge status names on the primary: %q, want the deleted entry's copy once", r.OnPrimary)
			}
		})
	}
}

// Offline, the same text written twice and one of the two deleted: the
// kept one's copy, the primary's only, is not named by edge status (an
// operator following it deleted the entry the user kept, on every
// device), and merged reads show the text once.
func TestEdgeStatusDoesNotNameTheKeptEntrysCopy(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	srv.Stop()
	palace := filepath.Join(t.TempDir(), "palace")
	const agent, text = "me", "diary twice: standup"
	t.Run("edge", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
		first, _ := w["entry_id"].(string)
		time.Sleep(2 * time.Millisecond)
		h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": first}); m["success"] != true {
			t.Fatalf("deleting one of the two: %v", m)
		}
		if err := srv.Start(srv.Addr()); err != nil {
			t.Fatal(err)
		}
		h.eventually("the kept entry on the primary", func() bool { return diaryCopies(primary, text) == 1 })
		if n := diaryCount(h, agent, text, 50); n != 1 {
			t.Fatalf("diary_read shows the text %d times, want 1", n)
		}
	})
	if r := statusOf(t, palace, srv.URL()); len(r.OnPrimary) != 0 {
		t.Fatalf("edge status names the kept entry's copy: %q", r.OnPrimary)
	}
}

// Hidden records do not eat the page: a fresh devbox that deleted the
// newest diary entry and the first drawer still gets last_n=1 and limit=1
// of what remains (found by an outside tester: an empty page, count 0
// with total 1).
func TestHiddenRecordsDoNotEatThePage(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	const agent, older, newest = "me", "older entry", "newest entry"
	w := start(t, harnessOpts{primaryURL: srv.URL()})
	w.call("diary_write", map[string]any{"agent_name": agent, "entry": older})
	time.Sleep(2 * time.Millisecond)
	w.call("diary_write", map[string]any{"agent_name": agent, "entry": newest})
	a, b := DrawerIDFor("notes", "r", "note a"), DrawerIDFor("notes", "r", "note b")
	w.call("add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "note a"})
	w.call("add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "note b"})
	first, kept := min(a, b), max(a, b)
	w.eventually("all on the primary", func() bool {
		return diaryCopies(primary, older)+diaryCopies(primary, newest) == 2 && primary.Dump().Drawers[kept] != nil && primary.Dump().Drawers[first] != nil
	})
	var newestID string
	for id, d := range primary.Dump().Drawers {
		if d.Content == newest {
			newestID = id
		}
	}
	h := start(t, harnessOpts{primaryURL: srv.URL()})
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": newestID}); m["edge"] == nil {
		t.Fatalf("deleting the newest entry: %v", m)
	}
	m, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 1})
	if s := mustJSON(m["entries"]); !strings.Contains(s, older) || strings.Contains(s, newest) {
		t.Fatalf("diary_read last_n=1 after hiding the newest: %v", m)
	}
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": first}); m["edge"] == nil {
		t.Fatalf("deleting a note: %v", m)
	}
	m, _ = h.call("list_drawers", map[string]any{"wing": "notes", "limit": 1})
	ds, _ := m["drawers"].([]any)
	if len(ds) != 1 || !strings.Contains(mustJSON(ds), kept) || m["count"] != float64(1) {
		t.Fatalf("list_drawers limit=1 after hiding one: %v", m)
	}
}

// A diary entry written through a checkpoint, sent, then deleted: its
// copy on the primary is named by the timestamp the primary's checkpoint
// answer gave its diary (its "diary" object), found by the op the outbox
// noted for the entry (the op a delete before the send cancels), so it
// stays hidden whatever the primary's zone; the same text written again
// shows once, and edge status names the deleted entry's copy alone.
func TestADeletedCheckpointDiaryEntryStaysHidden(t *testing.T) {
	t.Parallel()
	primary, srv := primaryIn(t, -9, "")
	palace := filepath.Join(t.TempDir(), "palace")
	const agent, text = "me", "checkpoint diary tz: shipped it"
	t.Run("edge", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		r, _ := h.call("checkpoint", map[string]any{"items": []any{
			map[string]any{"wing": "notes", "room": "cp", "content": "checkpoint tz item"},
		}, "diary": map[string]any{"agent_name": agent, "entry": text}})
		d, _ := r["diary"].(map[string]any)
		id, _ := d["entry_id"].(string)
		if id == "" {
			t.Fatalf("checkpoint answered no diary entry id: %v", r)
		}
		h.eventually("the entry on the primary", func() bool { return diaryCopies(primary, text) == 1 })
		h.drained()
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
			t.Fatalf("deleting the entry: %v", m)
		}
		if n := diaryCount(h, agent, text, 50); n != 0 {
			t.Fatalf("diary_read after the delete shows the checkpoint's entry %d times, want 0", n)
		}
		h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
		h.eventually("the rewrite on the primary", func() bool { return diaryCopies(primary, text) == 2 })
		if n := diaryCount(h, agent, text, 50); n != 1 {
			t.Fatalf("diary_read after writing the same text again shows it %d times, want 1", n)
		}
	})
	r := statusOf(t, palace, srv.URL())
	if got := strings.Join(r.OnPrimary, "\n"); len(r.OnPrimary) != 1 || !strings.Contains(got, "diary entry of me") {
		t.Fatalf("edge status names on the primary: %q, want the deleted entry's copy once", r.OnPrimary)
	}
}
