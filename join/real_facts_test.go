package join

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// primaryTimeline is the primary's facts on subject, as
// "predicate object from..to" (an open fact ends in "..").
func primaryTimeline(t *testing.T, srv *realpalace.Server, subject string) []string {
	t.Helper()
	q := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": subject, "direction": "outgoing"})
	fs, _ := q["facts"].([]any)
	var out []string
	for _, x := range fs {
		f := x.(map[string]any)
		to, _ := f["valid_to"].(string)
		out = append(out, fmt.Sprint(f["predicate"], " ", f["object"], " ", f["valid_from"], "..", to))
	}
	return out
}

// attack30 f13: a fact the primary holds open (the edge replicated it
// before it was closed here) and the local palace closed since
// (kg_invalidate). MemPalace's kg_add answers a closed triple with the
// open one's id, so the join closes it there as the edge replicates a
// close (kg_invalidate), and only then counts it as on the primary: the
// primary holds it closed, once, and a second join sends nothing.
func TestRealJoinClosesAFactOpenOnThePrimary(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"),
		realpalace.Fact("Bob", "uses", "vim", "2025-01-01", ""),
		realpalace.Call{Tool: "mempalace_kg_invalidate", Args: map[string]any{"subject": "Bob", "predicate": "uses", "object": "vim", "ended": "2025-05-01"}})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-close")
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "uses", "object": "vim", "valid_from": "2025-01-01"})

	rep := run(t, realConfig(local, srv), Options{Verify: All})
	if !rep.OK() || rep.Sent[Facts] != 1 {
		t.Fatalf("join: sent %v, failed %+v, mismatches %+v", rep.Sent, rep.Failed, rep.Mismatches)
	}
	if got := primaryTimeline(t, srv, "Bob"); len(got) != 1 || got[0] != "uses vim 2025-01-01..2025-05-01" {
		t.Fatalf("the primary's facts on Bob: %q, want the one closed on 2025-05-01", got)
	}
	rep2 := run(t, realConfig(local, srv), Options{Verify: All})
	if !rep2.OK() || rep2.Sent[Facts] != 0 || rep2.Skipped[Facts] != 1 || primaryWrites(rep2) != 0 {
		t.Fatalf("a second join: sent %v, skipped %v, calls %v, failed %+v, mismatches %+v", rep2.Sent, rep2.Skipped, rep2.Calls, rep2.Failed, rep2.Mismatches)
	}
}

// --verify reads each fact back from the primary: a fact closed here
// that the primary holds open since another date (MemPalace files no
// closed copy of a triple while it is open, and closing the primary's
// would end another period) is named, not passed as sent.
func TestRealJoinVerifySeesAFactOpenOnThePrimary(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"),
		realpalace.Fact("Bob", "uses", "vim", "2025-01-01", "2025-05-01"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-verify-fact")
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "uses", "object": "vim", "valid_from": "2025-06-01"})

	rep := run(t, realConfig(local, srv), Options{Verify: All})
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].Kind != Facts || !strings.Contains(rep.Mismatches[0].Detail, "open") {
		t.Fatalf("join --verify all: mismatches %+v, failed %+v, sent %v: want the closed fact named as open on the primary", rep.Mismatches, rep.Failed, rep.Sent)
	}
	if got := primaryTimeline(t, srv, "Bob"); len(got) != 1 || got[0] != "uses vim 2025-06-01.." {
		t.Fatalf("the primary's facts on Bob: %q, want its own open one untouched", got)
	}
}

// attack30 f14: a fact closed on the primary (someone ended it there)
// and still open in the joining palace. The primary's close is newer
// knowledge: the join does not open a second copy, and counts the fact
// as skipped with a note saying why.
func TestRealJoinDoesNotReopenAFactClosedOnThePrimary(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"),
		realpalace.Fact("Bob", "works_at", "acme", "2024-01-01", ""))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-reopen")
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "works_at", "object": "acme", "valid_from": "2024-01-01"})
	srv.MustCall(t, "mempalace_kg_invalidate", map[string]any{"subject": "Bob", "predicate": "works_at", "object": "acme", "ended": "2025-02-01"})

	rep := run(t, realConfig(local, srv), Options{Verify: All})
	if !rep.OK() || rep.Sent[Facts] != 0 || rep.Skipped[Facts] != 1 || rep.Calls["primary kg_add"] != 0 {
		t.Fatalf("join: sent %v, skipped %v, calls %v, failed %+v, mismatches %+v", rep.Sent, rep.Skipped, rep.Calls, rep.Failed, rep.Mismatches)
	}
	if got := primaryTimeline(t, srv, "Bob"); len(got) != 1 || got[0] != "works_at acme 2024-01-01..2025-02-01" {
		t.Fatalf("the primary's facts on Bob: %q, want only the closed one", got)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "closed on the primary") {
		t.Fatalf("no note says why the fact was not sent: %q", rep.Notes)
	}
}

