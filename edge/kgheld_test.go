package edge

import (
	"context"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A kg_add the gateway answers held by a fact current on the primary
// (filed there first, around the gateway here, another device's in the
// fleet; MemPalace files nothing) is told to the agent, which was
// answered success: the next tool answer carries a line saying the add
// filed nothing and its dates were not kept, and the next session start
// says it (attack99 F1: the edge swallowed the gateway's held).
func TestAnAddTheGatewayHeldIsToldToTheAgent(t *testing.T) {
	t.Parallel()
	h, _, primary := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	postTool(t, primary, testToken, "kg_add", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "valid_from": "2026-12-01"})
	if _, res := h.call("kg_add", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "valid_from": "2026-11-15"}); res.IsError {
		t.Fatalf("kg_add refused: %s", refusalText(res))
	}
	h.drained()
	_, res := h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "the next write"})
	note := notesOf(res)
	for _, want := range []string{"a write of a fact from this devbox filed nothing on the primary: mempalace_kg_add of service_x", "2026-11-15", "were not kept", "devbox-config edge status"} {
		if !strings.Contains(note, want) {
			t.Errorf("the next tool answer's note lacks %q:\n%s", want, note)
		}
	}
	if in := h.edge.deadInstructions(context.Background()); !strings.Contains(in, "Facts held already") || !strings.Contains(in, "filed nothing") {
		t.Errorf("the session-start lines:\n%s", in)
	}
}

// An end of a fact the primary holds none of (a fact only this palace
// has) is refused by the gateway (-32035), kept queued, sent again, and
// dead after the usual refusals with words saying the fact is not on the
// primary and that join sends it: not a silent success (attack99 F2).
func TestAnEndOfAFactOnlyThisPalaceHasDiesSayingSo(t *testing.T) {
	t.Parallel()
	h, _, _ := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	ctx := context.Background()
	if _, err := h.edge.outbox.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_invalidate", Payload: []byte(`{"subject":"svc_solo","predicate":"uses","object":"cache_9","ended":"2026-12-06"}`)}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the end dead", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		return len(h.deadOps()) == 1
	})
	f := outbox.FailureOf(h.deadOps()[0].Error)
	if f.Kind != outbox.Refused || !strings.Contains(f.Message, "holds no fact") || !strings.Contains(f.Message, "devbox-config join") || !strings.Contains(f.Message, "retry "+h.deadOps()[0].Short()) {
		t.Errorf("the dead end's failure: %+v", f)
	}
}

// While a dead KG write holds back the later writes of its objects, the
// edge's KG reads about them are its local palace's, and their why says
// they wait behind a dead write and how to settle it, not only "not on
// the primary yet" (attack99 F1, continued).
func TestAKGReadHeldLocalByADeadWriteSaysSo(t *testing.T) {
	t.Parallel()
	h, _, _ := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	ctx := context.Background()
	if _, err := h.edge.outbox.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_invalidate", Payload: []byte(`{"subject":"svc_solo","predicate":"uses","object":"cache_9","ended":"2026-12-06"}`)}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the end dead", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		return len(h.deadOps()) == 1
	})
	short := h.deadOps()[0].Short()
	if _, res := h.call("kg_supersede", map[string]any{"subject": "svc_solo", "predicate": "uses", "old_object": "cache_9", "new_object": "cache_10"}); res.IsError {
		t.Fatalf("kg_supersede refused: %s", refusalText(res))
	}
	got, _ := h.call("kg_query", map[string]any{"entity": "svc_solo"})
	ed, _ := got["edge"].(map[string]any)
	if why := asString(ed["why"]); ed["source"] != "local" || !strings.Contains(why, "dead write") || !strings.Contains(why, "edge outbox retry "+short) || !strings.Contains(why, "edge outbox drop "+short) {
		t.Errorf("kg_query behind a dead write: edge %v", ed)
	}
}

