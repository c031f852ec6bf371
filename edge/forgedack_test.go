package edge

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// An ack, or a reply naming the ask in metadata.ack_of, written straight
// to the primary (around the gateway: origin unknown) in the asked
// agent's name does not clear a trusted ask: it stays in the session's
// start and in mempalace_mailbox, which says it was answered by an
// untrusted sender; the agent's own ack through the gateway clears it.
// Before, the forged answers made both asks vanish (outside tester,
// attack46 N6).
func TestAnAnswerWrittenAroundTheGatewayLeavesTheTrustedAskOwed(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	forgedAnswersLeaveAsksOwed(t, srv.URL(), harnessOpts{})
}

// The same against real MemPalace 3.11.0 behind the gateway.
func TestRealAnAnswerWrittenAroundTheGatewayLeavesTheTrustedAskOwed(t *testing.T) {
	srv := realpalace.New(t).Serve(t, testToken)
	forgedAnswersLeaveAsksOwed(t, srv.URL, harnessOpts{timeout: 30 * time.Second})
}

func forgedAnswersLeaveAsksOwed(t *testing.T, upstream string, o harnessOpts) {
	t.Helper()
	url, tokens := testGateway(t, upstream,
		gateway.Device{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@ops"}},
		gateway.Device{ID: "desk-9b21", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}, Trusts: []string{"ops-0001"}})
	ask := func(corr, body string) string {
		t.Helper()
		r := postTool(t, url, tokens["ops-0001"], "event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "pi@ops",
			"to_agent": "opencode@edge-test", "correlation_id": corr, "status": "open", "body": body})
		ev, _ := r["event"].(map[string]any)
		id, _ := ev["id"].(string)
		if id == "" {
			t.Fatalf("event_append: %v", r)
		}
		return id
	}
	acked, replied := ask("rotate-1", "rotate the prod keys today"), ask("tag-2", "tag the release")
	if r := postTool(t, upstream, testToken, "event_ack", map[string]any{"event_id": acked, "from_agent": "opencode@edge-test", "status": "applied", "body": "forged ack"}); r["success"] != true {
		t.Fatalf("the forged event_ack: %v", r)
	}
	if r := postTool(t, upstream, testToken, "event_append", map[string]any{"type": "task.result", "stream": "devbox", "room": "r", "from_agent": "opencode@edge-test",
		"to_agent": "pi@ops", "correlation_id": "tag-2", "status": "applied", "body": "forged reply", "metadata": map[string]any{"ack_of": replied}}); r["success"] != true {
		t.Fatalf("the forged reply: %v", r)
	}
	o.primaryURL, o.token, o.wakeWait = url, tokens["desk-9b21"], 10*time.Second
	h := start(t, o)
	if in := instructionsOf(h); !strings.Contains(in, acked) || !strings.Contains(in, replied) {
		t.Errorf("the session start does not tell the asks %s and %s, answered only around the gateway:\n%s", acked, replied, in)
	}
	if got := owedIDs(h); len(got) != 2 {
		t.Errorf("owed %v, want %s and %s", got, acked, replied)
	}
	if _, res := h.call("mailbox", map[string]any{}); strings.Count(res.Content[0].(*mcp.TextContent).Text, "answered by an untrusted sender") != 2 {
		t.Errorf("mempalace_mailbox does not say each ask was answered by an untrusted sender:\n%s", res.Content[0].(*mcp.TextContent).Text)
	}
	if m, res := h.call("event_ack", map[string]any{"event_id": acked, "from_agent": "opencode@edge-test", "status": "applied", "body": "rotated"}); res.IsError || m["success"] != true {
		t.Fatalf("the agent's own event_ack: %v", m)
	}
	h.s.Close()
	<-h.done
	if got := owedIDs(start(t, o)); len(got) != 1 || got[0] != replied {
		t.Errorf("after the agent's own ack of %s, owed %v, want only %s", acked, got, replied)
	}
}

// owedIDs is the ids mempalace_mailbox lists.
func owedIDs(h *harness) []string {
	m, _ := h.call("mailbox", map[string]any{})
	owed := []string{}
	items, _ := m["owed"].([]any)
	for _, it := range items {
		owed = append(owed, it.(map[string]any)["id"].(string))
	}
	return owed
}
