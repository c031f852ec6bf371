package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// attack69 F3: one checkpoint of 150 items counted as one write, and held
// the primary's single write slot for minutes. A device that is not admin
// now pays one write an item, and a checkpoint of more items than its
// write burst is refused, saying how to split it; an admin's is one write.
func TestACheckpointCostsItsItems(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	items := func(n int, tag string) map[string]any {
		var xs []any
		for i := range n {
			xs = append(xs, map[string]any{"wing": "shared", "room": "batch", "content": fmt.Sprintf("%s item number %d", tag, i)})
		}
		return map[string]any{"items": xs}
	}
	desk, admin := g.tokens["desk-9b21"], g.tokens["admin-0001"]
	_, rpc, _ := g.call(desk, "checkpoint", items(21, "too many"))
	if rpc == nil || rpc["code"] != float64(CodeDenied) || !strings.Contains(fmt.Sprint(rpc["message"]), "at most 20 items") {
		t.Fatalf("desk's checkpoint of 21 items: %v, want refused naming the cap of 20", rpc)
	}
	if _, rpc, _ := g.call(desk, "checkpoint", items(15, "first")); rpc != nil {
		t.Fatalf("desk's checkpoint of 15 items: %v", rpc)
	}
	if _, rpc, _ := g.call(desk, "checkpoint", items(15, "second")); rpc == nil || rpc["code"] != float64(CodeRateLimited) {
		t.Fatalf("desk's second checkpoint of 15 items at once: %v, want over its write rate", rpc)
	}
	if _, rpc, _ := g.call(admin, "checkpoint", items(25, "admin")); rpc != nil {
		t.Fatalf("the admin's checkpoint of 25 items: %v", rpc)
	}
}
