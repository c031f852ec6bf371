package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// attack64 F4: an optional name argument sent as null is one not given,
// as MemPalace reads it (None, its default): "wing": null searches every
// wing the device reads, authorized and answered as such a search. Before,
// the gateway refused it (-32602 must be a string), and the agent got no
// results at all. An update_drawer's null wing moves nothing; a
// patch_submit's null room (its default is "patches") stays refused, and so
// do limit: true and an integer too big for a float64.
func TestNullOptionalNameIsNotGiven(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	g.call(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "the null wing draft, the desk's own"})
	res, _, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "the null wing checklist for the team"})
	id, _ := res["drawer_id"].(string)
	if id == "" {
		t.Fatalf("add_drawer: %v", res)
	}
	res, rpc, _ := g.call(laptop, "search", map[string]any{"query": "the null wing", "wing": nil, "room": nil})
	hits, _ := res["results"].([]any)
	if rpc != nil || len(hits) != 1 || strings.Contains(fmt.Sprint(res), "private_desk") {
		t.Fatalf("a search with wing null: %v %v, want the one hit in a wing the laptop reads", res, rpc)
	}
	if res, rpc, _ := g.call(laptop, "update_drawer", map[string]any{"drawer_id": id, "wing": nil, "content": "the null wing checklist, updated"}); rpc != nil || res["success"] != true {
		t.Fatalf("update_drawer with wing null: %v %v", res, rpc)
	}
	if res, _, _ := g.call(laptop, "get_drawer", map[string]any{"drawer_id": id}); res["wing"] != "shared" {
		t.Errorf("after an update with wing null the drawer is in %v, want shared: %v", res["wing"], res)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"patch_submit", map[string]any{"stream": "s", "content": "diff", "from_agent": "opencode@laptop", "room": nil}},
		{"search", map[string]any{"query": "q", "limit": true}},
		{"search", map[string]any{"query": "q", "limit": 1 << 60}},
	} {
		if _, rpc, _ := g.call(laptop, c.tool, c.args); rpc == nil || rpc["code"] != -32602.0 {
			t.Errorf("%s %v: %v, want -32602", c.tool, c.args, rpc)
		}
	}
}
