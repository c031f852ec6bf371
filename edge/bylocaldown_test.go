package edge

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// downLocal is a local palace server that is down (not installed, or
// restarting).
type downLocal struct{}

func (downLocal) Call(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return nil, ErrLocalDown
}

func (downLocal) Relay(context.Context, json.RawMessage) (json.RawMessage, *jsonrpc.Error, error) {
	return nil, nil, ErrLocalDown
}

// get_drawer and get_drawers with the local palace down ask the primary
// ("local, then primary", as the merged reads do): its drawer, marked
// degraded; with the primary down too, an error saying both are.
func TestGetDrawerWithTheLocalPalaceDownAsksThePrimary(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer = downLocal{}
	id := sharedDrawer(t, primary, "w", "the fleet knows this")
	if g := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": id}); g["content"] != "the fleet knows this" || g["degraded"] != true || edgeOf(g)["local"] == nil {
		t.Errorf("get_drawer with the local palace down: %v, want the primary's drawer, degraded, saying why", g)
	}
	g := routed(t, e, "mempalace_get_drawers", map[string]any{"drawer_ids": []string{id}})
	if res, _ := g["results"].([]any); len(res) != 1 || res[0].(map[string]any)["content"] != "the fleet knows this" || g["degraded"] != true {
		t.Errorf("get_drawers with the local palace down: %v, want the primary's drawer, degraded", g)
	}
	primary.down = true
	if g := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": id}); g["error"] == nil || edgeOf(g)["local"] != "down" || edgeOf(g)["primary"] == nil {
		t.Errorf("get_drawer with both palaces down: %v, want an error saying so", g)
	}
}
