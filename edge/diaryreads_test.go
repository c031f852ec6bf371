package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// recordsOf is the records of m's list at key that hold text (in
// "content", "text" or "content_preview"), each as "palace id-or-time".
func recordsOf(m map[string]any, key, text string) []string {
	xs, _ := m[key].([]any)
	var out []string
	for _, x := range xs {
		r, _ := x.(map[string]any)
		if r["content"] != text && r["text"] != text && r["content_preview"] != text {
			continue
		}
		o, _ := r["origin"].(map[string]any)
		out = append(out, fmt.Sprintf("%v %v", o["palace"], r["drawer_id"]))
	}
	return out
}

// deletedEntryHidden fails the test if a merged read through h shows
// the diary entry of agent with text (its copy on the primary, under
// another id than the deleted local one), in any read: search,
// list_drawers, check_duplicate and diary_read.
func deletedEntryHidden(t *testing.T, h *harness, agent, text string) {
	t.Helper()
	m, _ := h.call("search", map[string]any{"query": text, "limit": 10})
	if got := recordsOf(m, "results", text); len(got) != 0 {
		t.Errorf("search shows the deleted diary entry: %v", got)
	}
	m, _ = h.call("list_drawers", map[string]any{"wing": catalogue.DiaryWingOf(agent), "limit": 100})
	if got := recordsOf(m, "drawers", text); len(got) != 0 {
		t.Errorf("list_drawers shows the deleted diary entry: %v", got)
	}
	m, _ = h.call("check_duplicate", map[string]any{"content": text, "threshold": 0.9})
	if s := mustJSON(m["matches"]); strings.Contains(s, text) || m["is_duplicate"] != false {
		t.Errorf("check_duplicate matches the deleted diary entry: %v", m)
	}
	m, _ = h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 50})
	if s := mustJSON(m["entries"]); strings.Contains(s, text) {
		t.Errorf("diary_read shows the deleted diary entry: %s", s)
	}
}

// A diary entry this device wrote and deleted (not sent: the primary is
// no gateway) stays hidden from every merged read, not from diary_read
// alone: its copy on the primary has another id (the primary's
// timestamp), which the tombstone names by that timestamp. Before,
// search, list_drawers and check_duplicate showed the copy, palace
// primary (attack99 F6).
func TestADeletedDiaryEntrysCopyIsHiddenFromEveryRead(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent, text = "me", "kill test three, a line to delete"
	w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
	id, _ := w["entry_id"].(string)
	h.eventually("the entry on the primary", func() bool { return diaryCopies(h.primary, text) == 1 })
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
		t.Fatalf("delete_drawer: %v", m)
	}
	deletedEntryHidden(t, h, agent, text)
	// Another entry of the same agent stays in every read.
	h.call("diary_write", map[string]any{"agent_name": agent, "entry": "kill test four, a line to keep"})
	h.drained()
	m, _ := h.call("search", map[string]any{"query": "kill test four, a line to keep", "limit": 10})
	if got := recordsOf(m, "results", "kill test four, a line to keep"); len(got) != 1 {
		t.Errorf("search shows the entry kept as %v, want one record", got)
	}
}

// A diary entry edited through the edge, the edit on the primary too, is
// one record in list_drawers, palace both, under the local id, as
// diary_read and search show it. Before, list_drawers listed it twice:
// the local id (palace local) and its copy's (palace primary) (attack99
// F6).
func TestListDrawersShowsAnEditedDiaryEntryOnce(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent, edited = "me", "kill test two EDITED"
	w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": "kill test two"})
	id, _ := w["entry_id"].(string)
	h.drained()
	if m, _ := h.call("update_drawer", map[string]any{"drawer_id": id, "content": edited}); m["success"] != true {
		t.Fatalf("update_drawer: %v", m)
	}
	h.drained()
	h.eventually("the edit on the primary", func() bool { return diaryCopies(h.primary, edited) == 1 })
	m, _ := h.call("list_drawers", map[string]any{"wing": catalogue.DiaryWingOf(agent), "limit": 100})
	if got := recordsOf(m, "drawers", edited); len(got) != 1 || got[0] != "both "+id {
		t.Errorf("list_drawers shows the edited entry as %v, want one record, palace both, under %s", got, id)
	}
	if m["total"] != float64(1) {
		t.Errorf("list_drawers' total is %v, want 1", m["total"])
	}
}

