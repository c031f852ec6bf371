package join

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// realConfig joins the real palace local (its own mempalace-mcp, started
// by the join as the edge starts it) into srv.
func realConfig(local *realpalace.Palace, srv *realpalace.Server) Config {
	return Config{
		URL: srv.URL, Token: func() string { return srv.Token }, Child: local.MCPCommand(), ChildEnv: local.Env(), ChildStderr: os.Stderr,
		Palace: local.Dir, Home: local.Home, Agent: "opencode", Label: "lab", Timeout: 60 * time.Second, StartWait: 90 * time.Second,
	}
}

// primaryWrites counts the write calls a join made to the primary.
func primaryWrites(r Report) int {
	n := 0
	for k, v := range r.Calls {
		for _, w := range []string{"add_drawer", "diary_write", "kg_add", "kg_invalidate", "checkpoint"} {
			if k == "primary "+w {
				n += v
			}
		}
	}
	return n
}

// TestRealJoinIntoRealServe joins a palace real MemPalace 3.11.0 wrote
// (over its own stdio server: drawers, two of them longer than its chunk
// size of 800, diaries, one longer than a chunk, open facts, closed facts
// written closed and closed by kg_invalidate) into real serve:
// --verify all is clean, every record is on the primary once and whole,
// and a second join sends no write. Then the join's own outbox is lost (a
// reinstalled devbox) and the palace joined again: every record is still
// there exactly once.
//
// Two diary entries with equal text: TestRealJoinSendsEveryEqualDiaryEntry.
func TestRealJoinIntoRealServe(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	longA, longB, longDiary := long("real chunked A", 2100), long("real chunked B", 1650), long("real chunked diary", 1700)
	drawers := []realpalace.Call{
		realpalace.Drawer("project", "notes", longA),
		realpalace.Drawer("project", "notes", longB),
		realpalace.Drawer("project", "big", "a short note about the edge"),
	}
	for i := range 6 {
		drawers = append(drawers, realpalace.Drawer("project", "notes", fmt.Sprintf("note %d: the outbox replays writes in order", i)))
	}
	drawers = append(drawers, realpalace.Drawer("shared", "decisions", "we chose sqlite for the outbox"))
	s.Seed(t, drawers...)
	s.Seed(t, realpalace.DiaryEntry("opencode", "first diary entry"), realpalace.DiaryEntry("opencode", "second diary entry"), realpalace.DiaryEntry("opencode", longDiary), realpalace.DiaryEntry("pi", "pi's own entry"))
	s.Seed(t,
		realpalace.Fact("Alice", "works_on", "devbox", "", ""),
		realpalace.Fact("edge", "uses", "sqlite", "2026-01-01", ""),
		realpalace.Fact("Alice", "lived_in", "Oslo", "2020-01-01", "2023-06-30"),
		realpalace.Fact("Bob", "works_at", "acme", "2021-01-01", ""),
		realpalace.Call{Tool: "mempalace_kg_invalidate", Args: map[string]any{"subject": "Bob", "predicate": "works_at", "object": "acme", "ended": "2025-12-31"}},
	)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	const wantDrawers, wantDiaries, wantFacts = 10, 4, 4

	srv := realpalace.New(t).Serve(t, "tok-join-real")
	cfg := realConfig(local, srv)
	rep := run(t, cfg, Options{Verify: All, Seed: 3})
	if !rep.OK() {
		t.Fatalf("first join: failed %+v, mismatches %+v", rep.Failed, rep.Mismatches)
	}
	if rep.Sent[Drawers] != wantDrawers || rep.Sent[Diaries] != wantDiaries || rep.Sent[Facts] != wantFacts || rep.Manifest["facts_closed"] != 2 {
		t.Fatalf("first join sent %v (manifest %v), want drawers %d, diaries %d, facts %d (2 closed)", rep.Sent, rep.Manifest, wantDrawers, wantDiaries, wantFacts)
	}
	if rep.Verified != wantDrawers+wantDiaries {
		t.Fatalf("verified %d, want every drawer and diary (%d)", rep.Verified, wantDrawers+wantDiaries)
	}
	// Each side verified in one get_drawers (chunked drawers and diaries
	// too); the local palace read so too, one get_drawers a wing.
	if rep.Calls["primary get_drawers"] != 1 || rep.Calls["local get_drawers"] != 1+rep.Calls["local list_drawers"] || rep.Calls["primary get_drawer"] != 0 || rep.Calls["local get_drawer"] != 0 {
		t.Fatalf("reads: calls %v, want one get_drawers a side to verify and one a wing to read", rep.Calls)
	}
	onPrimary := func(when string) {
		t.Helper()
		contents := map[string]int{}
		for _, wing := range []string{"project", "shared", "wing_opencode", "wing_pi"} {
			page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": wing, "limit": 100})
			ds, _ := page["drawers"].([]any)
			for _, x := range ds {
				id := x.(map[string]any)["drawer_id"].(string)
				d := srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": id})
				contents[fmt.Sprint(d["content"])]++
			}
		}
		for _, c := range []string{longA, longB, longDiary, "we chose sqlite for the outbox", "pi's own entry", "first diary entry"} {
			if contents[c] != 1 {
				t.Errorf("%s: the primary holds %d whole copies of %.50q", when, contents[c], c)
			}
		}
		if n := len(contents); n != wantDrawers+wantDiaries {
			t.Errorf("%s: %d distinct drawers on the primary, want %d", when, n, wantDrawers+wantDiaries)
		}
		for c, n := range contents {
			if n != 1 {
				t.Errorf("%s: %d copies of %.50q", when, n, c)
			}
		}
		facts := map[string]int{}
		for _, e := range []string{"Alice", "edge", "Bob"} {
			q := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": e})
			fs, _ := q["facts"].([]any)
			for _, x := range fs {
				f := x.(map[string]any)
				if f["subject"] == e {
					facts[fmt.Sprint(f["subject"], " ", f["predicate"], " ", f["object"], " ", f["valid_from"], "..", f["valid_to"])]++
				}
			}
		}
		want := []string{"Alice works_on devbox <nil>..<nil>", "edge uses sqlite 2026-01-01..<nil>", "Alice lived_in Oslo 2020-01-01..2023-06-30", "Bob works_at acme 2021-01-01..2025-12-31"}
		for _, f := range want {
			if facts[f] != 1 {
				t.Errorf("%s: the fact %q is on the primary %d times (all: %v)", when, f, facts[f], facts)
			}
		}
		if len(facts) != len(want) {
			t.Errorf("%s: facts on the primary %v, want %v", when, facts, want)
		}
	}
	onPrimary("after the first join")

	rep2 := run(t, cfg, Options{Verify: All, Seed: 3})
	if !rep2.OK() || primaryWrites(rep2) != 0 {
		t.Fatalf("second join: ok %v, %d writes sent (calls %v), failed %+v", rep2.OK(), primaryWrites(rep2), rep2.Calls, rep2.Failed)
	}
	for _, k := range Kinds {
		if rep2.Sent[k] != 0 {
			t.Fatalf("second join sent %v", rep2.Sent)
		}
	}
	onPrimary("after the second join")

	// The join's outbox and checkpoint are lost: the next join replays
	// everything, and the primary's own guards and the look-ups keep one
	// copy of each record.
	for _, f := range []string{OutboxFile(rep.Target), "bootstrap.json"} {
		matches, _ := filepath.Glob(filepath.Join(local.Dir, "edge", f+"*"))
		for _, m := range matches {
			if err := os.Remove(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep3 := run(t, cfg, Options{Verify: All, Seed: 3})
	if !rep3.OK() {
		t.Fatalf("join without its outbox: failed %+v, mismatches %+v", rep3.Failed, rep3.Mismatches)
	}
	onPrimary("after a join that lost its outbox")
	// Diaries and facts are looked up: found, none is sent again, and an
	// open fact the primary holds counts as skipped, not sent (drawers
	// are sent, and the server's own guard answers "already there").
	if rep3.Calls["primary diary_write"] != 0 || rep3.Calls["primary kg_add"] != 0 || rep3.Sent[Diaries] != 0 || rep3.Sent[Facts] != 0 {
		t.Errorf("a join without its outbox: sent %v, calls %v: diaries and facts must be found, not sent", rep3.Sent, rep3.Calls)
	}
}

// Issue 26, point 4, against real MemPalace 3.11.0 on both sides: a
// palace holding the same diary text twice puts both entries on the
// primary, --verify all passes, and a second join sends none.
func TestRealJoinSendsEveryEqualDiaryEntry(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.DiaryEntry("opencode", "standup: nothing new"), realpalace.DiaryEntry("opencode", "standup: nothing new"),
		realpalace.DiaryEntry("opencode", "a one-off"), realpalace.Drawer("project", "notes", "a note"), realpalace.Fact("alice", "works_on", "devbox", "", ""))
	s.Stop()
	primary := realpalace.New(t).Serve(t, "tok-real-join")
	cfg := Config{URL: primary.URL, Token: func() string { return "tok-real-join" }, Child: local.MCPCommand(), ChildEnv: local.Env(),
		Palace: local.Dir, Home: local.Home, Agent: "opencode", Label: "lab", Timeout: 30 * time.Second, ChildStderr: io.Discard}
	count := func() int {
		res := primary.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "wing_opencode", "room": "diary", "limit": 100})
		n := 0
		rows, _ := res["drawers"].([]any)
		for _, x := range rows {
			if _, sfx, ok := catalogue.DiaryEntryID(x.(map[string]any)["drawer_id"].(string)); ok && sfx == catalogue.EntrySuffix("standup: nothing new") {
				n++
			}
		}
		return n
	}
	rep, err := Run(context.Background(), cfg, Options{Verify: All})
	if err != nil || !rep.OK() {
		t.Fatalf("join: %v %+v", err, rep)
	}
	if n := count(); n != 2 || rep.Sent[Diaries] != 3 {
		t.Fatalf("the primary holds %d of the 2 equal entries (sent %v)", n, rep.Sent)
	}
	rep, err = Run(context.Background(), cfg, Options{Verify: All})
	if err != nil || !rep.OK() || rep.Sent[Diaries] != 0 || count() != 2 {
		t.Fatalf("a second join: %v sent %v, the primary holds %d; %+v", err, rep.Sent, count(), rep)
	}
}

