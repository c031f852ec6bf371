package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
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

// An operator whose gateway holds the wrong upstream token learns it from
// the gateway's own log, not from a device's doctor: the start-up probe
// and the first refused call log it once (not once per call), naming the
// fix and never the token; the token's fix is logged too.
func TestUpstreamRefusingTheGatewaysTokenIsLoggedOnce(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	const wrong = "wrong-token-0123456789abcdef"
	g.srv.UpstreamToken = func() string { return wrong }
	g.srv.ProbeUpstream(context.Background())
	for range 3 {
		g.call(g.tokens["laptop-7f3a"], "status", map[string]any{})
	}
	got := logged.String()
	if n := strings.Count(got, "refused the gateway's token"); n != 1 || !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "MEMPALACE_UPSTREAM_TOKEN") {
		t.Fatalf("log after the probe and 3 refused calls (want one error naming MEMPALACE_UPSTREAM_TOKEN):\n%s", got)
	}
	g.srv.UpstreamToken = func() string { return upstreamToken }
	g.call(g.tokens["laptop-7f3a"], "status", map[string]any{})
	g.call(g.tokens["laptop-7f3a"], "status", map[string]any{})
	if got := logged.String(); strings.Count(got, "accepts the gateway's token") != 1 || strings.Contains(got, wrong) || strings.Contains(got, upstreamToken) {
		t.Fatalf("log once the token is fixed (want one line saying so, no token):\n%s", got)
	}
}

// The start-up probe says what a device's call would meet: an upstream
// that answers, one not up yet (normal while compose starts both: a
// warning, and the gateway keeps serving), and one that is not MCP.
func TestProbeUpstreamSaysWhy(t *testing.T) {
	t.Parallel()
	notMCP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notMCP.Close)
	for _, c := range []struct {
		name string
		up   *upstream
		says []string
	}{
		{"answers", startFake(t), []string{"level=INFO", "upstream answers"}},
		{"down", &upstream{url: "http://127.0.0.1:1/mcp"}, []string{"level=WARN", "connection refused", "start mempalace serve"}},
		{"not MCP", &upstream{url: notMCP.URL + "/mcp"}, []string{"level=ERROR", "HTTP 404", "--upstream"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGWAt(t, devices, c.up)
			var logged testbed.SyncBuffer
			g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
			g.srv.ProbeUpstream(context.Background())
			for _, s := range c.says {
				if !strings.Contains(logged.String(), s) {
					t.Errorf("probe's log lacks %q:\n%s", s, logged.String())
				}
			}
		})
	}
}

// Against real MemPalace 3.11.0 serve the probe reads an answer (a
// tools/list without an MCP session) and a wrong token for what each is.
func TestRealProbeUpstream(t *testing.T) {
	u, _ := startReal(t)
	g := newGWAt(t, devices, u)
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	g.srv.ProbeUpstream(context.Background())
	g.srv.UpstreamToken = func() string { return "wrong-token-0123456789abcdef" }
	g.srv.ProbeUpstream(context.Background())
	if got := logged.String(); !strings.Contains(got, "upstream answers") || !strings.Contains(got, "refused the gateway's token") {
		t.Fatalf("probe's log, right then wrong token:\n%s", got)
	}
}
