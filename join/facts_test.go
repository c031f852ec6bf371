package join

import (
	"strings"
	"testing"
)

// attack30 f14 against the test double (TestRealJoinDoesNotReopenAFactClosedOnThePrimary
// is the real one): a fact ended on the primary and still open here is
// not sent as a second, open copy; it is skipped, with a note.
func TestJoinDoesNotReopenAFactClosedOnThePrimary(t *testing.T) {
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
