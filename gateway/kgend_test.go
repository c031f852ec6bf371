package gateway

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// A device with kg write that is not admin ends (kg_invalidate,
// kg_supersede) only the facts it wrote: another device's fact, or one
// of unknown origin, is refused saying why and stays current for a
// device that trusts its writer; its own it ends, and an admin ends any
// (attack44 F2: laptop ended the admin's facts palace-wide).
func TestANarrowDeviceEndsOnlyItsOwnFacts(t *testing.T) {
	endsOnlyOwnFacts(t, func(t *testing.T) *upstream { return startFake(t) })
}

// TestRealANarrowDeviceEndsOnlyItsOwnFacts: the same against real
// MemPalace serve.
func TestRealANarrowDeviceEndsOnlyItsOwnFacts(t *testing.T) {
	endsOnlyOwnFacts(t, func(t *testing.T) *upstream { u, _ := startReal(t); return u })
}

// endsOnlyOwnFacts is the test above against the upstream start gives.
func endsOnlyOwnFacts(t *testing.T, start func(t *testing.T) *upstream) {
	g := newGWAt(t, []Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
		{ID: "alice", Label: "alice", Read: []string{"shared"}, KG: "read", Trusts: []string{"ops-0001"}, Untrusted: "withhold"},
	}, start(t))
	budget := map[string]any{"subject": "project_x", "predicate": "budget", "object": "12M"}
	g.mustKG("ops-0001", "kg_add", budget)
	upCallHTTP(g, "mempalace_kg_add", map[string]any{"subject": "project_x", "predicate": "owner", "object": "bob"})
	refused := []struct {
		tool string
		args map[string]any
		rule Rule
	}{
		{"kg_invalidate", budget, ruleOthersFact},
		{"kg_supersede", map[string]any{"subject": "project_x", "predicate": "budget", "old_object": "12M", "new_object": "0"}, ruleOthersFact},
	}
	for _, c := range refused {
		_, rpc, _ := g.call(g.tokens["laptop-7f3a"], c.tool, c.args)
		data, _ := rpc["data"].(map[string]any)
		if rpc == nil || data["rule"] != c.rule.String() || !strings.Contains(str(rpc["message"]), "ends only the facts it wrote") {
			t.Errorf("laptop's %s of %v: %v", c.tool, c.args, rpc)
		}
	}
	if current := currentObjects(t, g, "alice", "project_x"); current["budget"] != "12M" {
		t.Errorf("alice, who trusts ops only, reads project_x's current facts as %v after laptop's refused ends", current)
	}
	// A fact of unknown origin (filed around the gateway here; a device's
	// own whose kg_add answer was lost reads so too) laptop may end.
	g.mustKG("laptop-7f3a", "kg_invalidate", map[string]any{"subject": "project_x", "predicate": "owner", "object": "bob"})
	if current := currentObjects(t, g, "ops-0001", "project_x"); current["owner"] != "" {
		t.Errorf("ops reads project_x's current facts as %v after laptop ended the fact of unknown origin", current)
	}
	// Its own facts laptop ends; an admin ends anyone's.
	g.mustKG("laptop-7f3a", "kg_add", map[string]any{"subject": "project_x", "predicate": "phase", "object": "draft"})
	g.mustKG("laptop-7f3a", "kg_supersede", map[string]any{"subject": "project_x", "predicate": "phase", "old_object": "draft", "new_object": "review"})
	g.mustKG("laptop-7f3a", "kg_invalidate", map[string]any{"subject": "project_x", "predicate": "phase", "object": "review"})
	g.mustKG("ops-0001", "kg_invalidate", budget)
	g.mustKG("ops-0001", "kg_invalidate", map[string]any{"subject": "project_x", "predicate": "owner", "object": "bob"})
	if current := currentObjects(t, g, "ops-0001", "project_x"); len(current) != 0 {
		t.Errorf("after the ends, project_x's current facts are %v", current)
	}
}

// currentObjects is the object of each current outgoing fact of entity
// as device id reads it, by predicate.
func currentObjects(t *testing.T, g *gw, id, entity string) map[string]string {
	t.Helper()
	res, rpc, _ := g.call(g.tokens[id], "kg_query", map[string]any{"entity": entity})
	if rpc != nil {
		t.Fatalf("%s's kg_query: %v", id, rpc)
	}
	out := map[string]string{}
	for _, x := range res["facts"].([]any) {
		if f := x.(map[string]any); f["valid_to"] == nil && f["direction"] != "incoming" {
			out[str(f["predicate"])] = str(f["object"])
		}
	}
	return out
}

// A non-admin device's end of its own fact is checked under the write
// slot, right before it is sent: the fact ended and filed again around
// the gateway (of unknown origin now) while the device's kg_invalidate
// waited for the slot is refused, not ended (before, the check ran
// before the wait, on the fact as it was then, and the send ended the
// new one). The test holds the slot itself, so the interleaving is
// certain: the call waits in the queue while the fact changes.
func TestANarrowDevicesEndIsCheckedUnderTheWriteSlot(t *testing.T) {
	t.Parallel()
	g := newGWAt(t, []Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write"},
	}, startFake(t))
	phase := map[string]any{"subject": "project_x", "predicate": "phase", "object": "draft"}
	g.mustKG("laptop-7f3a", "kg_add", map[string]any{"subject": "project_x", "predicate": "phase", "object": "draft", "valid_from": "2026-01-01"})
	if g.srv.writes.acquire(t.Context(), "the-test") != nil {
		t.Fatal("the test could not take the write slot")
	}
	type answer struct{ rpc map[string]any }
	done := make(chan answer, 1)
	go func() {
		_, rpc, _ := g.call(g.tokens["laptop-7f3a"], "kg_invalidate", phase)
		done <- answer{rpc}
	}()
	for waiting := 0; waiting == 0; {
		runtime.Gosched()
		g.srv.writes.mu.Lock()
		waiting = len(g.srv.writes.waiting["laptop-7f3a"])
		g.srv.writes.mu.Unlock()
	}
	// ops ends laptop's fact and files it again while laptop's call waits
	// (around the gateway, and stamped as ops's: ops's own calls would wait
	// for the slot the test holds).
	upCallHTTP(g, "mempalace_kg_invalidate", phase)
	upCallHTTP(g, "mempalace_kg_add", map[string]any{"subject": "project_x", "predicate": "phase", "object": "draft", "valid_from": "2026-02-01"})
	if err := g.srv.prov.Record(t.Context(), provenance.Entry{Key: provenance.Fact("project_x", "phase", "draft", "2026-02-01", ""), Stamp: provenance.Stamp{Device: "ops-0001", Label: "ops", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	g.srv.writes.release()
	got := <-done
	data, _ := got.rpc["data"].(map[string]any)
	if got.rpc == nil || data["rule"] != ruleOthersFact.String() {
		t.Errorf("laptop's kg_invalidate of its fact, ended and filed again by ops while it waited: %v; want refused (%s)", got.rpc, ruleOthersFact)
	}
	if current := currentObjects(t, g, "ops-0001", "project_x"); current["phase"] != "draft" {
		t.Errorf("ops reads project_x's current facts as %v: the fact filed again was ended", current)
	}
}
