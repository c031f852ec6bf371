package gateway

import (
	"strings"
	"testing"
)

// The upstream refusing the gateway's own token is the gateway's problem,
// not the device's: the device gets a 503 that names the gateway's fix,
// never the upstream's 401 (an HTML page labelled JSON, which sent the
// device's operator after its own, valid, token). 503, not 502: the call
// was refused before it ran, so a write with an op id is not put in doubt
// by the ledger (an artifact would then wait for an operator); sent again
// once the token is fixed, it lands once.
func TestUpstreamRefusingTheGatewaysTokenIsA503(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	g.srv.UpstreamToken = func() string { return "not-the-upstream-token" }
	_, rpcErr, status := g.call(g.tokens["laptop-7f3a"], "status", map[string]any{})
	msg, _ := rpcErr["message"].(string)
	if status != 503 || !strings.Contains(msg, "the upstream refused the gateway's token") || !strings.Contains(msg, "MEMPALACE_UPSTREAM_TOKEN") {
		t.Fatalf("HTTP %d, error %v; want 503 naming the gateway's upstream token", status, rpcErr)
	}
	put := func() (int, map[string]any) {
		return g.postOp(g.tokens["laptop-7f3a"], "mempalace_artifact_put", map[string]any{"kind": "note", "content": "written while the gateway's token was wrong", "created_by": "opencode@laptop"}, strings.Repeat("cd", 32))
	}
	if status, m := put(); status != 503 || m["error"] == nil {
		t.Fatalf("a write while the upstream refuses the gateway: HTTP %d %v; want 503", status, m)
	}
	g.srv.UpstreamToken = func() string { return upstreamToken }
	if _, rpcErr, status := g.call(g.tokens["laptop-7f3a"], "status", map[string]any{}); status != 200 || rpcErr != nil {
		t.Fatalf("with the right token: HTTP %d, %v", status, rpcErr)
	}
	if status, m := put(); status != 200 || m["error"] != nil {
		t.Fatalf("the same op sent again once the token is fixed: HTTP %d %v; want it applied, not in doubt", status, m)
	}
	if n := g.primary.Calls("mempalace_artifact_put"); n != 1 {
		t.Errorf("the upstream ran the artifact_put %d times, want 1", n)
	}
}
