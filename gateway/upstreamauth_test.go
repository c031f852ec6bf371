package gateway

import (
	"strings"
	"testing"
)

// The upstream refusing the gateway's own token is the gateway's problem,
// not the device's: the device gets a 502 that names the gateway's fix,
// never the upstream's 401 (an HTML page labelled JSON, which sent the
// device's operator after its own, valid, token).
func TestUpstreamRefusingTheGatewaysTokenIsA502(t *testing.T) {
	g := newGW(t, devices)
	g.srv.UpstreamToken = func() string { return "not-the-upstream-token" }
	_, rpcErr, status := g.call(g.tokens["laptop-7f3a"], "status", map[string]any{})
	msg, _ := rpcErr["message"].(string)
	if status != 502 || !strings.Contains(msg, "the upstream refused the gateway's token") || !strings.Contains(msg, "MEMPALACE_UPSTREAM_TOKEN") {
		t.Fatalf("HTTP %d, error %v; want 502 naming the gateway's upstream token", status, rpcErr)
	}
	g.srv.UpstreamToken = func() string { return upstreamToken }
	if _, rpcErr, status := g.call(g.tokens["laptop-7f3a"], "status", map[string]any{}); status != 200 || rpcErr != nil {
		t.Fatalf("with the right token: HTTP %d, %v", status, rpcErr)
	}
}
