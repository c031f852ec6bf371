package edge

import (
	"strings"
	"testing"
)

// Read-your-writes for the knowledge graph: a kg_* read routed to the
// primary first, made while this device's own KG write is still on its
// way there, answers from the local palace, which has it, and says so
// (found by an outside tester against real MemPalace: kg_query right
// after kg_add answered count 0 from the primary).
func TestAKGReadSeesItsOwnUnsentFact(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	release := make(chan struct{})
	h.primary.SetHold("mempalace_kg_add", release) // the add stays in flight
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	h.call("kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "outbox"})

	r, _ := h.call("kg_query", map[string]any{"entity": "edge"})
	ed, _ := r["edge"].(map[string]any)
	if r["count"] != 1.0 || ed["source"] != "local" || !strings.Contains(asString(ed["why"]), "not on the primary yet") {
		t.Fatalf("kg_query right after this device's kg_add: %v, want its fact, from the local palace, saying why", r)
	}
	if r, _ := h.call("kg_stats", nil); r["edge"].(map[string]any)["source"] != "local" {
		t.Errorf("kg_stats with a KG write unsent: %v, want the local palace's", r)
	}
	if r, _ := h.call("status", nil); r["edge"].(map[string]any)["source"] != "primary" {
		t.Errorf("status (not a KG read) with a KG write unsent: %v, want the primary's", r)
	}

	close(release)
	released = true
	h.drained()
	if r, _ := h.call("kg_query", map[string]any{"entity": "edge"}); r["count"] != 1.0 || r["edge"].(map[string]any)["source"] != "primary" {
		t.Fatalf("kg_query once the add is sent: %v, want the primary's answer", r)
	}
}

// Read-your-writes is per entity: with this device's fact about one entity
// stuck on its way to the primary (a day offline, one fact queued), a KG
// read about any other entity still answers with what the fleet knows,
// from the primary; a read about an entity the unsent fact names (subject
// or object, as MemPalace ids entities) answers from the local palace.
func TestAKGReadIsLocalOnlyForTheEntitiesItsUnsentFactsName(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	h.onPrimary("kg_add", map[string]any{"subject": "gateway", "predicate": "guards", "object": "serve"}) // another device's fact
	release := make(chan struct{})
	h.primary.SetHold("mempalace_kg_add", release) // this device's add stays unsent
	defer close(release)
	h.call("kg_add", map[string]any{"subject": "Edge Router", "predicate": "uses", "object": "outbox"})

	for _, entity := range []string{"gateway", "serve"} {
		r, _ := h.call("kg_query", map[string]any{"entity": entity})
		if ed, _ := r["edge"].(map[string]any); r["count"] != 1.0 || ed["source"] != "primary" {
			t.Errorf("kg_query %s (no unsent fact names it): %v, want the primary's fact, from the primary", entity, r)
		}
	}
	if r, _ := h.call("kg_timeline", map[string]any{"entity": "gateway"}); r["edge"].(map[string]any)["source"] != "primary" {
		t.Errorf("kg_timeline gateway: %v, want the primary's", r)
	}
	for _, entity := range []string{"edge router", "Outbox"} {
		r, _ := h.call("kg_query", map[string]any{"entity": entity})
		ed, _ := r["edge"].(map[string]any)
		if r["count"] != 1.0 || ed["source"] != "local" || !strings.Contains(asString(ed["why"]), "not on the primary yet") {
			t.Errorf("kg_query %s (the unsent fact names it): %v, want the unsent fact, from the local palace, saying why", entity, r)
		}
	}
	if r, _ := h.call("kg_timeline", nil); r["edge"].(map[string]any)["source"] != "local" {
		t.Errorf("kg_timeline of every entity with a KG write unsent: %v, want the local palace's", r)
	}
}
