package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// roomlessLocal is a local palace that holds no drawer in the rooms a
// tunnel names: it refuses create_tunnel as MemPalace 3.11.0 does
// (palace_graph.create_tunnel checks each room holds a drawer; the double
// does not check).
type roomlessLocal struct{ local localPalace }

func (l roomlessLocal) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if p.Name == "mempalace_create_tunnel" {
		var a map[string]any
		b, _ := json.Marshal(p.Arguments)
		json.Unmarshal(b, &a)
		return jsonResult(map[string]any{"error": fmt.Sprintf("Source room '%v' does not exist in wing '%v'", a["source_room"], a["source_wing"])}, false), nil
	}
	return l.local.Call(ctx, p)
}

func (l roomlessLocal) Relay(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error, error) {
	return l.local.Relay(ctx, params)
}

// attack22 F10: create_tunnel through an edge between two rooms only the
// primary holds (another device filed them; the agent sees them in
// list_rooms and search) is queued for the primary, which creates it,
// saying so; between rooms the primary lacks too, the local palace's
// refusal stands and nothing is queued.
func TestATunnelBetweenRoomsOnlyThePrimaryHoldsIsQueued(t *testing.T) {
	t.Parallel()
	e, local, primary, ob := routerUnderTest(t)
	e.localServer = roomlessLocal{local}
	sharedDrawer(t, primary, "team_b", "seed") // room r
	fileOn(t, primary.pl, "team_b", "other", "seed too")
	g := routed(t, e, "mempalace_create_tunnel", map[string]any{"source_wing": "team_b", "source_room": "r", "target_wing": "team_b", "target_room": "other", "label": "T"})
	ops, _ := ob.List(context.Background(), 10)
	if g["success"] != true || edgeOf(g)["replication"] == nil || len(ops) != 1 || ops[0].Tool != "mempalace_create_tunnel" {
		t.Fatalf("create_tunnel between rooms the primary holds: %v, queued %+v; want it queued for the primary", g, ops)
	}
	g = routed(t, e, "mempalace_create_tunnel", map[string]any{"source_wing": "team_b", "source_room": "r", "target_wing": "team_b", "target_room": "nowhere", "label": "T"})
	if ops, _ := ob.List(context.Background(), 10); g["error"] == nil || len(ops) != 1 {
		t.Errorf("create_tunnel to a room neither palace holds: %v, queued %+v; want the local refusal, nothing queued", g, ops)
	}
}

// F10 against real MemPalace 3.11.0, local and primary: the tunnel
// between two rooms another device filed on the primary reaches it. (A
// palace with no drawers yet checks no room: it takes any tunnel.)
func TestRealATunnelBetweenRoomsOnlyThePrimaryHoldsReachesIt(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	h.call("add_drawer", map[string]any{"wing": "team_b", "room": "mine", "content": "this device's own"}) // a palace with drawers checks rooms
	for _, room := range []string{"ta", "tb"} {
		r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "team_b", "room": room, "content": "seed of " + room})
	}
	g, _ := h.call("create_tunnel", map[string]any{"source_wing": "team_b", "source_room": "ta", "target_wing": "team_b", "target_room": "tb", "label": "T between primary rooms"})
	if g["success"] != true || !strings.Contains(fmt.Sprint(edgeOf(g)["replication"]), "rooms not in the local palace") {
		t.Fatalf("create_tunnel between rooms only the primary holds: %v, want it queued", g)
	}
	waitFor(t, 20*time.Second, "the tunnel on the primary", func() bool {
		res, err := r.srv.RPC("tools/call", map[string]any{"name": "mempalace_list_tunnels", "arguments": map[string]any{"wing": "team_b"}})
		return err == nil && strings.Contains(string(res.Result), "T between primary rooms")
	})
}
