package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A device that withholds untrusted records gets the search limit it
// asked of records it sees: MemPalace cuts the page to the limit before
// the gateway leaves the untrusted hits out, so the gateway asks again,
// wider. Before, the withheld hits took the slots and the page came back
// short (limit 1: no hit at all, though the admin's matched).
func TestWithheldHitsDoNotTakeTheLimit(t *testing.T) {
	t.Parallel()
	g := newGW(t, trustingDevices(UntrustedWithhold))
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	for _, w := range []struct{ tok, text string }{
		{laptop, "deploy green button"}, {laptop, "deploy green button now"},
		{admin, "to deploy, ops say: press the green button, then wait for the canary and read its log"},
	} {
		if res, rpc, _ := g.call(w.tok, "add_drawer", map[string]any{"wing": "shared", "room": "howto", "content": w.text}); rpc != nil || res["success"] != true {
			t.Fatalf("write: %v %v", res, rpc)
		}
	}
	hits, rpc, _ := g.call(desk, "search", map[string]any{"query": "deploy green button", "wing": "shared", "limit": 1})
	list, _ := hits["results"].([]any)
	if rpc != nil || len(list) != 1 || originOf(t, list[0])["device"] != "admin-0001" || hits["untrusted_withheld"] == nil {
		t.Errorf("desk's search, limit 1, past laptop's two withheld hits: %v %v, want the admin's hit, and untrusted_withheld", hits, rpc)
	}
}

// A flood of more withheld records than MemPalace reads at once (its 100)
// leaves a withholding device a page short of what it may see: the
// gateway cannot read past them, and says so in withheld_cut. Before, the
// page came back empty with nothing saying it was cut (outside tester
// attack38 B1: 120 untrusted diary lines blanked the diary).
func TestAWithheldFloodPastMemPalacesCapIsSaid(t *testing.T) {
	t.Parallel()
	ds := trustingDevices(UntrustedWithhold)
	for i := range ds {
		ds[i].ReadRate, ds[i].WriteRate = 1e9, 1e9
	}
	// laptop's and the admin's agents share desk's diary (pi)
	ds[0].Agents, ds[0].Write = []string{"pi@laptop"}, []string{"wing_pi"}
	ds[2].Agents = []string{"pi@ops"}
	g := newGW(t, ds)
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	entry := map[string]any{"agent_name": "pi", "entry": "the admin's line, older than the flood"}
	if res, rpc, _ := g.call(admin, "diary_write", entry); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's diary_write: %v %v", res, rpc)
	}
	read := func() map[string]any {
		r, rpc, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi", "last_n": 3})
		if rpc != nil {
			t.Fatalf("desk's diary_read: %v", rpc)
		}
		return r
	}
	for i := range 101 {
		g.advance(time.Second)
		if res, rpc, _ := g.call(laptop, "diary_write", map[string]any{"agent_name": "pi", "entry": fmt.Sprintf("flood line %d", i)}); rpc != nil || res["success"] != true {
			t.Fatalf("laptop's diary_write %d: %v %v", i, res, rpc)
		}
		if i == 98 { // 99 withheld: the admin's line is the 100th, still read
			if es, _ := read()["entries"].([]any); len(es) != 1 {
				t.Fatalf("desk's page past 99 withheld lines: %v, want the admin's line", es)
			}
		}
	}
	r := read()
	if es, _ := r["entries"].([]any); len(es) != 0 || !strings.Contains(fmt.Sprint(r["withheld_cut"]), "100 withheld") {
		t.Errorf("desk's page past 101 withheld lines: %v, want none and withheld_cut saying why", r)
	}
}