// A kg_supersede the gateway answers held (its old fact closed on the
// primary and another value current there: another device superseded it
// first) is told to the agent as a held kg_add is: the next tool answer
// says it filed nothing and the new value was not made current, and the
// next session start says it; the primary keeps one current value
// (attack105 F2: both values were current, and no agent was told).
func TestASupersedeTheGatewayHeldIsToldToTheAgent(t *testing.T) {
	t.Parallel()
	h, primary := heldSupersede(t)
	_, res := h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "the next write"})
	note := notesOf(res)
	for _, want := range []string{"a write of a fact from this devbox filed nothing on the primary: mempalace_kg_supersede of svc_a", `"bob" current`, `"carol" was not made current`, "devbox-config edge status"} {
		if !strings.Contains(note, want) {
			t.Errorf("the next tool answer's note lacks %q:\n%s", want, note)
		}
	}
	if in := h.edge.deadInstructions(context.Background()); !strings.Contains(in, "Facts held already") || !strings.Contains(in, "kg_supersede of svc_a") {
		t.Errorf("the session-start lines:\n%s", in)
	}
	facts, _ := postTool(t, primary, testToken, "kg_query", map[string]any{"entity": "svc_a", "direction": "outgoing"})["facts"].([]any)
	for _, x := range facts {
		if f := x.(map[string]any); f["object"] == "carol" {
			t.Errorf("the primary holds carol: %v", facts)
		}
	}
}

// heldSupersede is bob-02 behind a gateway, with the primary's URL, once
// its kg_supersede of svc_a's owner alice -> carol was held (NOT FILED):
// the primary held alice closed and bob current (superseded around the
// gateway first).
func heldSupersede(t *testing.T) (*harness, string) {
	t.Helper()
	h, _, primary := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	if _, res := h.call("kg_add", map[string]any{"subject": "svc_a", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"}); res.IsError {
		t.Fatalf("kg_add refused: %s", refusalText(res))
	}
	h.drained()
	postTool(t, primary, testToken, "kg_supersede", map[string]any{"subject": "svc_a", "predicate": "owner", "old_object": "alice", "new_object": "bob", "at": "2026-06-01"})
	if _, res := h.call("kg_supersede", map[string]any{"subject": "svc_a", "predicate": "owner", "old_object": "alice", "new_object": "carol", "at": "2026-07-01"}); res.IsError {
		t.Fatalf("kg_supersede refused: %s", refusalText(res))
	}
	h.drained()
	return h, primary
}

// heldFix is what the gateway's note on heldSupersede's op says to do.
const heldFix = `to make it the value: supersede "bob" with it (ending another device's fact is for an admin device), or kg_add it if both are meant to be current`

// A session start after a held supersede says what to do about it, its
// fix whole: the gateway's note was cut at a bound before its fix
// ("two current values); to mak…": attack112 F3).
func TestAHeldSupersedesSessionStartKeepsItsFix(t *testing.T) {
	t.Parallel()
	h, _ := heldSupersede(t)
	if in := h.edge.sessionInstructions(context.Background()); !strings.Contains(in, heldFix) || !strings.Contains(in, `"bob" current`) {
		t.Errorf("the session-start instructions lack the held supersede's fix %q, or what is current:\n%s", heldFix, in)
	}
}

// Offline, a KG read about a fact whose supersede the gateway held says
// that its new value was not filed and what the primary held current
// (the held op's note), beside the local palace's answer, which reads
// carol current and is left as it is; with the primary up the read is
// the primary's, bob current, and says nothing of it (attack112 F2: carol
// read as current and trusted, only "degraded" said).
func TestAnOfflineKGReadSaysWhatTheGatewayHeld(t *testing.T) {
	t.Parallel()
	h, _ := heldSupersede(t)
	for _, tool := range []string{"kg_query", "kg_timeline"} {
		got, _ := h.call(tool, map[string]any{"entity": "svc_a"})
		ed, _ := got["edge"].(map[string]any)
		if ed["source"] != "primary" || ed["not_filed"] != nil || !strings.Contains(mustJSON(got), `"bob"`) {
			t.Errorf("%s with the primary up: %v", tool, got)
		}
	}
	h.srv.Stop()
	for _, tool := range []string{"kg_query", "kg_timeline"} {
		got, _ := h.call(tool, map[string]any{"entity": "svc_a"})
		ed, _ := got["edge"].(map[string]any)
		held, _ := ed["not_filed"].([]any)
		if ed["source"] != "local" || len(held) != 1 {
			t.Errorf("%s with the primary down: edge %v", tool, ed)
			continue
		}
		f, _ := held[0].(map[string]any)
		if f["object"] != "carol" || f["predicate"] != "owner" || !strings.Contains(asString(f["note"]), `"bob" current`) || !strings.Contains(asString(f["note"]), heldFix) {
			t.Errorf("%s with the primary down: not_filed %v", tool, f)
		}
	}
	if got, _ := h.call("kg_query", map[string]any{"entity": "svc_b"}); got["edge"].(map[string]any)["not_filed"] != nil {
		t.Errorf("a read of another entity: %v", got["edge"])
	}
}

// Once the agent did what the held supersede's note says (supersede bob
// with carol) and the primary took it, an offline read no longer names
// the held op: carol is the primary's value since.
func TestAnOfflineKGReadForgetsAHeldWriteTheAgentSettled(t *testing.T) {
	t.Parallel()
	h, _ := heldSupersede(t)
	if _, res := h.call("kg_supersede", map[string]any{"subject": "svc_a", "predicate": "owner", "old_object": "bob", "new_object": "carol"}); res.IsError {
		t.Fatalf("kg_supersede refused: %s", refusalText(res))
	}
	h.drained()
	h.srv.Stop()
	if got, _ := h.call("kg_query", map[string]any{"entity": "svc_a"}); got["edge"].(map[string]any)["source"] != "local" || got["edge"].(map[string]any)["not_filed"] != nil {
		t.Errorf("an offline read after the held write was settled: %v", got["edge"])
	}
}

// A later write the primary took of the same subject and predicate but
// another value (dave added beside bob) does not settle the held
// supersede: an offline read still names carol as not filed (review34
// R5: any later write of the subject and predicate hid it).
func TestAnOfflineKGReadStillNamesAHeldWriteAfterAnotherValue(t *testing.T) {
	t.Parallel()
	h, _ := heldSupersede(t)
	if _, res := h.call("kg_add", map[string]any{"subject": "svc_a", "predicate": "owner", "object": "dave"}); res.IsError {
		t.Fatalf("kg_add refused: %s", refusalText(res))
	}
	h.drained()
	h.srv.Stop()
	got, _ := h.call("kg_query", map[string]any{"entity": "svc_a"})
	ed, _ := got["edge"].(map[string]any)
	held, _ := ed["not_filed"].([]any)
	if ed["source"] != "local" || len(held) != 1 || held[0].(map[string]any)["object"] != "carol" {
		t.Errorf("an offline read after another value was added: edge %v (want carol named not filed)", ed)
	}
}

// heldAdd is bob-02 behind a gateway, with the primary's URL, once its
// kg_add of service_x runs_on host_1 was held (NOT FILED): the primary
// held host_1 current already, filed around the gateway.
func heldAdd(t *testing.T) (*harness, string) {
	t.Helper()
	h, _, primary := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	postTool(t, primary, testToken, "kg_add", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "valid_from": "2026-12-01"})
	if _, res := h.call("kg_add", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "valid_from": "2026-11-15"}); res.IsError {
		t.Fatalf("kg_add refused: %s", refusalText(res))
	}
	h.drained()
	return h, primary
}

