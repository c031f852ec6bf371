package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// startEdge runs an edge in process against url with a device token and
// returns a client session to it.
func startEdge(t *testing.T, url, token, agent, claimedDevice string) *mcp.ClientSession {
	t.Helper()
	palace := filepath.Join(t.TempDir(), "palace")
	cfg := edge.Config{
		PrimaryURL: url, Token: func() string { return token },
		Child:    []string{testbed.Self(t, fakepalace.ProgramName)},
		ChildEnv: append(os.Environ(), "MEMPALACE_PALACE_PATH="+palace),
		Palace:   palace, Agent: agent, OriginDevice: claimedDevice, CallTimeout: 3 * time.Second, Probe: 10 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}) // the edge's stop, waited for: its child's close outlasts cancel on a loaded machine
	go func() { edge.New(cfg).Serve(ctx, inR, outW); outW.Close(); close(done) }()
	s, err := mcp.NewClient(&mcp.Implementation{Name: agent, Version: "0"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); cancel(); <-done })
	return s
}

func edgeCall(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "mempalace_" + tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var m map[string]any
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &m)
	return m
}

// Two devices' edges write through the gateway: the primary's drawers
// carry each device's stamp from its credential (not what the edge
// claimed), and one device's private wing is invisible to the other in
// merged search.
func TestTwoEdgesThroughTheGateway(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	url := g.http.URL + "/mcp"
	laptop := startEdge(t, url, g.tokens["laptop-7f3a"], "opencode", "i-am-the-admin")
	desk := startEdge(t, url, g.tokens["desk-9b21"], "pi", "")

	edgeCall(t, laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "laptop's shared release note"})
	edgeCall(t, desk, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "desk's shared release checklist"})
	edgeCall(t, desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "desk's private release secrets"})
	want := map[string]string{
		"laptop's shared release note":    "opencode/laptop/laptop-7f3a",
		"desk's shared release checklist": "mcp/desk/desk-9b21",
		"desk's private release secrets":  "mcp/desk/desk-9b21",
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := map[string]string{}
		for _, d := range g.primary.Dump().Drawers {
			got[d.Content] = d.AddedBy
		}
		if len(got) == 3 {
			for c, stamp := range want {
				if got[c] != stamp {
					t.Errorf("%q stamped %q, want %q", c, got[c], stamp)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replication through the gateway incomplete: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := edgeCall(t, laptop, "search", map[string]any{"query": "release", "limit": 10})
	hits := res["results"].([]any)
	if strings.Contains(strings.ToLower(fmtJSON(hits)), "private") || len(hits) != 2 {
		t.Fatalf("laptop's merged search: %s", fmtJSON(res))
	}
	res = edgeCall(t, desk, "search", map[string]any{"query": "release", "limit": 10})
	if len(res["results"].([]any)) != 3 {
		t.Fatalf("desk should see all three: %s", fmtJSON(res))
	}
	// The gateway refused the laptop nothing it was allowed, and logged it all.
	if n, err := Verify(g.srv.cfg.Load().AuditLog, nil); err != nil || n == 0 {
		t.Fatalf("audit: %d %v", n, err)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
