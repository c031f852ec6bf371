package join

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// attack30 f14 against the test double (TestRealJoinDoesNotReopenAFactClosedOnThePrimary
// is the real one): a fact ended on the primary and still open here is
// not sent as a second, open copy; it is skipped, with a note.
func TestJoinDoesNotReopenAFactClosedOnThePrimary(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	p.do(t, "kg_add", map[string]any{"subject": "Bob", "predicate": "works_at", "object": "acme", "valid_from": "2024-01-01"})
	p.save(t)
	call(t, pr.pl, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "works_at", "object": "acme", "valid_from": "2024-01-01"})
	call(t, pr.pl, "mempalace_kg_invalidate", map[string]any{"subject": "Bob", "predicate": "works_at", "object": "acme", "ended": "2025-02-01"})
	rep := run(t, config(t, p, pr), Options{Verify: All})
	if !rep.OK() || rep.Sent[Facts] != 0 || rep.Skipped[Facts] != 1 || !strings.Contains(strings.Join(rep.Notes, "\n"), "closed on the primary") {
		t.Fatalf("join: sent %v, skipped %v, notes %q, failed %+v, mismatches %+v", rep.Sent, rep.Skipped, rep.Notes, rep.Failed, rep.Mismatches)
	}
	if st := pr.pl.Dump(); len(st.Triples) != 1 || st.Triples[0].ValidTo == nil {
		t.Fatalf("the primary holds %d facts (the first closed: %v), want only the closed one", len(st.Triples), st.Triples[0].ValidTo != nil)
	}
}

// A fact that held, ended, and holds again (Bob lived in Oslo 2020..2023
// and again from 2025), the open period already on the primary (the edge
// replicated it): MemPalace files no closed copy beside the open one, so
// the earlier period is named, but without telling the operator to close
// the primary's open copy, which this palace holds open too: following
// that advice ended a fact that still holds, and the next join kept it
// ended (the primary's close is taken as newer knowledge).
func TestJoinDoesNotAdviseClosingAFactThatStillHoldsHere(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	oslo := func(from, to string) map[string]any {
		return map[string]any{"subject": "Bob", "predicate": "lives_in", "object": "Oslo", "valid_from": from, "valid_to": to}
	}
	p.do(t, "kg_add", oslo("2020-01-01", "2023-01-01"))
	p.do(t, "kg_add", map[string]any{"subject": "Bob", "predicate": "lives_in", "object": "Oslo", "valid_from": "2025-01-01"})
	p.save(t)
	call(t, pr.pl, "mempalace_kg_add", map[string]any{"subject": "Bob", "predicate": "lives_in", "object": "Oslo", "valid_from": "2025-01-01"})
	rep := run(t, config(t, p, pr), Options{Verify: All})
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].Verdict != "open on the primary" {
		t.Fatalf("join: mismatches %+v, sent %v, skipped %v, failed %+v", rep.Mismatches, rep.Sent, rep.Skipped, rep.Failed)
	}
	if d := rep.Mismatches[0].Detail; strings.Contains(d, "close it there") || !strings.Contains(d, "holds it open from that date too") {
		t.Fatalf("the mismatch advises: %s", d)
	}
}

// attack48 F1: a fact an earlier join sent, closed on the primary since
// while it stays open here, is no mismatch at --verify (it was named
// `facts / ""`, "missing"): a note names the triple and the primary's
// close, and the fact counts skipped.
func TestJoinVerifyNotesAFactClosedOnThePrimarySince(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	svc := map[string]any{"subject": "svc1", "predicate": "runs_on", "object": "host1", "valid_from": "2026-01-02"}
	p.do(t, "kg_add", svc)
	p.save(t)
	c := config(t, p, pr)
	if rep := run(t, c, Options{}); !rep.OK() || rep.Sent[Facts] != 1 {
		t.Fatalf("first join: sent %v, failed %+v", rep.Sent, rep.Failed)
	}
	call(t, pr.pl, "mempalace_kg_invalidate", map[string]any{"subject": "svc1", "predicate": "runs_on", "object": "host1", "ended": "2026-12-05"})
	rep := run(t, c, Options{Verify: All})
	notes := strings.Join(rep.Notes, "\n")
	if !rep.OK() || rep.Skipped[Facts] != 1 || !strings.Contains(notes, "svc1 → runs_on → host1 (2026-01-02..2026-12-05 there)") {
		t.Fatalf("second join: mismatches %+v, skipped %v, notes %q, failed %+v", rep.Mismatches, rep.Skipped, notes, rep.Failed)
	}
}

// attack48 F5: an open fact the primary holds already (the edge
// replicated it) is counted skipped, not sent, as a drawer there is.
func TestJoinCountsAFactAlreadyOnThePrimarySkipped(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	svc := map[string]any{"subject": "svc0", "predicate": "runs_on", "object": "host0", "valid_from": "2026-01-02"}
	p.do(t, "kg_add", svc)
	p.save(t)
	call(t, pr.pl, "mempalace_kg_add", svc)
	rep := run(t, config(t, p, pr), Options{Verify: All})
	if !rep.OK() || rep.Sent[Facts] != 0 || rep.Skipped[Facts] != 1 || rep.Calls["primary kg_add"] != 0 {
		t.Fatalf("join: sent %v, skipped %v, calls %v, failed %+v, mismatches %+v", rep.Sent, rep.Skipped, rep.Calls, rep.Failed, rep.Mismatches)
	}
	if st := pr.pl.Dump(); len(st.Triples) != 1 {
		t.Fatalf("the primary holds %d facts, want 1", len(st.Triples))
	}
}

// A fact the gateway refuses (knowledge-graph grant read) is named by its
// triple on its FAILED line, as it was named `/ ""` (attack48 F1's
// naming, on the refusal's side).
func TestJoinNamesARefusedFactByItsTriple(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, KG: "read", Agents: []string{"opencode@desk"}}})
	p := newPalace(t)
	p.do(t, "kg_add", map[string]any{"subject": "svc2", "predicate": "runs_on", "object": "host2", "valid_from": "2026-01-03"})
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{})
	if len(rep.Failed) != 1 || rep.Failed[0].Record != "svc2 → runs_on → host2" {
		t.Fatalf("join: failed %+v, want the refused fact named svc2 → runs_on → host2", rep.Failed)
	}
}
