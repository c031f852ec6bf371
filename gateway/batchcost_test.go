package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// attack69 F3: one checkpoint of 150 items of 99,000 characters counted as
// one write, and held the primary's single write slot for minutes. A
// device that is not admin now pays one write an item (at most its write
// burst, so a checkpoint of more items still passes and its next writes
// wait), and one carrying more than 2 MiB of content is refused, saying how
// to split it; an admin's is one write.
func TestACheckpointCostsItsItems(t *testing.T) {
	t.Parallel()
	slow := slices.Clone(devices) // a write back every 100 s: the test's own time never refills one (race-detector CI, CI 95)
	for i := range slow {
		slow[i].WriteRate = 0.01
	}
	g := newGW(t, slow)
	items := func(n, size int, tag string) map[string]any {
		var xs []any
		for i := range n {
			xs = append(xs, map[string]any{"wing": "shared", "room": "batch", "content": fmt.Sprintf("%s item number %d %s", tag, i, strings.Repeat("x", size))})
		}
		return map[string]any{"items": xs}
	}
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	_, rpc, _ := g.call(laptop, "checkpoint", items(22, 99_000, "too big"))
	if rpc == nil || rpc["code"] != float64(CodeDenied) || !strings.Contains(fmt.Sprint(rpc["message"]), "more than the 2097152 a device may file in one call") {
		t.Fatalf("laptop's checkpoint of 2.2 MB: %v, want refused naming the cap", rpc)
	}
	if _, rpc, _ := g.call(desk, "add_drawer", map[string]any{"wing": "shared", "room": "batch", "content": "one write before the checkpoint"}); rpc != nil {
		t.Fatalf("desk's add_drawer: %v", rpc)
	}
	if _, rpc, _ := g.call(desk, "checkpoint", items(25, 10, "many")); rpc != nil {
		t.Fatalf("desk's checkpoint of 25 small items, one write after another: %v (it passes on one token, the rest taken as debt)", rpc)
	}
	if _, rpc, _ := g.call(desk, "checkpoint", items(2, 10, "second")); rpc == nil || rpc["code"] != float64(CodeRateLimited) {
		t.Fatalf("desk's next checkpoint at once: %v, want over its write rate (the 25 items took its burst)", rpc)
	}
	if _, rpc, _ := g.call(admin, "checkpoint", items(25, 10, "admin")); rpc != nil {
		t.Fatalf("the admin's checkpoint of 25 items: %v", rpc)
	}
	if _, rpc, _ := g.call(admin, "checkpoint", items(2, 10, "admin again")); rpc != nil {
		t.Fatalf("the admin's next checkpoint: %v (an admin's costs one write)", rpc)
	}
}
