package edge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Issue 26, point 8: a write made while <palace>/edge/policy.json does
// not parse is held in the outbox, never lost, and is queued for the
// primary the moment the policy parses (and replicates its wing); one the
// policy then keeps local is settled as local. Before, such writes were
// never replicated, and nothing said so.
func TestAWriteMadeWhileThePolicyIsBrokenIsHeldThenSent(t *testing.T) {
	t.Parallel()
	e, _, _, ob := routerUnderTest(t)
	dir := t.TempDir()
	e.pw = &policyWatch{dir: dir}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, PolicyFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		// A later mtime even on a coarse clock: the watch sees a change.
		later := time.Now().Add(time.Duration(len(s)) * time.Second)
		os.Chtimes(filepath.Join(dir, PolicyFile), later, later)
	}
	write(`{"version": 1, "wings": {"private": {"replicate": "local"}},`) // cut off mid-edit
	ctx := context.Background()
	res := routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "written while broken"})
	routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "private", "room": "r", "content": "private, written while broken"})
	if edge, _ := res["edge"].(map[string]any); edge["replication"] != "held" {
		t.Errorf("the agent was told %v", res["edge"])
	}
	held, err := ob.List(ctx, 10, outbox.Held)
	if err != nil || len(held) != 2 {
		t.Fatalf("held ops: %d %v", len(held), err)
	}
	if st, _ := ob.Stats(ctx); st.ByState[outbox.Held] != 2 || st.ByState[outbox.Queued] != 0 {
		t.Fatalf("stats while the policy is broken: %v", st.ByState)
	}

	write(`{"version": 1, "wings": {"private": {"replicate": "local"}}}`)
	routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "written once it parsed"})
	st, _ := ob.Stats(ctx)
	if st.ByState[outbox.Held] != 0 || st.ByState[outbox.Queued] != 2 || st.ByState[outbox.Done] != 1 {
		t.Fatalf("after the policy parses: %v (want the two notes queued, the private one settled local)", st.ByState)
	}
	ops, _ := ob.List(ctx, 10, outbox.Done)
	if len(ops) != 1 || !strings.Contains(string(ops[0].Error), `"kind":"local"`) {
		t.Fatalf("the private write: %+v", ops)
	}
}
