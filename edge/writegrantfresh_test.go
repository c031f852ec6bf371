package edge

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/gateway"
)

// setWriteGrants gives device id the write globs write in the gateway's
// config and reloads it, as `gateway device set ID --write ...` does.
func setWriteGrants(t *testing.T, gw *gateway.Server, id string, write ...string) {
	t.Helper()
	c, err := gateway.LoadConfig(gw.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Devices {
		if c.Devices[i].ID == id {
			c.Devices[i].Write = write
		}
	}
	if err := c.Save(gw.ConfigFile); err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
}

// bobBehindAGateway is an edge for bob-02 (reads everything, writes
// write) behind a real gateway in process, once it heard the device
// header; with the primary's URL, for another device's writes (h.srv is
// that primary, behind the gateway).
func bobBehindAGateway(t *testing.T, o harnessOpts, write ...string) (*harness, *gateway.Server, string) {
	t.Helper()
	pl, srv := startPrimary(t)
	url, tokens, gw := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: write, KG: "write", Agents: []string{"opencode@edge-test"}})
	o.primaryURL, o.token = url, tokens["bob-02"]
	h := start(t, o)
	h.primary, h.srv = pl, srv // behind the gateway
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	return h, gw, srv.URL()
}

func refusalText(res *mcp.CallToolResult) string {
	if !res.IsError || len(res.Content) == 0 {
		return ""
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// An update_drawer of a drawer only the primary holds (another device
// wrote it), in a wing outside this device's write globs, is refused up
// front like one of a local drawer, naming the wing and the grants: not
// answered "success, queued" for the gateway to refuse five times, after
// which the op is dead and every later op on that drawer waits behind it.
// (Found by an outside tester: bob-02 updating a wing_shared drawer.)
func TestUpdateOfAPrimaryOnlyDrawerOutsideTheWriteGlobs(t *testing.T) {
	t.Parallel()
	h, _, primary := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	id, _ := postTool(t, primary, testToken, "add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "alice's shared notes"})["drawer_id"].(string)
	if id == "" {
		t.Fatal("the shared drawer was not written on the primary")
	}
	m, res := h.call("update_drawer", map[string]any{"drawer_id": id, "content": "bob overwrote"})
	msg := refusalText(res)
	if msg == "" {
		t.Fatalf("an update of a primary-only drawer in a wing outside the write globs was taken: %v", m)
	}
	for _, want := range []string{"wing_shared", "wing_bob", "grant"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q: %s", want, msg)
		}
	}
	if ops, _ := h.edge.outbox.List(context.Background(), 10); len(ops) != 0 {
		t.Errorf("the refused update is in the outbox: %+v", ops)
	}
}

// A grant the operator gives is heard before the edge refuses a write for
// the lack of it: the edge asks the gateway again rather than refusing on
// the grants it heard earlier (an outside tester: still refused 2, 5 and
// 8 s after the grant, until the agent happened to read).
func TestAGrantGivenIsHeardBeforeTheEdgeRefuses(t *testing.T) {
	t.Parallel()
	// The asks wait up to 10 s (the default 1 s): an ask slower than its
	// wait is still out when the next write joins it, and answers with
	// the grants from before the grant, which the edge's design accepts
	// of a slow primary (CI 120's race tier: refused at 1.35 s); an
	// answered ask ends the wait at once.
	h, gw, _ := bobBehindAGateway(t, harnessOpts{grantAsk: 10 * time.Second}, "wing_bob")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "before the grant"}); !res.IsError {
		t.Fatalf("a write outside the write globs was taken: %v", res.Content)
	}
	setWriteGrants(t, gw, "bob-02", "wing_bob", "wing_shared")
	m, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "after the grant"})
	if res.IsError {
		t.Fatalf("a write the gateway now grants is refused on the grants heard before: %s", refusalText(res))
	}
	if edgeOf(m)["replication"] != "queued" {
		t.Errorf("the granted write: %v", m)
	}
}

// A grant the operator removes is heard without a local write waiting on
// the primary: the first write on the old grants is taken and queued, the
// gateway refuses it (edge status lists it DEAD), and its refusal tells
// the edge the new grants, so the writes after it are refused up front
// rather than answered "queued" to go dead with the agent never told.
func TestAGrantRemovedIsHeardFromTheGatewaysRefusal(t *testing.T) {
	t.Parallel()
	h, gw, _ := bobBehindAGateway(t, harnessOpts{}, "wing_bob", "wing_shared")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "while granted"}); res.IsError {
		t.Fatalf("a granted write was refused: %s", refusalText(res))
	}
	h.drained()
	setWriteGrants(t, gw, "bob-02", "wing_bob")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "on the old grants"}); res.IsError {
		t.Fatalf("a write the edge's grants allow waited on the gateway and was refused: %s", refusalText(res))
	}
	h.eventually("the removal heard from the gateway's refusal", func() bool {
		in, ok := h.edge.device()
		return ok && !slices.Contains(in.Write, "wing_shared")
	})
	m, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "after the grant was removed"})
	if !res.IsError {
		t.Fatalf("a write the gateway no longer grants was taken: %v", m)
	}
	if msg := refusalText(res); !strings.Contains(msg, "wing_shared") {
		t.Errorf("the refusal does not name the wing: %s", msg)
	}
}