// attack30 f5, against real MemPalace 3.11.0: the local palace holds three
// equal entries, the primary already one of them (the device's edge
// replicated it): the join sends the two it lacks ("as many as it lacks
// of n"), --verify all counts them, and a second join sends none.
func TestRealJoinSendsTheEqualDiaryEntriesThePrimaryLacks(t *testing.T) {
	t.Parallel()
	const text = "standup: nothing new"
	entry := realpalace.Call{Tool: "mempalace_diary_write", Args: map[string]any{"agent_name": "opencode", "entry": text, "topic": "standup"}}
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, entry, entry, entry)
	s.Stop()
	primary := realpalace.New(t).Serve(t, "tok-real-join")
	primary.MustCall(t, entry.Tool, entry.Args)
	cfg := realConfig(local, primary)
	cfg.ChildStderr = io.Discard
	count := func() int {
		res := primary.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "wing_opencode", "room": "diary", "limit": 100})
		n := 0
		rows, _ := res["drawers"].([]any)
		for _, x := range rows {
			if _, sfx, ok := catalogue.DiaryEntryID(x.(map[string]any)["drawer_id"].(string)); ok && sfx == catalogue.EntrySuffix(text) {
				n++
			}
		}
		return n
	}
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() || count() != 3 || rep.Sent[Diaries] != 2 || rep.Skipped[Diaries] != 1 || rep.Verified != 3 {
		t.Fatalf("join: the primary holds %d of 3 equal entries; sent %v skipped %v verified %d; failed %+v mismatches %+v", count(), rep.Sent, rep.Skipped, rep.Verified, rep.Failed, rep.Mismatches)
	}
	rep = run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.Sent[Diaries] != 0 || count() != 3 || rep.Verified != 3 {
		t.Fatalf("a second join: sent %v verified %d, the primary holds %d; %+v", rep.Sent, rep.Verified, count(), rep)
	}
}

// Against real MemPalace 3.11.0 on both sides: one text under two topics
// is two equal entries to the primary (its diary id hashes the text
// alone): both are sent, --verify all passes, a second join sends none.
func TestRealJoinSendsEqualDiaryEntriesOfTwoTopics(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	entry := func(topic string) realpalace.Call {
		return realpalace.Call{Tool: "mempalace_diary_write", Args: map[string]any{"agent_name": "opencode", "entry": "nothing new", "topic": topic}}
	}
	s.Seed(t, entry("standup"), entry("retro"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-real-topics")
	for i := range 2 {
		rep := run(t, realConfig(local, srv), Options{Verify: All})
		if want := []int{2, 0}[i]; !rep.OK() || rep.Sent[Diaries] != want || rep.Sent[Diaries]+rep.Skipped[Diaries] != 2 || rep.Verified != 2 {
			t.Fatalf("join %d: sent %v skipped %v verified %d; failed %+v mismatches %+v", i+1, rep.Sent, rep.Skipped, rep.Verified, rep.Failed, rep.Mismatches)
		}
	}
}
