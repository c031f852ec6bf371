package edge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
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

// The same against real MemPalace 3.11.0 (a local mempalace-mcp, serve
// behind a real gateway), as an outside tester met it (attack116 F6): an
// end of a triple the local palace holds no fact of, its subject unknown
// to the palace or known by other facts, made online and offline, is
// marked (outbox.EndsNothing) by the local palace's real kg_query, and
// the gateway's -32035 settles it done at the fifth refusal, nothing dead;
// an end of a fact the local palace holds is not marked, and lands.
func TestRealAnEndOfAFactNoPalaceHoldsHoldsNothingBack(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	srv := realpalace.New(t).Serve(t, testToken)
	url, tokens := testGateway(t, srv.URL, gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: url, token: tokens["bob-02"], timeout: 30 * time.Second})
	for _, o := range []string{"alice", "carol"} {
		if m, _ := h.call("kg_add", map[string]any{"subject": "Z2", "predicate": "lead", "object": o}); m["success"] != true {
			t.Fatalf("kg_add: %v", m)
		}
	}
	h.drained()
	nothing := []map[string]any{
		{"subject": "z1", "predicate": "lead", "object": "nobody"}, // online, subject unknown
		{"subject": "z2", "predicate": "Lead", "object": "nobody"}, // online, subject known by other facts
	}
	invalidate := func(args ...map[string]any) {
		for _, a := range args {
			if m, _ := h.call("kg_invalidate", a); m["success"] != true {
				t.Fatalf("kg_invalidate %v: %v", a, m)
			}
		}
	}
	invalidate(nothing...)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	offline := []map[string]any{
		{"subject": "z3", "predicate": "lead", "object": "nobody"},
		{"subject": "Z2", "predicate": "lead", "object": "bob"},
	}
	invalidate(append(offline, map[string]any{"subject": "z2", "predicate": "lead", "object": "Alice"})...) // the last: held here
	nothing = append(nothing, offline...)
	marked := endOrdinals(t, h)
	for _, a := range nothing {
		if p := tripleOf([]byte(mustJSON(a))); marked[p] != outbox.EndsNothing {
			t.Errorf("the end of %s, a fact the local palace holds none of, is not marked EndsNothing (ops' ordinals %v)", p, marked)
		}
	}
	if held := "z2 lead Alice"; marked[held] != 0 {
		t.Errorf("the end of %s, a fact the local palace holds, is marked (ordinal %d): the primary's -32035 would settle it unsent", held, marked[held])
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := settledAsNothing(t, h); n != len(nothing) {
		t.Errorf("%d end(s) settled as ending nothing, want %d", n, len(nothing))
	}
	if f := factDates(srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "z2"})); len(f) != 2 || strings.HasSuffix(f["alice"], "<nil>") || f["carol"] != "<nil>..<nil>" {
		t.Errorf("z2's facts on the primary: %v, want alice's (held locally, unmarked) ended and carol's current", f)
	}
}

// endOrdinals is the Ordinal of each kg_invalidate in h's outbox, by
// its triple (tripleOf).
func endOrdinals(t *testing.T, h *harness) map[string]int {
	t.Helper()
	ops, err := h.edge.outbox.List(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	marked := map[string]int{}
	for _, op := range ops {
		if op.Tool == "mempalace_kg_invalidate" {
			marked[tripleOf(op.Payload)] = op.Ordinal
		}
	}
	return marked
}

// settledAsNothing sends h's outbox as edge flush does (no backoff: five
// refusals decide each) until no op is left to send, fails on a dead op,
// and counts the ops done as ends of nothing, each noted so.
func settledAsNothing(t *testing.T, h *harness) int {
	t.Helper()
	waitFor(t, 60*time.Second, "no op left to send", func() bool {
		h.edge.outbox.ClearBackoff(context.Background())
		h.edge.outbox.Kick()
		left, err := h.edge.outbox.List(context.Background(), 1, outbox.Queued, outbox.Inflight)
		time.Sleep(200 * time.Millisecond)
		return err == nil && len(left) == 0
	})
	if d := h.deadOps(); len(d) != 0 {
		t.Fatalf("%d dead op(s), the first %s: %s", len(d), d[0].Payload, outbox.FailureOf(d[0].Error).Message)
	}
	done, err := h.edge.outbox.List(context.Background(), 20, outbox.Done)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range done {
		if op.Ordinal != outbox.EndsNothing {
			continue
		}
		n++
		if !strings.Contains(outbox.FailureOf(op.Error).Message, "neither the primary nor this devbox's palace held this fact") {
			t.Errorf("%s done without the note that it ended nothing: %s", op.Payload, op.Error)
		}
	}
	return n
}

// tripleOf is a kg_invalidate's triple, as its arguments spell it.
func tripleOf(args []byte) string {
	return gjson.GetBytes(args, "subject").Str + " " + gjson.GetBytes(args, "predicate").Str + " " + gjson.GetBytes(args, "object").Str
}
