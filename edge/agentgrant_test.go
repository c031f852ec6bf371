package edge

import (
	"context"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// A coordination write naming an agent the device does not hold (as the
// gateway's device header says its agents) is refused by the edge at
// once, nothing queued: the gateway refuses it for good, so "queued, will
// be sent once" was untrue and the write went dead after its tries.
// (Found by an outside tester: nar's event_append as pi@ops.) One naming
// the device's own agent is sent as ever.
func TestCoordinationWriteAsAForeignAgent(t *testing.T) {
	t.Parallel()
	url, tokens, _ := testGatewayServer(t, func() string { _, srv := startPrimary(t); return srv.URL() }(),
		gateway.Device{ID: "nar-03", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["nar-03"]})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })

	for tool, args := range map[string]map[string]any{
		"event_append": {"type": "note", "stream": "devbox", "room": "r", "from_agent": "pi@ops", "to_agent": "*", "body": "hello"},
		"event_ack":    {"event_id": "e1", "from_agent": "pi@ops", "status": "done"},
		"artifact_put": {"kind": "note", "content": "x", "created_by": "pi@ops"},
	} {
		m, res := h.call(tool, args)
		if !res.IsError || m["queued"] == true || m["success"] == true {
			t.Errorf("%s as an agent the device does not hold: %v", tool, m)
			continue
		}
		if msg := refusalText(res); !strings.Contains(msg, "pi@ops") || !strings.Contains(msg, "opencode@edge-test") {
			t.Errorf("%s: the refusal does not name the agent and the device's agents: %s", tool, msg)
		}
	}
	ops, err := h.edge.outbox.List(context.Background(), 10) // every state but done
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 0 {
		t.Errorf("%d refused writes were queued, the first %s", len(ops), describe(ops[0]))
	}
	// The agent given and the device's are named as every identity is,
	// mailbox.Quoted: a Hangul filler shows escaped (%q left it raw).
	m, _ := h.call("event_append", map[string]any{"type": "note", "stream": "devbox", "room": "r", "from_agent": "opencode@edge-test\u3164", "to_agent": "*", "body": "hello"})
	if msg, _ := m["error"].(string); !strings.Contains(msg, `from_agent "opencode@edge-test\u3164" is not one of this device's agents`) || !strings.Contains(msg, `speaks as "opencode@edge-test" (its agents`) {
		t.Errorf("the refusal does not quote the agents: %s", msg)
	}
	if m, res := h.call("event_append", map[string]any{"type": "note", "stream": "devbox", "room": "r", "from_agent": "opencode@edge-test", "to_agent": "*", "body": "hello"}); res.IsError || m["event"] == nil {
		t.Errorf("an event of the device's own agent: %v", m)
	}
}

// A coordination write the primary refused at its first try is not
// answered "success": the agent is told the primary's reason and that
// the write stays queued only to be tried again (a grant given meanwhile
// lets it through), not that it will be sent. Here the primary has no
// gateway to say the device's agents, and refuses an ack of an event it
// does not hold.
func TestCoordinationWriteRefusedAtOnceIsNotSuccess(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	m, res := h.call("event_ack", map[string]any{"event_id": "evt_nope", "from_agent": "opencode@edge-test", "status": "done"})
	if m["success"] == true || !res.IsError || !strings.Contains(refusalText(res), "refused by the primary") {
		t.Errorf("a write the primary refused: %v", m)
	}
}