// A diary entry updated then deleted while the primary is down: the
// delete cancels the update, so the primary's copy keeps the old text.
// Once the primary is back, diary_read does not show that copy, and edge
// status lists it ON PRIMARY by the text the primary holds. Before,
// the tombstone matched by the edited text, which the primary never got:
// the copy came back, and status named no line for it (attack99 F10).
func TestAnEntryEditedThenDeletedOfflineStaysHidden(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	palace := filepath.Join(t.TempDir(), "palace")
	const agent, old, edited = "me", "first words kept", "rewritten fully"
	var id string
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": old})
		id, _ = w["entry_id"].(string)
		h.drained()
	})
	srv.Stop()
	t.Run("edited and deleted offline", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		if m, _ := h.call("update_drawer", map[string]any{"drawer_id": id, "content": edited}); m["success"] != true {
			t.Fatalf("update_drawer: %v", m)
		}
		if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
			t.Fatalf("delete_drawer: %v", m)
		}
	})
	if err := srv.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Run("back online", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		m, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10})
		if s := mustJSON(m["entries"]); strings.Contains(s, old) || strings.Contains(s, edited) {
			t.Errorf("diary_read shows the deleted entry: %s", s)
		}
		deletedEntryHidden(t, h, agent, old)
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
		if err != nil || len(r.OnPrimary) != 1 || !strings.Contains(got, fmt.Sprintf("%q", old)) || strings.Contains(got, edited) {
			t.Fatalf("edge status's ON PRIMARY: %q (%+v, %v), want one line naming the primary's text %q", got, r, err, old)
		}
	})
}

// localDiaryWrite writes a diary entry straight into h's local palace, as
// a solitary session on the same palace does: no op in the outbox.
func localDiaryWrite(t *testing.T, h *harness, agent, text string) {
	t.Helper()
	c := newCall(&mcp.CallToolParams{Name: catalogue.Prefix + "diary_write", Arguments: map[string]any{"agent_name": agent, "entry": text}})
	if _, ok := usable(h.edge.localServer.Call(context.Background(), c.params)); !ok {
		t.Fatal("the local palace did not take the diary entry")
	}
}

// A diary entry written into the local palace with no edge (a solitary
// session: no op ever sent it) is a record of its own in a merged
// diary_read and search, palace local, beside the same line another
// palace wrote to the primary (palace primary). Before, the two were
// paired by text as one entry, palace both, with the other's time
// (attack99 F5). An entry a write of the outbox's sent (as join queues
// one, noted for no entry) still pairs by text.
func TestANeverSentDiaryEntryIsNotPairedByText(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent, text, joined = "me", "standup: blocked on review", "standup: joined later"
	localDiaryWrite(t, h, agent, text)
	other := NewPrimary(h.srv.URL(), func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 5 * time.Second})
	defer other.Close()
	if res, err := FlushTarget(other).Call(context.Background(), "mempalace_diary_write", []byte(`{"agent_name":"me","entry":"`+text+`"}`)); err != nil || res["success"] != true {
		t.Fatalf("the other palace's diary_write: %v %v", res, err)
	}
	d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10})
	var palaces []string
	es, _ := d["entries"].([]any)
	for _, x := range es {
		if en, _ := x.(map[string]any); en["content"] == text {
			o, _ := en["origin"].(map[string]any)
			palaces = append(palaces, fmt.Sprint(o["palace"]))
		}
	}
	if strings.Join(palaces, " ") != "primary local" && strings.Join(palaces, " ") != "local primary" {
		t.Errorf("diary_read shows the line as %v, want two records: this palace's (local) and the other's (primary)", palaces)
	}
	s, _ := h.call("search", map[string]any{"query": text, "limit": 10})
	if got := recordsOf(s, "results", text); len(got) != 2 {
		t.Errorf("search shows the line as %v, want two records", got)
	}

	localDiaryWrite(t, h, agent, joined)
	if _, err := h.edge.outbox.Enqueue(context.Background(), outbox.Write{Name: catalogue.Prefix + "diary_write", Payload: []byte(`{"agent_name":"me","entry":"` + joined + `"}`), Wing: catalogue.DiaryWingOf(agent)}); err != nil {
		t.Fatal(err)
	}
	h.drained()
	d, _ = h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10})
	palaces = nil
	es, _ = d["entries"].([]any)
	for _, x := range es {
		if en, _ := x.(map[string]any); en["content"] == joined {
			o, _ := en["origin"].(map[string]any)
			palaces = append(palaces, fmt.Sprint(o["palace"]))
		}
	}
	if strings.Join(palaces, " ") != "both" {
		t.Errorf("diary_read shows an entry a join-like write sent as %v, want one record, palace both", palaces)
	}
}