// attack33 g1 (_both): a fact closed on both sides from the same
// valid_from, with other ends. The primary's close wins, as it does over
// an open copy here (f14): no second, overlapping copy is filed; it is
// skipped with a note, and --verify names the difference.
func TestRealJoinKeepsThePrimarysEndOfAFactClosedOnBothSides(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"),
		realpalace.Fact("Bob", "likes", "coffee", "2025-01-01", "2025-05-01"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-both-closed")
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "likes", "object": "coffee", "valid_from": "2025-01-01"})
	srv.MustCall(t, "mempalace_kg_invalidate", map[string]any{"subject": "Bob", "predicate": "likes", "object": "coffee", "ended": "2025-04-01"})

	rep := run(t, realConfig(local, srv), Options{Verify: All})
	if rep.Sent[Facts] != 0 || rep.Skipped[Facts] != 1 || factWrites(rep) != 0 || len(rep.Failed) != 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "closed on the primary") {
		t.Fatalf("join: sent %v, skipped %v, calls %v, notes %q, failed %+v", rep.Sent, rep.Skipped, rep.Calls, rep.Notes, rep.Failed)
	}
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].Kind != Facts || !strings.Contains(rep.Mismatches[0].Detail, "2025-04-01") || !strings.Contains(rep.Mismatches[0].Detail, "2025-05-01") {
		t.Fatalf("join --verify all: mismatches %+v, want the two ends named", rep.Mismatches)
	}
	if got := primaryTimeline(t, srv, "Bob"); len(got) != 1 || got[0] != "likes coffee 2025-01-01..2025-04-01" {
		t.Fatalf("the primary's facts on Bob: %q, want only its own closed one", got)
	}
	if rep := run(t, realConfig(local, srv), Options{}); !rep.OK() || rep.Skipped[Facts] != 1 || primaryWrites(rep) != 0 {
		t.Fatalf("a join without --verify: skipped %v, calls %v, failed %+v, mismatches %+v", rep.Skipped, rep.Calls, rep.Failed, rep.Mismatches)
	}
}

// attack33 g1 (_vf, _ovf): facts the primary holds open from another
// valid_from, one closed here and one open here. MemPalace's kg_add
// answers the open one and files nothing, so neither is sent nor on the
// primary: the counts say neither "sent" nor "skipped", and each is named
// (open on the primary), on the first run and the next alike. They were
// "sent 2", then "skipped 2 (already on the primary)".
func TestRealJoinCountsNoFactThePrimaryWillNotFile(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"),
		realpalace.Fact("Bob", "likes", "tea", "2025-01-01", "2025-05-01"),
		realpalace.Fact("Bob", "uses", "vim", "2025-01-01", ""))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-other-from")
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "likes", "object": "tea", "valid_from": "2024-06-01"})
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "uses", "object": "vim", "valid_from": "2024-01-01"})

	for i, o := range []Options{{Verify: All}, {}} {
		rep := run(t, realConfig(local, srv), o)
		if rep.Sent[Facts] != 0 || rep.Skipped[Facts] != 0 || factWrites(rep) != 0 || len(rep.Mismatches) != 2 {
			t.Fatalf("join %d: sent %v, skipped %v, calls %v, mismatches %+v, failed %+v", i+1, rep.Sent, rep.Skipped, rep.Calls, rep.Mismatches, rep.Failed)
		}
		for _, m := range rep.Mismatches {
			if m.Verdict != "open on the primary" {
				t.Errorf("join %d: %+v", i+1, m)
			}
		}
	}
	if got := primaryTimeline(t, srv, "Bob"); len(got) != 2 || !slices.Contains(got, "likes tea 2024-06-01..") || !slices.Contains(got, "uses vim 2024-01-01..") {
		t.Fatalf("the primary's facts on Bob: %q, want its own two open ones", got)
	}
}

// factWrites counts the join's writes of facts to the primary.
func factWrites(r Report) int { return r.Calls["primary kg_add"] + r.Calls["primary kg_invalidate"] }

// attack48 F1 and F5 against real MemPalace: an open fact the primary
// holds already is skipped, not sent; one a join sent and the primary
// closed since is at --verify all no mismatch (it was named `/ ""`,
// missing) but a note with the triple and the primary's close.
func TestRealJoinVerifyNotesAFactClosedOnThePrimarySince(t *testing.T) {
	t.Parallel()
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"),
		realpalace.Fact("svc0", "runs_on", "host0", "2026-01-02", ""),
		realpalace.Fact("svc1", "runs_on", "host1", "2026-01-02", ""))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-closed-since")
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "svc0", "predicate": "runs_on", "object": "host0", "valid_from": "2026-01-02"})
	rep := run(t, realConfig(local, srv), Options{})
	if !rep.OK() || rep.Sent[Facts] != 1 || rep.Skipped[Facts] != 1 {
		t.Fatalf("join, one fact on the primary already: sent %v, skipped %v, failed %+v", rep.Sent, rep.Skipped, rep.Failed)
	}
	srv.MustCall(t, "mempalace_kg_invalidate", map[string]any{"subject": "svc1", "predicate": "runs_on", "object": "host1", "ended": "2026-12-05"})
	rep = run(t, realConfig(local, srv), Options{Verify: All})
	if notes := strings.Join(rep.Notes, "\n"); !rep.OK() || !strings.Contains(notes, "svc1 → runs_on → host1 (2026-01-02..2026-12-05 there)") {
		t.Fatalf("join --verify all: mismatches %+v, failed %+v, notes %q", rep.Mismatches, rep.Failed, notes)
	}
}