// offlineNotFiled is what an offline kg_query of entity names in
// not_filed, by object, once h's writes are drained.
func offlineNotFiled(t *testing.T, h *harness, entity string) []string {
	t.Helper()
	h.drained()
	h.srv.Stop()
	got, _ := h.call("kg_query", map[string]any{"entity": entity})
	ed, _ := got["edge"].(map[string]any)
	if ed["source"] != "local" {
		t.Fatalf("an offline read: edge %v", ed)
	}
	var objects []string
	held, _ := ed["not_filed"].([]any)
	for _, x := range held {
		objects = append(objects, asString(x.(map[string]any)["object"]))
	}
	return objects
}

// closedNoted says whether the outbox noted a done op of tool as held or
// closed already by the gateway (DeadOp.Closed): the end under test was
// answered already_closed or held_by, not taken.
func closedNoted(t *testing.T, h *harness, tool string) bool {
	t.Helper()
	dead, err := h.edge.outbox.DeadOps(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		if d.Closed && d.Tool == "mempalace_"+tool {
			return true
		}
	}
	return false
}

// Once the agent ends the value of its held add (kg_invalidate) and the
// gateway answers already_closed (another device ended it on the primary
// first), an offline read no longer names the held add: the agent ended
// it, the primary holds it closed, nothing is owed (it stayed in
// not_filed, telling the agent of a fact it had ended itself).
func TestAnEndAnsweredAlreadyClosedSettlesAHeldAdd(t *testing.T) {
	t.Parallel()
	h, primary := heldAdd(t)
	endedClosedAlready(t, h, primary)
	if held := offlineNotFiled(t, h, "service_x"); len(held) != 0 {
		t.Errorf("an offline read after the agent ended its held add's value names as not filed: %v", held)
	}
}