// A diary entry written with the edge bypassed and then sent by join
// (its op done in the join outbox beside the edge's, naming the copy the
// primary filed) is one entry, palace both, in diary_read, search and
// list_drawers. Before, the never-sent rule looked in the edge's outbox
// alone: the entry and its copy showed as two, local and primary
// (attack102 F2).
func TestAnEntryJoinSentIsOneEntryInEveryRead(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent, text = "me", "standup: joined from a solitary session"
	localDiaryWrite(t, h, agent, text)
	js, err := outbox.Open(filepath.Join(h.palace, "edge", "join-outbox-0123456789ab.sqlite"), "dev", "join")
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"agent_name":"me","entry":"` + text + `","wing":"` + catalogue.DiaryWingOf(agent) + `"}`)
	if _, err := js.Enqueue(context.Background(), outbox.Write{Name: catalogue.Prefix + "diary_write", Payload: payload, Wing: catalogue.DiaryWingOf(agent), Ordinal: 1}); err != nil {
		t.Fatal(err)
	}
	// Read while the join's write is queued (the join outbox as read
	// then is not what is read after it landed).
	if d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10}); len(recordsOf(d, "entries", text)) != 1 {
		t.Errorf("diary_read before the join sent the entry: %v", d["entries"])
	}
	p := NewPrimary(h.srv.URL(), func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 5 * time.Second})
	defer p.Close()
	if sent, err := (&outbox.Flusher{S: js, P: FlushTarget(p), Log: slog.New(slog.DiscardHandler)}).Drain(context.Background()); sent != 1 || err != nil {
		t.Fatalf("the join's send: %d sent, %v", sent, err)
	}
	js.Close()
	d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10})
	if got := recordsOf(d, "entries", text); len(got) != 1 || !strings.HasPrefix(got[0], "both") {
		t.Errorf("diary_read shows the joined entry as %v, want one record, palace both", got)
	}
	s, _ := h.call("search", map[string]any{"query": text, "limit": 10})
	if got := recordsOf(s, "results", text); len(got) != 1 || !strings.HasPrefix(got[0], "both") {
		t.Errorf("search shows the joined entry as %v, want one record, palace both", got)
	}
	l, _ := h.call("list_drawers", map[string]any{"wing": catalogue.DiaryWingOf(agent), "limit": 100})
	if got := recordsOf(l, "drawers", text); len(got) != 1 || !strings.HasPrefix(got[0], "both") {
		t.Errorf("list_drawers shows the joined entry as %v, want one record, palace both", got)
	}
}

// A diary_read without a wing reads the agent's diary wing on both
// halves, as a gateway pins the primary's: an entry the agent wrote to a
// project wing is in neither. Before, the local half read every wing and
// showed it, palace local, though the primary held it (attack99 F8).
func TestADiaryReadWithoutAWingReadsTheDiaryWingOnBothHalves(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	h.call("diary_write", map[string]any{"agent_name": "me", "wing": "proj_b", "entry": "project wing diary line"})
	h.call("diary_write", map[string]any{"agent_name": "me", "entry": "own wing diary line"})
	h.drained()
	d, _ := h.call("diary_read", map[string]any{"agent_name": "me", "last_n": 4})
	s := mustJSON(d["entries"])
	if strings.Contains(s, "project wing diary line") || !strings.Contains(s, "own wing diary line") {
		t.Errorf("diary_read without a wing: %s, want the diary wing's entry alone", s)
	}
	if d["total"] != float64(1) {
		t.Errorf("diary_read's total is %v, want 1 (the diary wing's)", d["total"])
	}
	d, _ = h.call("diary_read", map[string]any{"agent_name": "me", "wing": "proj_b"})
	if got := recordsOf(d, "entries", "project wing diary line"); len(got) != 1 || !strings.HasPrefix(got[0], "both") {
		t.Errorf("diary_read of the project wing shows its entry as %v, want one, palace both", got)
	}
}

// downProxy stands in front of target and passes every request on
// until down is set; from then on it drops each connection unanswered,
// as a primary that went away.
func downProxy(t *testing.T, target string) (string, *atomic.Bool) {
	t.Helper()
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if down.Load() {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close() // no answer at all
			}
			return
		}
		passOn(w, r, target, body, nil)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", &down
}

// TestRealDeletedAndEditedDiaryEntriesInEveryRead is the diary reads of
// attack99 F6 and F10 against real MemPalace 3.11.0 (its ids are stamped
// by the instant whose timestamp diary_read gives), behind a gateway
// whose device desk may not delete there: a deleted entry's copy is
// hidden from search, list_drawers, check_duplicate and diary_read; an
// edited entry is one record in list_drawers; an entry edited then
// deleted while the primary is away stays hidden once it is back, and
// edge status names the copy by the text the primary holds.
func TestRealDeletedAndEditedDiaryEntriesInEveryRead(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	srv := realpalace.New(t).Serve(t, testToken)
	gw, tokens, _ := testGatewayServer(t, srv.URL, ownCopyDevices()...)
	url, down := downProxy(t, gw)
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: url, token: tokens["desk"], identity: "opencode@desk", timeout: 30 * time.Second})
	const agent, gone, edited, kept, rewritten = "opencode", "kill test three real", "kill test two real EDITED", "first words kept real", "rewritten fully real"
	onPrimary := func(text string) bool {
		page := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": agent, "last_n": 20})
		return strings.Contains(mustJSON(page["entries"]), fmt.Sprintf("%q", text))
	}
	ids := map[string]string{}
	for _, text := range []string{gone, "kill test two real", kept} {
		w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
		ids[text], _ = w["entry_id"].(string)
	}
	h.drained()
	waitFor(t, 30*time.Second, "the entries on the primary", func() bool { return onPrimary(gone) && onPrimary(kept) })

	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": ids[gone]}); m["success"] != true {
		t.Fatalf("delete_drawer: %v", m)
	}
	deletedEntryHidden(t, h, agent, gone)

	if m, _ := h.call("update_drawer", map[string]any{"drawer_id": ids["kill test two real"], "content": edited}); m["success"] != true {
		t.Fatalf("update_drawer: %v", m)
	}
	h.drained()
	waitFor(t, 30*time.Second, "the edit on the primary", func() bool { return onPrimary(edited) })
	m, _ := h.call("list_drawers", map[string]any{"wing": catalogue.DiaryWingOf(agent), "limit": 100})
	if got := recordsOf(m, "drawers", edited); len(got) != 1 || got[0] != "both "+ids["kill test two real"] {
		t.Errorf("list_drawers shows the edited entry as %v, want one record, palace both, under the local id", got)
	}

	// attack99 F8: a diary_read without a wing, pinned by the gateway
	// to wing_opencode, is pinned so on the local half too.
	h.call("diary_write", map[string]any{"agent_name": agent, "wing": "proj_real", "entry": "project wing diary line real"})
	h.drained()
	if d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10}); strings.Contains(mustJSON(d["entries"]), "project wing diary line real") {
		t.Errorf("diary_read without a wing shows the project wing's entry: %v", d["entries"])
	}
	// attack102 F3: a deleted long entry, a row per chunk on the
	// primary, does not thin the page: the two newest are both palaces'.
	long, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": strings.Repeat("a long real entry of four chunks. ", 80)})
	h.call("diary_write", map[string]any{"agent_name": agent, "entry": "newest real line"})
	h.drained()
	waitFor(t, 30*time.Second, "the newest on the primary", func() bool { return onPrimary("newest real line") })
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": long["entry_id"]}); m["success"] != true {
		t.Fatalf("delete_drawer of the long entry: %v", m)
	}
	if d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 2}); len(recordsOf(d, "entries", "newest real line")) != 1 || !slices.Equal(recordsOf(d, "entries", kept), []string{"both <nil>"}) {
		t.Errorf("diary_read last_n=2 after deleting a long entry: %v, want the newest and %q, palace both", d["entries"], kept)
	}
	// attack99 F5: a line written with the edge bypassed, and the same
	// line another palace of desk wrote, are two records.
	const solo = "standup: blocked on review real"
	localDiaryWrite(t, h, agent, solo)
	other := NewPrimary(gw, func() string { return tokens["desk"] }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 30 * time.Second})
	defer other.Close()
	if res, err := FlushTarget(other).Call(context.Background(), "mempalace_diary_write", []byte(`{"agent_name":"opencode","entry":"`+solo+`"}`)); err != nil || res["success"] != true {
		t.Fatalf("the other palace's diary_write: %v %v", res, err)
	}
	d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 10})
	var palaces []string
	for _, x := range d["entries"].([]any) {
		if en, _ := x.(map[string]any); en["content"] == solo {
			palaces = append(palaces, fmt.Sprint(en["origin"].(map[string]any)["palace"]))
		}
	}
	if len(palaces) != 2 || palaces[0] == palaces[1] || strings.Contains(strings.Join(palaces, " "), "both") {
		t.Errorf("diary_read shows the line as %v, want this palace's (local) and the other's (primary)", palaces)
	}

	down.Store(true)
	h.eventually("the primary seen down", func() bool {
		h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 1}) // a read finds it gone
		return !h.edge.remote.Up()
	})
	if m, _ := h.call("update_drawer", map[string]any{"drawer_id": ids[kept], "content": rewritten}); m["success"] != true {
		t.Fatalf("update_drawer offline: %v", m)
	}
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": ids[kept]}); m["success"] != true {
		t.Fatalf("delete_drawer offline: %v", m)
	}
	down.Store(false)
	waitFor(t, 30*time.Second, "the primary seen up", func() bool {
		h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 1}) // a read finds it back
		return h.edge.remote.Up()
	})
	if onPrimary(rewritten) || !onPrimary(kept) {
		t.Fatal("the cancelled update reached the primary, or its entry is gone there")
	}
	deletedEntryHidden(t, h, agent, kept)
	p := NewPrimary(url, func() string { return tokens["desk"] }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 10 * time.Second})
	defer p.Close()
	r, err := CheckTombstones(context.Background(), h.edge.outbox, p)
	got := strings.Join(r.OnPrimary, "\n")
	if err != nil || !strings.Contains(got, fmt.Sprintf("%q", kept)) || strings.Contains(got, rewritten) {
		t.Errorf("edge status's ON PRIMARY: %q (%+v, %v), want a line naming the primary's text %q", got, r, err, kept)
	}
}

// A merged diary_read of last_n N is the N newest entries this device
// sees, however many rows the entries it deleted had on the primary: a
// long entry is a row per chunk there, each hidden. Before, the primary
// was asked for N plus one row per deleted entry, the rest of its page
// was the deleted entry's chunks, and older local entries filled the gap
// while another palace's newer entries were left out (attack102 F3).
func TestADeletedLongEntryDoesNotThinTheDiaryPage(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent = "me"
	other := NewPrimary(h.srv.URL(), func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 5 * time.Second})
	defer other.Close()
	elsewhere := func(text string) {
		time.Sleep(2 * time.Millisecond)
		if res, err := FlushTarget(other).Call(context.Background(), "mempalace_diary_write", []byte(`{"agent_name":"me","entry":"`+text+`"}`)); err != nil || res["success"] != true {
			t.Fatalf("the other palace's diary_write: %v %v", res, err)
		}
	}
	here := func(text string) string {
		time.Sleep(2 * time.Millisecond)
		w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
		h.drained()
		id, _ := w["entry_id"].(string)
		return id
	}
	here("mine, oldest")
	elsewhere("theirs, first")
	elsewhere("theirs, second")
	long := here(strings.Repeat("a long entry of four chunks. ", 100))
	here("mine, newest")
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": long}); m["success"] != true {
		t.Fatalf("delete_drawer: %v", m)
	}
	d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 3})
	var got []string
	es, _ := d["entries"].([]any)
	for _, x := range es {
		en, _ := x.(map[string]any)
		got = append(got, fmt.Sprint(en["content"]))
	}
	if want := "mine, newest|theirs, second|theirs, first"; strings.Join(got, "|") != want {
		t.Errorf("diary_read last_n=3 after deleting a long entry shows %q, want %q", got, want)
	}
}

// A diary_read whose newest rows on the primary are all of entries this
// device deleted, past MemPalace's 100, says so: hidden_cut names the
// rows hidden and that the primary reads no further (attack102 F3).
func TestADiaryPageHiddenPastTheCapSaysSo(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	const agent = "me"
	w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": strings.Repeat("one hundred and two chunks ", 3000)})
	h.drained()
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": w["entry_id"]}); m["success"] != true {
		t.Fatalf("delete_drawer: %v", m)
	}
	d, _ := h.call("diary_read", map[string]any{"agent_name": agent, "last_n": 2})
	if cut, _ := d["hidden_cut"].(string); !strings.Contains(cut, "100 rows") || !strings.Contains(cut, "100 of records this device deleted") {
		t.Errorf("diary_read of a page only deleted rows fill says %q, want hidden_cut naming the 100 rows hidden: %v", cut, d)
	}
}
