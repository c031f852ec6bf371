package edge

import (
	"context"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// An end of a fact neither palace holds (an agent's typo) changed
// nothing anywhere, as MemPalace answers it: it is done, not refused to
// death, and the object's later KG writes reach the primary, not held
// behind it (review32 R5). An end of a fact only the primary holds
// (another devbox's, read from there) still lands.
func TestAnEndOfAFactNoPalaceHoldsHoldsNothingBack(t *testing.T) {
	t.Parallel()
	h, _, primary := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	postTool(t, primary, testToken, "kg_add", map[string]any{"subject": "svc_p", "predicate": "pages", "object": "ops_1"})
	for _, args := range []map[string]any{
		{"subject": "svc_t", "predicate": "alerts_to", "object": "pagr_1"}, // the typo
		{"subject": "svc_p", "predicate": "pages", "object": "ops_1"},      // the primary's only
	} {
		if _, res := h.call("kg_invalidate", args); res.IsError {
			t.Fatalf("kg_invalidate refused: %s", refusalText(res))
		}
	}
	if _, res := h.call("kg_add", map[string]any{"subject": "svc_t", "predicate": "alerts_to", "object": "pager_1"}); res.IsError {
		t.Fatalf("kg_add refused: %s", refusalText(res))
	}
	// A supersede of an old object no palace holds is MemPalace's add of
	// the new one: the primary gets it, from the boundary the local
	// palace opened it at, and the write after it lands too.
	for _, args := range []map[string]any{
		{"subject": "svc_s", "predicate": "runs_on", "old_object": "hots_1", "new_object": "host_2", "at": "2026-12-01"},
		{"subject": "svc_s", "predicate": "runs_on", "old_object": "host_2", "new_object": "host_3", "at": "2026-12-02"},
	} {
		if _, res := h.call("kg_supersede", args); res.IsError {
			t.Fatalf("kg_supersede refused: %s", refusalText(res))
		}
	}
	// Five refusals decide each: no backoff between them (edge flush's).
	h.eventually("the outbox drained", func() bool {
		h.edge.outbox.ClearBackoff(context.Background())
		h.edge.outbox.Kick()
		n, _, err := h.edge.outbox.Pending(context.Background())
		return err == nil && n == 0
	})
	if d := h.deadOps(); len(d) != 0 {
		t.Errorf("dead ops: %+v", outbox.FailureOf(d[0].Error))
	}
	got := postTool(t, primary, testToken, "kg_query", map[string]any{"entity": "svc_t"})
	if s := mustJSON(got); !strings.Contains(s, "pager_1") {
		t.Errorf("the add behind the typo's end is not on the primary: %s", s)
	}
	got = postTool(t, primary, testToken, "kg_query", map[string]any{"entity": "svc_s"})
	if s := mustJSON(got); !strings.Contains(s, `"valid_from":"2026-12-01T00:00:00Z","valid_to":"2026-12-02T00:00:00Z"`) || !strings.Contains(s, "host_3") {
		t.Errorf("the supersede of nothing did not reach the primary as the local palace's add, superseded after: %s", s)
	}
	got = postTool(t, primary, testToken, "kg_query", map[string]any{"entity": "svc_p"})
	if s := mustJSON(got); !strings.Contains(s, `"valid_to":"20`) {
		t.Errorf("the primary's own fact was not ended: %s", s)
	}
}
