package mailbox_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/mailbox"
)

// How the edge wires its mempalace_mailbox tool: a ToolSource over its own
// call to the primary, one Mailbox for the process (it keeps the last view
// for degraded answers), the agent's pending outbox events, and the
// tool's arguments.
func Example() {
	primaryUp := true
	// In the edge: func(ctx, p) { return primary.Call(ctx, p, true) }.
	call := func(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
		if !primaryUp {
			return nil, errors.New("primary unreachable")
		}
		args := p.Arguments.(map[string]any)
		text := `{"events":[],"count":0}`
		if args["to_agent"] != nil {
			text = `{"events":[{"id":"evt_1","seq":1,"type":"task.request","stream":"devbox","from_agent":"pi@laptop","to_agent":"opencode@box","correlation_id":"c1","status":"open","body":"review the patch","metadata":{}}],"count":1}`
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
	box := &mailbox.Mailbox{Src: mailbox.ToolSource{Call: call}}
	ctx := context.Background()

	agent, stream, limit, _ := mailbox.ParseArgs(map[string]any{}, "opencode@box")
	r, _ := box.Owed(ctx, agent, stream, limit, nil)
	fmt.Println(r.Count, r.Owed[0].Event.ID, r.Degraded)

	// Offline, with the reply still in the outbox: answered, degraded.
	primaryUp = false
	pending := []map[string]any{{"event_id": "evt_1", "from_agent": "opencode@box", "status": "applied"}}
	r, _ = box.Owed(ctx, agent, stream, limit, pending)
	fmt.Println(r.Count, r.Degraded)

	// The warning the edge adds to an outgoing write with a bare writer.
	rec, _ := catalogue.Lookup("mempalace_event_append")
	fmt.Println(mailbox.CheckFromAgent(rec, "mempalace_event_append", map[string]any{"from_agent": "opencode"}) != "")
	// Output:
	// 1 evt_1 false
	// 0 true
	// true
}
