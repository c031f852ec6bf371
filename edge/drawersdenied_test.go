package edge

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bulkDenying is a gateway that denies get_drawers to a device that may
// not read every wing (gateway.CodeDenied), and answers get_drawer.
type bulkDenying struct{ inProcessPrimary }

func (s bulkDenying) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	if p.Name == "mempalace_get_drawers" {
		return nil, &jsonrpc.Error{Code: -31003, Message: "devbox-config gateway: mempalace_get_drawers needs read on every wing"}
	}
	return s.inProcessPrimary.Call(ctx, p, retry)
}

// When the primary refuses get_drawers (a gateway, to a device without
// read on every wing), the ids the local palace lacks are asked of it one
// get_drawer each: its drawers are in the answer, not "Drawer not found".
func TestGetDrawersTheGatewayRefusesAsksOneByOne(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.remote = bulkDenying{inProcessPrimary{primary}}
	fleet := sharedDrawer(t, primary, "w", "the fleet knows this")
	nowhere := "drawer_w_r_0123456789abcdef01234567"
	g := routed(t, e, "mempalace_get_drawers", map[string]any{"drawer_ids": []string{fleet, nowhere}})
	res, _ := g["results"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["content"] != "the fleet knows this" || palaceOf(res[0]) != "primary" || res[1].(map[string]any)["error"] == nil {
		t.Errorf("get_drawers the primary refuses: %v, want its drawer (asked alone) and one not found", g)
	}
}
