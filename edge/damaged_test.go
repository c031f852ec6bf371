package edge

import (
	"fmt"
	"strings"
	"testing"
)

// A local palace whose SQLite failed MemPalace's integrity check: MemPalace
// refuses every call on it with -32002 until it is repaired, before the
// tool runs. A write the policy replicates is queued for the primary, as
// for a local palace that is down, and the answer says the local palace
// does not have it and why; a merged read answers from the primary,
// degraded. Before, the agent got -32002 and the write went nowhere (an
// outside tester, attack13 05).
func TestADamagedLocalPalaceQueuesWritesAndReadsThePrimary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{childEnv: []string{"FAKEPALACE_DAMAGED=1"}})
	const content = "the deploy key rotates on mondays"
	m, res := h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
	if res.IsError || m["queued"] != true || !strings.Contains(fmt.Sprint(m["message"]), "repaired") {
		t.Fatalf("add_drawer on a damaged local palace: %v", m)
	}
	h.eventually("the write on the primary", func() bool {
		page := h.onPrimary("list_drawers", map[string]any{"wing": "shared"})
		return strings.Contains(fmt.Sprint(page), "drawer_shared_ops_")
	})
	s, res := h.call("search", map[string]any{"query": "deploy key"})
	if res.IsError || !strings.Contains(fmt.Sprint(s), content) || s["degraded"] != true {
		t.Errorf("search on a damaged local palace: %v", s)
	}
}
