package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
)

// fileOn files a drawer straight on a fake palace (around any gateway:
// of unknown origin) and returns its id.
func fileOn(t *testing.T, pl *fakepalace.Palace, wing, room, content string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": "mempalace_add_drawer", "arguments": map[string]any{"wing": wing, "room": room, "content": content}})
	line, err := pl.Handle(wire.Request("x", "tools/call", b))
	if err != nil {
		t.Fatal(err)
	}
	raw, _, _ := wire.SplitAnswer(line)
	res, _ := wire.DecodeResult(raw)
	text, _ := objectText(res)
	id, _ := objectMap(text)["drawer_id"].(string)
	if id == "" {
		t.Fatalf("add_drawer: %s", text)
	}
	return id
}

// slotErrors counts get_drawers' results by their error's first words.
func slotErrors(g map[string]any) map[string]int {
	n := map[string]int{}
	res, _ := g["results"].([]any)
	for _, r := range res {
		m, _ := r.(map[string]any)
		msg, _ := m["error"].(string)
		if msg == "" {
			n["found"]++
			continue
		}
		n[strings.SplitN(msg, ":", 2)[0]]++
	}
	return n
}

// attack22 F1: a narrow device's get_drawers of more ids than its read
// burst, all only on the primary, through a real gateway (which refuses
// it get_drawers, so the edge asks one get_drawer each): the rate
// refusals are waited out and every drawer is found, none "Drawer not
// found" (before: a third of them, with no degraded).
func TestGetDrawersOneByOneWaitsOutTheReadRate(t *testing.T) {
	t.Parallel()
	pl, srv := startPrimary(t)
	url, tokens := testGateway(t, srv.URL(),
		gateway.Device{ID: "nar", Label: "nar", Read: []string{"team_b"}, Write: []string{"team_b"}, ReadRate: 100})
	ids := make([]string, 150)
	for i := range ids {
		ids[i] = fileOn(t, pl, "team_b", "bulk", fmt.Sprintf("bulk drawer number %d", i))
	}
	h := start(t, harnessOpts{primaryURL: url, token: tokens["nar"]})
	g, _ := h.call("get_drawers", map[string]any{"drawer_ids": ids})
	if n := slotErrors(g); n["found"] != len(ids) || g["degraded"] != nil {
		t.Errorf("get_drawers of %d drawers the primary holds, over the read burst: %v (degraded %v, edge %v), want all found", len(ids), n, g["degraded"], g["edge"])
	}
}

// rateRefusing is a gateway that denies get_drawers (a narrow device)
// and refuses every get_drawer over the device's read rate.
type rateRefusing struct {
	inProcessPrimary
	calls *atomic.Int64
}

func (s rateRefusing) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	switch p.Name {
	case "mempalace_get_drawers":
		return nil, &jsonrpc.Error{Code: -31003, Message: "devbox-config gateway: mempalace_get_drawers needs read on every wing"}
	case "mempalace_get_drawer":
		s.calls.Add(1)
		return nil, &jsonrpc.Error{Code: gateway.CodeRateLimited, Message: "devbox-config gateway: nar is over its read rate"}
	}
	return s.inProcessPrimary.Call(ctx, p, retry)
}

// An id the primary does not answer for (its rate refusal, waited out
// for the call timeout; the primary down) is never "Drawer not found":
// its result says it was not answered and why, and the answer is
// degraded; the rest of the ids are not asked once the primary stalls.
func TestGetDrawersUnansweredIsNotNotFound(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	calls := &atomic.Int64{}
	e.remote, e.cfg.CallTimeout = rateRefusing{inProcessPrimary{primary}, calls}, 50*time.Millisecond
	ids := []string{sharedDrawer(t, primary, "w", "one"), sharedDrawer(t, primary, "w", "two"), sharedDrawer(t, primary, "w", "three")}
	g := routed(t, e, "mempalace_get_drawers", map[string]any{"drawer_ids": ids})
	if n := slotErrors(g); n["Drawer not found"] != 0 || n["not answered"] != len(ids) || g["degraded"] != true || !strings.Contains(fmt.Sprint(edgeOf(g)["primary"]), "read rate") {
		t.Errorf("get_drawers the primary rate-refuses: %v, want each not answered, degraded, saying why", g)
	}
	if calls.Load() > 10 {
		t.Errorf("%d get_drawer sent to a primary that refused every one: the ids after the first stall are not asked", calls.Load())
	}
	one := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": ids[0]})
	if msg := fmt.Sprint(one["error"]); strings.HasPrefix(msg, "Drawer not found") || one["degraded"] != true || !strings.Contains(msg+fmt.Sprint(edgeOf(one)), "read rate") {
		t.Errorf("get_drawer the primary rate-refuses: %v, want not answered, degraded, saying why", one)
	}

	primary.down = true
	g = routed(t, e, "mempalace_get_drawers", map[string]any{"drawer_ids": ids})
	if n := slotErrors(g); n["Drawer not found"] != 0 || n["not answered"] != len(ids) || g["degraded"] != true {
		t.Errorf("get_drawers with the primary down: %v, want each not answered, degraded", g)
	}
}

