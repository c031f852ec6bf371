package edge

import (
	"context"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// An event_append with an argument its schema does not list (kind, as
// an agent guessed it) is refused by the edge at once, naming the
// argument, and nothing is queued: before, it was answered with an op_id
// and died at the gateway (-32602), and `edge flush` exited 1 until an
// operator dropped it (attack52 F4). An argument MemPalace takes (topic)
// is queued as before.
func TestAQueuedWriteWithAnUnknownArgumentIsRefusedUpFront(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryDown: true})
	_, res := h.call("event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@edge-test", "body": "b", "kind": "note"})
	if s := refusalText(res); !strings.Contains(s, "refused by the edge") || !strings.Contains(s, "'kind'") || !strings.Contains(s, "nothing was written or queued") {
		t.Errorf("an event_append with kind is answered %q, want refused by the edge naming kind", s)
	}
	ops, err := h.edge.outbox.List(context.Background(), 10, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 0 {
		t.Errorf("the refused write is in the outbox: %+v", ops)
	}
	m, res := h.call("event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@edge-test", "body": "b", "topic": "t"})
	if res.IsError || m["op_id"] == nil {
		t.Errorf("an event_append with the arguments MemPalace takes is answered %v, want queued", m)
	}
}
