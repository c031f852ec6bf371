package gateway

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// An end (kg_invalidate, kg_supersede) of a triple the primary holds no
// fact of is refused, retryably (ledger.CodeNotOnPrimary), for any device,
// admin too, saying the fact is not on the primary and how to send it:
// MemPalace answers it success and changes nothing (a supersede opens its
// new fact beside the current one), so the end was lost silently, and
// with two palaces of one device the add landing after the end stayed
// current for ever (attack99 F2). Sent again once the add has landed, the
// end closes it, and the supersede leaves one current value.
func TestAnEndOfAFactThePrimaryLacksIsRefusedUntilItLands(t *testing.T) {
	endsOfAbsentFacts(t, func(t *testing.T) *upstream { return startFake(t) })
}

// TestRealAnEndOfAFactThePrimaryLacksIsRefusedUntilItLands: the same
// against real MemPalace 3.11.0 serve, whose own answer to such an end
// is the success the gateway must not pass on.
func TestRealAnEndOfAFactThePrimaryLacksIsRefusedUntilItLands(t *testing.T) {
	u, srv := startReal(t)
	res := srv.MustCall(t, "mempalace_kg_invalidate", map[string]any{"subject": "svc_none", "predicate": "uses", "object": "db_0", "ended": "2026-12-06"})
	if res["success"] != true {
		t.Fatalf("MemPalace %s answers an end of a fact it lacks %v; the gateway's refusal assumes success", "3.11.0", res)
	}
	endsOfAbsentFacts(t, func(t *testing.T) *upstream { return u })
}

func endsOfAbsentFacts(t *testing.T, start func(t *testing.T) *upstream) {
	g := newGWAt(t, []Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
		{ID: "beta", Label: "beta", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
	}, start(t))
	refused := func(id, tool string, args map[string]any) {
		t.Helper()
		res, rpc, _ := g.call(g.tokens[id], tool, args)
		data, _ := rpc["data"].(map[string]any)
		if rpc == nil || int(rpc["code"].(float64)) != ledger.CodeNotOnPrimary || data["rule"] != ruleNotOnPrimary.String() ||
			!strings.Contains(str(rpc["message"]), "holds no fact") || !strings.Contains(str(rpc["message"]), "devbox-config join") {
			t.Errorf("%s's %s of a fact the primary lacks: %v %v; want refused %d (%s) naming join", id, tool, res, rpc, ledger.CodeNotOnPrimary, ruleNotOnPrimary)
		}
	}
	// The solitary case: a fact only a palace of beta's ever had.
	solo := map[string]any{"subject": "svc_solo", "predicate": "uses", "object": "cache_9", "ended": "2026-12-06"}
	refused("beta", "kg_invalidate", solo)
	refused("ops-0001", "kg_invalidate", solo)
	owner := map[string]any{"subject": "svc_f", "predicate": "owner", "old_object": "ann", "new_object": "bob"}
	refused("beta", "kg_supersede", owner)
	refused("ops-0001", "kg_supersede", owner)
	if current := currentObjects(t, g, "ops-0001", "svc_f"); len(current) != 0 {
		t.Errorf("a refused supersede opened %v", current)
	}

	// The order case: the end first (from one palace of beta), the add
	// after it (from the other); the end sent again closes the fact.
	alerts := map[string]any{"subject": "svc_e", "predicate": "alerts_to", "object": "pager_1", "ended": "2026-12-06"}
	refused("beta", "kg_invalidate", alerts)
	g.mustKG("beta", "kg_add", map[string]any{"subject": "svc_e", "predicate": "alerts_to", "object": "pager_1", "valid_from": "2026-12-01"})
	g.mustKG("beta", "kg_invalidate", alerts)
	if current := currentObjects(t, g, "ops-0001", "svc_e"); len(current) != 0 {
		t.Errorf("svc_e's facts current after its end landed: %v", current)
	}
	g.mustKG("beta", "kg_add", map[string]any{"subject": "svc_f", "predicate": "owner", "object": "ann", "valid_from": "2026-12-01"})
	g.mustKG("beta", "kg_supersede", owner)
	if current := currentObjects(t, g, "ops-0001", "svc_f"); len(current) != 1 || current["owner"] != "bob" {
		t.Errorf("svc_f's current facts after the supersede landed: %v, want owner bob alone", current)
	}
	// A closed fact is no absent one: a second end is told already_closed.
	if res, rpc, _ := g.call(g.tokens["beta"], "kg_invalidate", alerts); rpc != nil || res["already_closed"] == nil {
		t.Errorf("a second end of svc_e: %v %v; want already_closed", res, rpc)
	}
}

