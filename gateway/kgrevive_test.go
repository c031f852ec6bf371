package gateway

import (
	"maps"
	"slices"
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// A fact ops retired and another device filed again is a new fact, the
// re-adder's: read by a device that trusts ops, the current fact names
// the re-adder (or unknown, when its answer was lost), never ops, and
// the retired one stays ops's (attack22 F8: it read as ops's current
// word). The same after a supersede whose answer was lost (t3e; the
// re-add starts after it: one starting before is held, its value replaced
// by a current one, replacedHeld), and after a close made around the
// gateway.
func TestARetiredFactFiledAgainIsTheReAddersFact(t *testing.T) {
	retiredFactFiledAgain(t, func(t *testing.T) string { return startFake(t).url })
}

// retiredFactFiledAgain is the test above against the upstream start
// gives.
func retiredFactFiledAgain(t *testing.T, start func(t *testing.T) string) {
	const s, p, o = "release", "release_rule", "skip the tests"
	fact := map[string]any{"subject": s, "predicate": p, "object": o}
	cases := []struct {
		name      string
		retire    func(g *gw, proxy *realpalace.Proxy)
		lostReAdd bool
		want      string // the current fact's origin
		from      string // the re-add's valid_from ("": none)
	}{
		{"retired through the gateway", func(g *gw, _ *realpalace.Proxy) { g.mustKG("ops", "kg_invalidate", fact) }, false, "mal", ""},
		{"retired through the gateway, the re-add's answer lost", func(g *gw, _ *realpalace.Proxy) { g.mustKG("ops", "kg_invalidate", fact) }, true, "unknown", ""},
		{"superseded, its answer lost, the re-add's too", func(g *gw, proxy *realpalace.Proxy) {
			proxy.Drop("mempalace_kg_supersede")
			g.call(g.tokens["ops"], "kg_supersede", map[string]any{"subject": s, "predicate": p, "old_object": o, "new_object": "ship on mondays"})
		}, true, "unknown", "2099-01-01"},
		{"retired around the gateway", func(g *gw, _ *realpalace.Proxy) {
			upCallHTTP(g, "mempalace_kg_invalidate", fact)
		}, false, "mal", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			proxy := realpalace.NewProxy(t, start(t))
			g := newGWAt(t, []Device{
				{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
				{ID: "mal", Label: "mal", Read: []string{"team_b"}, Write: []string{"team_b"}, KG: "write"},
				{ID: "mw", Label: "mw", Read: []string{"*"}, KG: "read", Trusts: []string{"ops"}},
			}, &upstream{name: "a cutting proxy", url: proxy.URL})
			g.mustKG("ops", "kg_add", fact)
			// A fact filed closed (a backfill) is its writer's too.
			g.mustKG("ops", "kg_add", map[string]any{"subject": s, "predicate": p, "object": "ship on fridays", "valid_from": "2020-01-01", "valid_to": "2021-01-01"})
			c.retire(g, proxy)
			if c.lostReAdd {
				proxy.Drop("mempalace_kg_add")
			}
			reAdd := maps.Clone(fact)
			if c.from != "" {
				reAdd["valid_from"] = c.from
			}
			g.call(g.tokens["mal"], "kg_add", reAdd)
			if lost := proxy.Lost(); c.lostReAdd != slices.Contains(lost, "mempalace_kg_add") {
				t.Fatalf("answers lost: %v", lost)
			}
			res, rpc, _ := g.call(g.tokens["mw"], "kg_query", map[string]any{"entity": s})
			if rpc != nil {
				t.Fatal(rpc)
			}
			current, retired := 0, 0
			for _, x := range res["facts"].([]any) {
				f := x.(map[string]any)
				if f["object"] == "ship on fridays" && originOf(t, f)["device"] != "ops" {
					t.Errorf("ops's backfilled fact reads %v", f)
				}
				if f["object"] != o {
					continue
				}
				want := "ops"
				if f["valid_to"] == nil {
					want, current = c.want, current+1
				} else {
					retired++
				}
				if got := originOf(t, f)["device"]; got != want {
					t.Errorf("mw reads %v with origin %v, want %s", f, originOf(t, f), want)
				}
			}
			if current != 1 || retired != 1 {
				t.Errorf("facts %v: want one current and one retired %q", res["facts"], o)
			}
		})
	}
}

// mustKG makes a KG write as device id through the gateway.
func (g *gw) mustKG(id, tool string, args map[string]any) {
	g.t.Helper()
	if res, rpc, _ := g.call(g.tokens[id], tool, args); rpc != nil || res["success"] != true {
		g.t.Fatalf("%s's %s: %v %v", id, tool, res, rpc)
	}
}

// upCallHTTP makes a write around the gateway, straight at its upstream.
func upCallHTTP(g *gw, tool string, args map[string]any) {
	g.t.Helper()
	if res := g.srv.upstreamResult(g.t.Context(), tool, args); res["success"] != true {
		g.t.Fatalf("%s around the gateway: %v", tool, res)
	}
}
