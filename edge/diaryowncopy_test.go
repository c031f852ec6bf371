package edge

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// ownCopyDevices are the two devices of the gateway in front of the
// primary: desk (the edge under test) and laptop (writing straight to the
// gateway), both with a diary agent opencode.
func ownCopyDevices() []gateway.Device {
	dev := func(id string) gateway.Device {
		return gateway.Device{ID: id, Label: id, Read: []string{"*"}, Write: []string{"*"}, KG: "write",
			Agents: []string{"opencode@" + id}, WriteRate: 10000, ReadRate: 10000}
	}
	return []gateway.Device{dev("desk"), dev("laptop")}
}

// diaryOwnCopy: desk writes a diary line, it reaches the primary, then
// laptop writes the same line (its copy on the primary is the newer).
// desk's search and diary_read must show its own entry once, palace both,
// with desk's origin, and laptop's as a record of its own, palace primary,
// with laptop's origin. Before, the local entry was paired with the
// newest copy of the text, laptop's: shown as laptop's (palace both), and
// desk's own copy showed apart as palace primary (outside tester,
// attack36 N1).
func diaryOwnCopy(t *testing.T, h *harness, url, laptopToken string, copies func() int) {
	t.Helper()
	const text = "Okapi beta line from somewhere."
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.ID == "desk" })
	w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text})
	id, _ := w["entry_id"].(string)
	if id == "" {
		t.Fatalf("diary_write: %v", w)
	}
	h.drained()
	waitFor(t, 30*time.Second, "desk's copy on the primary", func() bool { return copies() == 1 })
	laptop := NewPrimary(url, func() string { return laptopToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 30 * time.Second})
	defer laptop.Close()
	if res, err := FlushTarget(laptop).Call(context.Background(), "mempalace_diary_write", []byte(`{"agent_name":"opencode","entry":"`+text+`"}`)); err != nil || res["success"] != true {
		t.Fatalf("laptop's diary_write: %v %v", res, err)
	}
	waitFor(t, 30*time.Second, "laptop's copy on the primary", func() bool { return copies() == 2 })

	stamp, _, _ := catalogue.DiaryEntryID(id)
	want := map[string]bool{"both desk " + id: true, "both desk " + stamp: true, "primary laptop": true}
	// diary_read's entries have no id: the local one's timestamp is its id's.
	entryStamp := strings.NewReplacer("-", "", ":", "", ".", "", "T", "_")
	check := func(what string, recs []map[string]any, idOf func(map[string]any) string) {
		t.Helper()
		var got []string
		for _, r := range recs {
			if r["content"] != text && r["text"] != text {
				continue
			}
			o, _ := r["origin"].(map[string]any)
			s := fmt.Sprintf("%v %v", o["palace"], o["device"])
			if o["palace"] == "both" {
				s += " " + idOf(r)
			}
			got = append(got, s)
		}
		if len(got) != 2 || !want[got[0]] || !want[got[1]] || got[0] == got[1] {
			t.Errorf("%s shows the line as %q, want desk's entry %s as palace both, device desk, and laptop's as palace primary, device laptop", what, got, id)
		}
	}
	s, _ := h.call("search", map[string]any{"query": "okapi beta line somewhere", "limit": 5})
	check("search", hitsOf(t, s), func(r map[string]any) string { return fmt.Sprint(r["drawer_id"]) })
	d, _ := h.call("diary_read", map[string]any{"agent_name": "opencode", "last_n": 5})
	var entries []map[string]any
	es, _ := d["entries"].([]any)
	for _, x := range es {
		if e, ok := x.(map[string]any); ok {
			entries = append(entries, e)
		}
	}
	check("diary_read", entries, func(r map[string]any) string { return entryStamp.Replace(fmt.Sprint(r["timestamp"])) })
}

func TestADevicesDiaryEntryIsNotPairedWithAnotherDevicesCopy(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(), ownCopyDevices()...)
	h := start(t, harnessOpts{primaryURL: url, token: tokens["desk"], identity: "opencode@desk"})
	diaryOwnCopy(t, h, url, tokens["laptop"], func() int { return diaryCopies(primary, "Okapi beta line from somewhere.") })
}

// TestRealADevicesDiaryEntryIsNotPairedWithAnotherDevicesCopy is the same
// against real MemPalace 3.11.0: mempalace-mcp the local palace,
// mempalace serve the primary behind the gateway.
func TestRealADevicesDiaryEntryIsNotPairedWithAnotherDevicesCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	srv := realpalace.New(t).Serve(t, testToken)
	url, tokens, _ := testGatewayServer(t, srv.URL, ownCopyDevices()...)
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: url, token: tokens["desk"], identity: "opencode@desk", timeout: 30 * time.Second})
	diaryOwnCopy(t, h, url, tokens["laptop"], func() int {
		page := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "opencode", "last_n": 10})
		es, _ := page["entries"].([]any)
		return len(es)
	})
}