// A kg_add of a fact the primary holds current already files nothing
// (MemPalace answers the current fact's id): its answer names the device
// whose fact it is and says the add's dates were not kept, so an edge
// can tell its agent (attack99 F1: told nothing, its dates lost); this
// device's own fact sent again with the same dates gains nothing.
func TestAnAddHeldByAnothersFactSaysWhoseAndThatItsDatesWereNotKept(t *testing.T) {
	g := newGWAt(t, []Device{
		{ID: "alpha", Label: "alpha", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
		{ID: "beta", Label: "beta", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
	}, startFake(t))
	fact := map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "valid_from": "2026-12-01"}
	g.mustKG("alpha", "kg_add", fact)
	res, rpc, _ := g.call(g.tokens["beta"], "kg_add", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "host_1", "valid_from": "2026-11-15"})
	if note := str(res["note"]); rpc != nil || res["held_by"] != "alpha" || res["valid_from_kept"] != "2026-12-01" ||
		!strings.Contains(note, "device alpha's") || !strings.Contains(note, "2026-11-15") || !strings.Contains(note, "not kept") {
		t.Errorf("beta's add of alpha's current fact: %v %v; want held_by alpha and a note that its dates were not kept", res, rpc)
	}
	if res, rpc, _ := g.call(g.tokens["alpha"], "kg_add", fact); rpc != nil || res["success"] != true || res["held_by"] != nil || res["note"] != nil {
		t.Errorf("alpha's own add sent again: %v %v; want a plain success", res, rpc)
	}
	// MemPalace keeps "+00:00" as "Z" (and trims): the same instant sent
	// again is this device's own dates kept (review32 R2).
	utc := map[string]any{"subject": "service_y", "predicate": "runs_on", "object": "host_2", "valid_from": "2026-12-01T10:00:00+00:00"}
	g.mustKG("alpha", "kg_add", utc)
	if res, rpc, _ := g.call(g.tokens["alpha"], "kg_add", utc); rpc != nil || res["success"] != true || res["held_by"] != nil || res["note"] != nil {
		t.Errorf("alpha's own add at +00:00 sent again: %v %v; want a plain success", res, rpc)
	}
}

// A KG write that would open a fact whose subject, predicate or object
// holds an invisible character (a zero-width space, a Hangul filler) is
// refused as written, as wing, room and agent names are: every --kg
// device reads every fact, and "service_x" with a zero-width space lists
// as "service_x" (attack99 F11). A fact so named filed before the rule
// (around the gateway here) is still ended.
func TestAFactNameWithAnInvisibleCharacterIsRefused(t *testing.T) {
	g := newGWAt(t, []Device{{ID: "beta", Label: "beta", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"}}, startFake(t))
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"kg_add", map[string]any{"subject": "service_x\u200b", "predicate": "runs_on", "object": "evil_host"}},
		{"kg_add", map[string]any{"subject": "service_x", "predicate": "runs\u3164on", "object": "evil_host"}},
		{"kg_add", map[string]any{"subject": "service_x", "predicate": "runs_on", "object": "evil_host\u2060"}},
		{"kg_supersede", map[string]any{"subject": "service_x", "predicate": "runs_on", "old_object": "host_1", "new_object": "\ufeffhost_2"}},
	} {
		_, rpc, _ := g.call(g.tokens["beta"], c.tool, c.args)
		if rpc == nil || rpc["code"] != -32602.0 || !strings.Contains(str(rpc["message"]), "invisible character") {
			t.Errorf("%s %v: %v; want refused -32602 naming the invisible character", c.tool, c.args, rpc)
		}
	}
	if current := currentObjects(t, g, "beta", "service_x"); len(current) != 0 {
		t.Errorf("refused writes filed %v", current)
	}
	odd := map[string]any{"subject": "svc_y", "predicate": "uses", "object": "db\u200b"}
	upCallHTTP(g, "mempalace_kg_add", odd)
	g.mustKG("beta", "kg_invalidate", odd)
}