// Once the agent supersedes away from its held add's value and the
// gateway answers held_by (the value closed on the primary, another
// current), an offline read no longer names the held add, only the held
// supersede's own new value.
func TestASupersedeAnsweredHeldSettlesAHeldAdd(t *testing.T) {
	t.Parallel()
	h, primary := heldAdd(t)
	supersededHeld(t, h, primary)
	if !closedNoted(t, h, "kg_supersede") {
		t.Fatal("the supersede was not answered held_by")
	}
	if held := offlineNotFiled(t, h, "service_x"); len(held) != 1 || held[0] != "host_3" {
		t.Errorf("an offline read after the agent superseded its held add's value names as not filed %v, want only host_3", held)
	}
}

// Once the agent settled its held add (ended its value, the end answered
// already_closed), the next session start tells neither the held add
// ("Facts held already": make it the value) nor the settling end ("Facts
// closed already": re-add it), as edge.not_filed names neither: both
// were said at the next 3 session starts, telling the agent to undo what
// it did on purpose (attack119 F3).
func TestASettledHeldAddIsNotToldAtTheNextSessionStart(t *testing.T) {
	t.Parallel()
	h, primary := heldAdd(t)
	ctx := context.Background()
	if in := h.edge.sessionInstructions(ctx); !strings.Contains(in, "Facts held already") || !strings.Contains(in, "kg_add of service_x") {
		t.Fatalf("the session start before the held add was settled does not tell it:\n%s", in)
	}
	endedClosedAlready(t, h, primary)
	if in := h.edge.sessionInstructions(ctx); strings.Contains(in, "service_x") || strings.Contains(in, "Facts") {
		t.Errorf("the session start after the agent settled its held add still tells it:\n%s", in)
	}
}

// A held supersede from a held add's value settles the add, not itself:
// the next session start still tells the supersede (its new value was
// not made current) and no longer the add, as edge.not_filed does.
func TestASessionStartAfterAHeldSupersedeTellsItAlone(t *testing.T) {
	t.Parallel()
	h, primary := heldAdd(t)
	supersededHeld(t, h, primary)
	if in := h.edge.sessionInstructions(context.Background()); !strings.Contains(in, "kg_supersede of service_x") || strings.Contains(in, "kg_add of service_x") {
		t.Errorf("the session start after a held supersede settled the held add (want the supersede told, not the add):\n%s", in)
	}
}

// endedClosedAlready has the primary end heldAdd's value, then the agent
// end it too: the gateway answers it already_closed.
func endedClosedAlready(t *testing.T, h *harness, primary string) {
	t.Helper()
	postTool(t, primary, testToken, "kg_invalidate", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "ended": "2026-12-05"})
	if _, res := h.call("kg_invalidate", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "ended": "2026-12-06"}); res.IsError {
		t.Fatalf("kg_invalidate refused: %s", refusalText(res))
	}
	h.drained()
	if !closedNoted(t, h, "kg_invalidate") {
		t.Fatal("the end was not answered already_closed")
	}
}

// supersededHeld has the primary supersede heldAdd's value host_1 with
// host_2, then the agent supersede it with host_3: the gateway holds it.
func supersededHeld(t *testing.T, h *harness, primary string) {
	t.Helper()
	postTool(t, primary, testToken, "kg_supersede", map[string]any{"subject": "service_x", "predicate": "runs_on", "old_object": "host_1", "new_object": "host_2", "at": "2026-12-05"})
	if _, res := h.call("kg_supersede", map[string]any{"subject": "service_x", "predicate": "runs_on", "old_object": "host_1", "new_object": "host_3", "at": "2026-12-06"}); res.IsError {
		t.Fatalf("kg_supersede refused: %s", refusalText(res))
	}
	h.drained()
}
