package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// RFC 003 §6's positive control through the edge: a synthetic sender
// writes one ask to this agent; the mailbox shows exactly that item as a
// tool, a prompt and a resource; the agent's terminal reply clears it; with
// the primary down it answers from the last view, marked degraded, and a
// reply still in the outbox counts as sent.
func TestMailboxThroughTheEdge(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{timeout: 2 * time.Second})
	ask := func(body, to string) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_event_append",
			"arguments": map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": to, "status": "open", "body": body}}})
		out, _ := h.primary.Handle(b)
		var res struct {
			Result struct{ Content []struct{ Text string } }
		}
		json.Unmarshal(out, &res)
		var ev struct{ Event struct{ ID string } }
		json.Unmarshal([]byte(res.Result.Content[0].Text), &ev)
		return ev.Event.ID
	}
	id := ask("please review the patch", "opencode@edge-test")
	ask("for everyone", "*")
	ask("for someone else", "claude@laptop")

	names := toolNames(t, h)
	if !strings.Contains(strings.Join(names, " "), "mempalace_mailbox") {
		t.Fatalf("mempalace_mailbox not listed: %v", names)
	}
	_, m := callWithin(t, h, 5*time.Second, "mempalace_mailbox", map[string]any{})
	owed, _ := m["owed"].([]any)
	if m["count"] != 1.0 || len(owed) != 1 || owed[0].(map[string]any)["id"] != id || owed[0].(map[string]any)["why"] == "" {
		t.Fatalf("mailbox: %v", m)
	}
	ctx := context.Background()
	pr, err := h.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mailbox"})
	if err != nil || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "please review the patch") {
		t.Fatalf("prompt: %v %v", pr, err)
	}
	rr, err := h.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mempalace://mailbox"})
	if err != nil || !strings.Contains(rr.Contents[0].Text, id) {
		t.Fatalf("resource: %v %v", rr, err)
	}

	// A bare writer is warned about, and sent as written.
	_, w := callWithin(t, h, 5*time.Second, "mempalace_event_append", map[string]any{"type": "note", "stream": "devbox", "room": "r", "from_agent": "opencode", "body": "bare"})
	if !strings.Contains(mustJSON(w), "is bare") {
		t.Errorf("no warning for a bare from_agent: %v", w)
	}

	// Offline: the last view, degraded, and the reply in the outbox counts.
	h.srv.Stop()
	callWithin(t, h, 5*time.Second, "mempalace_event_ack", map[string]any{"event_id": id, "from_agent": "opencode@edge-test", "status": "applied"})
	begin := time.Now()
	_, m = callWithin(t, h, 5*time.Second, "mempalace_mailbox", map[string]any{})
	took := time.Since(begin)
	if m["degraded"] != true || m["count"] != 0.0 {
		t.Errorf("offline mailbox after replying: %v", m)
	}
	t.Logf("offline mailbox answered in %v", took)
}

// Issue 26, point 9: a reply queued behind a thousand palace writes still
// counts as sent (and one held for the policy): the mailbox reads every
// reply the outbox holds. Before,
// it read the first 1,000 queued ops of any kind, missed the ack, and told
// the agent to answer again.
func TestTheMailboxSeesEveryQueuedReply(t *testing.T) {
	t.Parallel()
	e, _, _, ob := routerUnderTest(t)
	ctx := context.Background()
	for i := range 1000 {
		b, _ := json.Marshal(map[string]any{"wing": "notes", "room": "r", "content": fmt.Sprint("queued while offline ", i)})
		if _, err := ob.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: b}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ob.Enqueue(ctx, outbox.Write{Name: "mempalace_event_ack", Payload: []byte(`{"event_id":"evt_1","from_agent":"opencode@lab","status":"applied"}`)}); err != nil {
		t.Fatal(err)
	}
	// One held until the policy parses is sent by itself then: it counts
	// as sent too, as a queued one.
	if _, err := ob.Enqueue(ctx, outbox.Write{Name: "mempalace_event_ack", Held: true, Payload: []byte(`{"event_id":"evt_2","from_agent":"opencode@lab","status":"applied"}`)}); err != nil {
		t.Fatal(err)
	}
	pending := e.outboxReplies(ctx).sent
	if len(pending) != 2 || pending[0]["event_id"] != "evt_1" || pending[1]["event_id"] != "evt_2" {
		t.Fatalf("the replies the mailbox counts as sent: %v", pending)
	}
}