// diaryOwnCopyOfTwo: desk writes a diary line, it reaches the primary,
// then another palace of the same device (the fresh palace beside the
// desk one: the same device id, so the same origin) writes the same line;
// its copy on the primary is the newer. desk's search and diary_read
// must pair desk's entry with the copy its own write was answered with,
// and show the other palace's copy as a record of its own (palace
// primary). Before, the entry was paired with the newest copy of the
// text, the other palace's (its id and time), and desk's own copy showed
// apart as palace primary (outside tester, attack36 N1).
func diaryOwnCopyOfTwo(t *testing.T, h *harness, url, deskToken string, copies func() int) {
	t.Helper()
	const text = "Gnu gamma line shared text."
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.ID == "desk" })
	w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text})
	id, _ := w["entry_id"].(string)
	if id == "" {
		t.Fatalf("diary_write: %v", w)
	}
	h.drained()
	waitFor(t, 30*time.Second, "desk's copy on the primary", func() bool { return copies() == 1 })
	fresh := NewPrimary(url, func() string { return deskToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 30 * time.Second})
	defer fresh.Close()
	other, err := FlushTarget(fresh).Call(context.Background(), "mempalace_diary_write", []byte(`{"agent_name":"opencode","entry":"`+text+`"}`))
	if err != nil || other["success"] != true {
		t.Fatalf("the other palace's diary_write: %v %v", other, err)
	}
	waitFor(t, 30*time.Second, "the other palace's copy on the primary", func() bool { return copies() == 2 })

	stamp, _, _ := catalogue.DiaryEntryID(id)
	entryStamp := strings.NewReplacer("-", "", ":", "", ".", "", "T", "_")
	check := func(what string, recs []map[string]any, idOf func(map[string]any) string, otherID string) {
		t.Helper()
		var got []string
		for _, r := range recs {
			if r["content"] == text || r["text"] == text {
				o, _ := r["origin"].(map[string]any)
				got = append(got, fmt.Sprintf("%v %v", o["palace"], idOf(r)))
			}
		}
		slices.Sort(got)
		if want := []string{"both " + idOf(map[string]any{"drawer_id": id, "stamp": stamp}), "primary " + otherID}; !slices.Equal(got, want) {
			t.Errorf("%s shows the line as %q, want %q: desk's entry with its own copy (palace both), the other palace's copy apart (palace primary)", what, got, want)
		}
	}
	s, _ := h.call("search", map[string]any{"query": "gnu gamma line shared", "limit": 5})
	check("search", hitsOf(t, s), func(r map[string]any) string { return fmt.Sprint(r["drawer_id"]) }, fmt.Sprint(other["entry_id"]))
	d, _ := h.call("diary_read", map[string]any{"agent_name": "opencode", "last_n": 5})
	var entries []map[string]any
	es, _ := d["entries"].([]any)
	for _, x := range es {
		if e, ok := x.(map[string]any); ok {
			entries = append(entries, e)
		}
	}
	stampOf := func(r map[string]any) string {
		if st, ok := r["stamp"].(string); ok {
			return st
		}
		return entryStamp.Replace(fmt.Sprint(r["timestamp"]))
	}
	check("diary_read", entries, stampOf, entryStamp.Replace(fmt.Sprint(other["timestamp"])))
}

func TestADevicesDiaryEntryIsPairedWithItsOwnCopy(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(), ownCopyDevices()...)
	h := start(t, harnessOpts{primaryURL: url, token: tokens["desk"], identity: "opencode@desk"})
	diaryOwnCopyOfTwo(t, h, url, tokens["desk"], func() int { return diaryCopies(primary, "Gnu gamma line shared text.") })
}

// TestRealADevicesDiaryEntryIsPairedWithItsOwnCopy is the same against
// real MemPalace 3.11.0.
func TestRealADevicesDiaryEntryIsPairedWithItsOwnCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	srv := realpalace.New(t).Serve(t, testToken)
	url, tokens, _ := testGatewayServer(t, srv.URL, ownCopyDevices()...)
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: url, token: tokens["desk"], identity: "opencode@desk", timeout: 30 * time.Second})
	diaryOwnCopyOfTwo(t, h, url, tokens["desk"], func() int {
		page := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "opencode", "last_n": 10})
		es, _ := page["entries"].([]any)
		return len(es)
	})
}

// A diary entry whose write is still unsent (held: the policy does not
// parse) has no copy on the primary: desk's diary_read shows it palace
// local, and the copy another palace of the same device wrote of the same
// line apart, palace primary. Before, the entry was paired with that copy
// by its text (outside tester, attack36 N1).
func TestAnUnsentDiaryEntryIsNotPairedWithAnotherPalacesCopy(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(), ownCopyDevices()...)
	h := start(t, harnessOpts{primaryURL: url, token: tokens["desk"], identity: "opencode@desk"})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.ID == "desk" })
	policy := filepath.Join(h.palace, "edge", PolicyFile)
	if err := os.WriteFile(policy, []byte(`{"version": 1, "wings": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour) // a later mtime even on a coarse clock
	os.Chtimes(policy, later, later)
	const text = "Standup done, tests green."
	if w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text}); w["entry_id"] == nil {
		t.Fatalf("diary_write: %v", w)
	}
	fresh := NewPrimary(url, func() string { return tokens["desk"] }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 30 * time.Second})
	defer fresh.Close()
	if res, err := FlushTarget(fresh).Call(context.Background(), "mempalace_diary_write", []byte(`{"agent_name":"opencode","entry":"`+text+`"}`)); err != nil || res["success"] != true {
		t.Fatalf("the other palace's diary_write: %v %v", res, err)
	}
	d, _ := h.call("diary_read", map[string]any{"agent_name": "opencode", "last_n": 5})
	es, _ := d["entries"].([]any)
	var got []string
	for _, x := range es {
		e, _ := x.(map[string]any)
		o, _ := e["origin"].(map[string]any)
		got = append(got, fmt.Sprint(o["palace"]))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"local", "primary"}) {
		t.Errorf("diary_read with desk's write held and the other palace's copy on the primary: %q, want local and primary apart (%v)", got, d)
	}
}
