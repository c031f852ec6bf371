package edge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// A write the local palace refuses because another MemPalace process
// holds its writer lock (here a second edge on the same palace; in
// attack41 N7 a mempalace-mcp an edge left running) is answered with
// MemPalace's refusal and what to do: find the holder, stop it if no
// session uses it, ask again. Before, the agent got MemPalace's words
// alone, "Peer MCP writer active; this server is read-only for mutating
// tools", and nothing said which process or how to end it.
func TestRealPeerWriterRefusalSaysWhatToDo(t *testing.T) {
	palace := realpalace.New(t)
	first := start(t, harnessOpts{realLocal: palace, timeout: 30 * time.Second})
	if res, _ := first.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the first edge's write takes the lock"}); res["success"] != true {
		t.Fatalf("the first edge's add_drawer: %v", res)
	}
	second := start(t, harnessOpts{realLocal: palace, timeout: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := second.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_add_drawer", Arguments: map[string]any{"wing": "w", "room": "r", "content": "the second edge's write, refused"}})
	if err == nil || !strings.Contains(err.Error(), "Peer MCP writer active") {
		t.Fatalf("the second edge's add_drawer, with the first's MemPalace holding the writer lock: %v, want MemPalace's \"Peer MCP writer active\"", err)
	}
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("not a JSON-RPC error: %v", err)
	}
	holder := heldByPID.FindStringSubmatch(gjson.GetBytes(rpcErr.Data, "reason").Str)
	if holder == nil {
		t.Fatalf("MemPalace's refusal does not name the lock's holder in its data: %s", rpcErr.Data)
	}
	for _, want := range []string{"nothing was written", "(PID " + holder[1] + ";", "pgrep -af mempalace", "kill PID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
}
