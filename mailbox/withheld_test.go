package mailbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A device that withholds untrusted senders reads its mailbox through a
// gateway that leaves their events out and counts them in
// "untrusted_withheld" on each page. The answer says how many were
// withheld, in the text, the JSON and a degraded answer, rather than read
// as an empty mailbox: "Nothing is owed" with 913 withheld (attack111 F4).
func TestMailboxSaysHowManyWereWithheld(t *testing.T) {
	var down bool
	src := sourceFunc(func(ctx context.Context, args map[string]any) (json.RawMessage, error) {
		switch c, _ := args["since_event_id"].(string); {
		case down:
			return nil, context.DeadlineExceeded
		case args["to_agent"] == nil:
			return json.RawMessage(`{"events": [], "untrusted_withheld": 0}`), nil // the agent's own replies
		case c == "":
			return json.RawMessage(`{"events": [], "untrusted_withheld": 400, "more": true, "next_cursor": "evc_1"}`), nil
		}
		return json.RawMessage(`{"events": [], "untrusted_withheld": 513}`), nil
	})
	m := &Mailbox{Src: src}
	r, err := m.Owed(context.Background(), "pi@carol", "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := r.Text(); !strings.Contains(text, "913 events addressed to") || strings.Contains(text, "Nothing is owed by") {
		t.Errorf("the text reads as an empty mailbox:\n%s", text)
	}
	res, err := ToolResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, `"untrusted_withheld": 913`) {
		t.Errorf("the tool's answer does not count the withheld:\n%s", got)
	}
	down = true
	if r, err := m.Owed(context.Background(), "pi@carol", "", 0, nil); err != nil || !r.Degraded || r.UntrustedWithheld != 913 {
		t.Errorf("degraded: withheld %d, degraded %v, %v", r.UntrustedWithheld, r.Degraded, err)
	}
}
