package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A drop of an op a running edge was sending tells the operator the
// truth: that send may land, though the op is never sent again. Before,
// it said "dropped: never sent again" and nothing more (attack84 F2).
func TestDropOfAnOpInFlightSaysItMayHaveLanded(t *testing.T) {
	t.Parallel()
	e, _ := json.Marshal(map[string]any{"kind": outbox.Dropped, "message": "dropped by the operator: never sent" + outbox.InFlightAtSettle})
	got := outcome("drop", outbox.Op{Tool: "mempalace_add_drawer", Error: e}, false)
	if !strings.Contains(got, "may have landed on the primary") || !strings.Contains(got, "never sent again") {
		t.Errorf("drop of an op in flight says %q, want that it may have landed and is never sent again", got)
	}
	e, _ = json.Marshal(map[string]any{"kind": outbox.Dropped, "message": "dropped by the operator: never sent"})
	if got := outcome("drop", outbox.Op{Tool: "mempalace_add_drawer", Error: e}, false); strings.Contains(got, "landed") {
		t.Errorf("drop of a queued op says %q: nothing of it was in flight", got)
	}
}
