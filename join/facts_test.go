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
