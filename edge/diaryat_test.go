package edge

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/gateway"
)

// Outside tester, attack17 n13: a diary_write naming the agent as the
// mailbox knows it (claude@nar) is refused, and the refusal says the fix:
// MemPalace takes no "@" in a diary's agent name, the diary's agent is
// the part before it (claude, wing_claude), not a grant for a wing
// "wing_claude@nar" no grant can make writable.
func TestDiaryWriteAsTheMailboxIdentitySaysTheDiaryAgent(t *testing.T) {
	t.Parallel()
	url, tokens, _ := testGatewayServer(t, func() string { _, srv := startPrimary(t); return srv.URL() }(),
		gateway.Device{ID: "nar-0001", Label: "nar", Read: []string{"wing_claude"}, Write: []string{"wing_claude"}, Agents: []string{"claude@nar"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["nar-0001"], identity: "claude@nar"})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	_, res := h.call("diary_write", map[string]any{"agent_name": "claude@nar", "entry": "hello"})
	msg := ""
	if len(res.Content) > 0 {
		msg = gjson.Get(res.Content[0].(*mcp.TextContent).Text, "error").String()
	}
	if !res.IsError || !strings.Contains(msg, `"claude"`) || !strings.Contains(msg, "wing_claude") || strings.Contains(msg, "wing_claude@nar") || strings.Contains(msg, "grant") {
		t.Errorf("diary_write as claude@nar: %v %s", res.IsError, msg)
	}
	if _, res := h.call("diary_write", map[string]any{"agent_name": "claude", "entry": "hello"}); res.IsError {
		t.Errorf("diary_write as claude: %v", res.Content)
	}
}
