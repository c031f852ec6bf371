package gateway

import (
	"testing"
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