// attack22 F5: get_drawers through the edge keeps what the gateway
// withheld from a device that withholds what it does not trust: the id's
// result says withheld (as get_drawer's answer does), never "Drawer not
// found", and the answer counts it in untrusted_withheld. Both ways the
// edge asks: one get_drawers (a device that reads every wing), one
// get_drawer each (a narrow one).
func TestGetDrawersKeepsWhatTheGatewayWithheld(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	url, tokens := testGateway(t, srv.URL(),
		gateway.Device{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, Admin: true},
		gateway.Device{ID: "mal", Label: "mal", Read: []string{"team_b"}, Write: []string{"team_b"}},
		gateway.Device{ID: "wa", Label: "wa", Read: []string{"*"}, Trusts: []string{"ops"}, Untrusted: gateway.UntrustedWithhold},
		gateway.Device{ID: "narw", Label: "narw", Read: []string{"team_b"}, Trusts: []string{"ops"}, Untrusted: gateway.UntrustedWithhold})
	b1, _ := postTool(t, url, tokens["ops"], "add_drawer", map[string]any{"wing": "team_b", "room": "r", "content": "ops wrote this"})["drawer_id"].(string)
	bm, _ := postTool(t, url, tokens["mal"], "add_drawer", map[string]any{"wing": "team_b", "room": "r", "content": "mal wrote this"})["drawer_id"].(string)
	if b1 == "" || bm == "" {
		t.Fatal("add_drawer through the gateway filed nothing")
	}
	for _, dev := range []string{"wa", "narw"} {
		h := start(t, harnessOpts{primaryURL: url, token: tokens[dev]})
		g, _ := h.call("get_drawers", map[string]any{"drawer_ids": []string{b1, bm}})
		res, _ := g["results"].([]any)
		if len(res) != 2 || slotErrors(g)["found"] != 1 || !strings.HasPrefix(fmt.Sprint(res[1].(map[string]any)["error"]), "withheld") || g["untrusted_withheld"] != 1.0 {
			t.Errorf("%s: get_drawers of ops's and mal's drawers: %v, want ops's, mal's withheld, untrusted_withheld 1", dev, g)
		}
	}
}

// attack22 F7: with the local palace down, a get_drawer the gateway
// refuses (a drawer in a wing this device may not read) says the primary
// refused it, in the refusal's words, not that it did not answer.
func TestGetDrawerWithTheLocalPalaceDownSaysThePrimaryRefused(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer = downLocal{}
	e.remote = refusingOne{inProcessPrimary{primary}}
	g := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": "drawer_team_a_r_0123456789abcdef01234567"})
	if msg := fmt.Sprint(g["error"]); !strings.Contains(msg, "not visible to this device") || strings.Contains(msg, "did not answer") {
		t.Errorf("get_drawer the primary refuses, local palace down: %v, want the refusal's words", g)
	}
}

// refusingOne is a gateway that refuses every get_drawer as a narrow
// device's of another wing.
type refusingOne struct{ inProcessPrimary }

func (s refusingOne) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	if p.Name == "mempalace_get_drawer" {
		return nil, &jsonrpc.Error{Code: -31003, Message: "devbox-config gateway: denied: the target is not visible to this device"}
	}
	return s.inProcessPrimary.Call(ctx, p, retry)
}
