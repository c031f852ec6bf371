package gateway

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Against real MemPalace 3.11.0 (an edge over a real mempalace-mcp, the
// gateway in front of a real serve): the base an edge keeps for an update
// (the sha256 of its local palace's get_drawer text) is the sha256 of the
// primary's get_drawer text of the same drawer, Unicode, CRLF, tabs and
// trailing blanks included, so an update of an unchanged drawer is made,
// not refused as a conflict; another device's edit first makes it one,
// and a retry overwrites.
func TestRealTheBaseOfALocalTextMatchesThePrimarys(t *testing.T) {
	g, onPrimary := realLaptopFleet(t)
	local := realpalace.New(t)
	s := edgeWith(t, g.http.URL+"/mcp", g.tokens["laptop-7f3a"], local.Dir, local.MCPCommand(), local.Env(), 60*time.Second)
	ob, err := outbox.Open(filepath.Join(local.Dir, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	settled := func(m map[string]any) outbox.Op {
		t.Helper()
		id, _ := m["edge"].(map[string]any)["op_id"].(string)
		o := settledOp(t, ob, id, "the update settled")
		return o
	}

	const text = "naïve café — ünïcödé 日本語\r\n\tindented line  \n trailing blanks   "
	id, _ := edgeCall(t, s, "add_drawer", map[string]any{"wing": "shared", "room": "c63", "content": text})["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return onPrimary(id) != "" })
	first := edgeCall(t, s, "update_drawer", map[string]any{"drawer_id": id, "content": "laptop's first edit"})
	o := settled(first)
	base, err := ob.Meta(context.Background(), "base:"+o.ID)
	if err != nil || base == "" || base != origin.Base(text) {
		t.Errorf("the update's base %q (%v), want the sha256 of the text filed, %s", base, err, origin.Base(text))
	}
	if o.State != outbox.Done || onPrimary(id) != "laptop's first edit" {
		t.Fatalf("an update of an unchanged drawer: %s %s, primary %q (a false conflict)", o.State, o.Error, onPrimary(id))
	}

	if _, rpc, _ := g.call(g.tokens["ops-0001"], "update_drawer", map[string]any{"drawer_id": id, "content": "ops's edit"}); rpc != nil {
		t.Fatal(rpc)
	}
	o = settled(edgeCall(t, s, "update_drawer", map[string]any{"drawer_id": id, "content": "laptop's second edit"}))
	if o.State != outbox.Dead || outbox.FailureOf(o.Error).Kind != outbox.ChangedOnPrimary || onPrimary(id) != "ops's edit" {
		t.Fatalf("an update after another device's edit: %s %s, primary %q", o.State, o.Error, onPrimary(id))
	}
	if _, err := ob.Retry(context.Background(), o.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the retry overwrote", func() bool { return onPrimary(id) == "laptop's second edit" })

	// A drop keeps theirs, in laptop's palace too: its edit of the
	// Unicode text is the local copy the edge replaces, and its next edit
	// lands.
	if _, rpc, _ := g.call(g.tokens["ops-0001"], "update_drawer", map[string]any{"drawer_id": id, "content": "ops's second edit"}); rpc != nil {
		t.Fatal(rpc)
	}
	o = settled(edgeCall(t, s, "update_drawer", map[string]any{"drawer_id": id, "content": text}))
	if o.State != outbox.Dead || outbox.FailureOf(o.Error).Kind != outbox.ChangedOnPrimary {
		t.Fatalf("laptop's edit after ops's second: %s %s", o.State, o.Error)
	}
	if _, _, err := ob.Drop(context.Background(), o.ID); err != nil {
		t.Fatal(err)
	}
	settledNotes(t, ob) // laptop's palace took ops's text (a read before shows the primary's text already)
	if got := edgeCall(t, s, "get_drawer", map[string]any{"drawer_id": id})["content"]; got != "ops's second edit" {
		t.Fatalf("laptop's read after the take: %q", got)
	}
	if o = settled(edgeCall(t, s, "update_drawer", map[string]any{"drawer_id": id, "content": "laptop's edit after the drop"})); o.State != outbox.Done || onPrimary(id) != "laptop's edit after the drop" {
		t.Fatalf("laptop's edit after the drop: %s %s, primary %q", o.State, o.Error, onPrimary(id))
	}
}

// Against real MemPalace 3.11.0: an end of a fact closed already is
// answered success with nothing changed, and the gateway's answer says so
// (already_closed, the end kept); the first end is answered as ever (one
// device ends it twice here: the gateway reads the facts alike).
func TestRealTheSecondEndOfAFactIsToldItWasClosedAlready(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, deleters, u)
	fact := map[string]any{"subject": "att63svc2", "predicate": "runs_on", "object": "hostA"}
	g.mustKG("ops-0001", "kg_add", map[string]any{"subject": "att63svc2", "predicate": "runs_on", "object": "hostA", "valid_from": "2026-01-01"})
	fact["ended"] = "2026-06-01"
	if res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_invalidate", fact); rpc != nil || res["success"] != true || res["already_closed"] != nil {
		t.Fatalf("the first end: %v %v", res, rpc)
	}
	fact["ended"] = "2026-07-01"
	if res, rpc, _ := g.call(g.tokens["ops-0001"], "kg_invalidate", fact); rpc != nil || res["success"] != true || res["already_closed"] != "2026-06-01" {
		t.Errorf("the second end: %v %v (want already_closed 2026-06-01)", res, rpc)
	}
	facts := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "att63svc2", "direction": "outgoing"})["facts"].([]any)
	if len(facts) != 1 || facts[0].(map[string]any)["valid_to"] != "2026-06-01" {
		t.Errorf("the primary's facts: %v", facts)
	}
}

// realLaptopFleet is a gateway with its ledger in front of real serve,
// for device laptop-7f3a (every wing) and the deleters, and a read of a
// drawer's text on the primary ("" when it holds none).
func realLaptopFleet(t *testing.T) (*gw, func(id string) string) {
	t.Helper()
	u, srv := startReal(t)
	laptop := Device{ID: "laptop-7f3a", Label: "laptop", Read: []string{"*"}, Write: []string{"*"}, ReadRate: 1e9, WriteRate: 1e9}
	g := newGWAt(t, append([]Device{laptop}, deleters...), u)
	g.withLedger()
	return g, func(id string) string {
		got, _ := srv.Call("mempalace_get_drawer", map[string]any{"drawer_id": id})
		c, _ := got["content"].(string)
		return c
	}
}
