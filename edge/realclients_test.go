package edge

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// sdkLines runs realclients/sdk-client.mjs (the official TypeScript SDK)
// against `devbox-config edge` and returns its JSON lines.
func sdkLines(t *testing.T, env []string, calls string) []map[string]any {
	t.Helper()
	lines, _ := sdkRun(t, env, calls)
	return lines
}

// sdkRun is sdkLines with the process's stderr (the edge's and the child's).
func sdkRun(t *testing.T, env []string, calls string) ([]map[string]any, string) {
	t.Helper()
	h := testbed.NewHome(t)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		h.Setenv(k, v)
	}
	h.Setenv("CALLS", calls)
	out, errOut, err := h.Run(t, 90*time.Second, testbed.Node(t), testbed.Script(t, "sdk-client.mjs"), testbed.Build(t, "./cmd/devbox-config", "devbox-config"), "edge")
	if err != nil {
		t.Fatalf("sdk client: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines, errOut
}

func callText(lines []map[string]any, tool string) string {
	for _, l := range lines {
		if l["call"] == tool {
			b, _ := json.Marshal(l)
			return string(b)
		}
	}
	return ""
}

// The official TypeScript SDK drives the edge with server-everything as
// the child: tools, echo, progress and logging pass through.
func TestTypeScriptSDKThroughEdgeToServerEverything(t *testing.T) {
	testbed.Integration(t, "drives the pinned npm clients")
	ev := testbed.Module(t, "@modelcontextprotocol/server-everything/dist/index.js")
	lines := sdkLines(t, []string{
		"MEMPALACE_EDGE_CHILD=" + testbed.Node(t) + " " + ev + " stdio", "LOG_LEVEL=debug", "LINGER_MS=1500",
		"MEMPALACE_PALACE_PATH=" + filepath.Join(t.TempDir(), "palace"),
	}, `[{"name":"echo","arguments":{"message":"through the edge"}},
	     {"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":3},"progress":true},
	     {"name":"toggle-simulated-logging","arguments":{}}]`)
	all, _ := json.Marshal(lines)
	s := string(all)
	if !strings.Contains(callText(lines, "echo"), "Echo: through the edge") {
		t.Fatalf("echo: %s", s)
	}
	progress := strings.Count(s, `"progress":{`)
	if progress < 2 {
		t.Fatalf("progress did not pass through (%d notifications): %s", progress, s)
	}
	if !strings.Contains(s, `"notification":"notifications/message"`) {
		t.Fatalf("logging did not pass through: %s", s)
	}
	if !strings.Contains(s, `"get-sum"`) {
		t.Fatalf("child tools missing: %s", lines[1])
	}
}

// The TypeScript SDK aborts a slow call: it gives up at once, the edge
// tells the local palace server (notifications/cancelled with the id the
// server knows the call by), and the next call is answered.
func TestTypeScriptSDKCancelsThroughTheEdge(t *testing.T) {
	testbed.Integration(t, "drives the pinned npm clients")
	lines, stderr := sdkRun(t, []string{
		"MEMPALACE_EDGE_CHILD=" + testbed.Self(t, fakepalace.ProgramName),
		"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_status=2000",
		"MEMPALACE_PALACE_PATH=" + filepath.Join(t.TempDir(), "palace"),
	}, `[{"name":"mempalace_status","arguments":{},"cancel_after_ms":300},
	     {"name":"mempalace_kg_stats","arguments":{}}]`)
	var status, stats map[string]any
	for _, l := range lines {
		switch l["call"] {
		case "mempalace_status":
			status = l
		case "mempalace_kg_stats":
			stats = l
		}
	}
	if status["error"] == nil || status["ms"].(float64) > 1500 {
		t.Fatalf("the aborted call: %v", status)
	}
	if stats["result"] == nil {
		t.Fatalf("the call after it: %v", stats)
	}
	var childID string
	for _, l := range strings.Split(stderr, "\n") {
		_, j, ok := strings.Cut(l, "fakepalace: received ")
		var m traced
		if !ok || json.Unmarshal([]byte(j), &m) != nil {
			continue
		}
		if m.Method == "tools/call" && m.Name == "mempalace_status" {
			childID = string(m.ID)
		}
		if childID != "" && m.Method == "notifications/cancelled" && string(m.RequestID) == childID {
			return
		}
	}
	t.Fatalf("the child got no cancellation for its status call (id %s):\n%s", childID, stderr)
}

// The Inspector CLI (v2) calls a MemPalace tool through the edge, with the
// double as the child and as an upstream-style primary.
func TestInspectorCLIThroughEdge(t *testing.T) {
	testbed.Integration(t, "drives the pinned npm clients")
	dir := testbed.Dir(t)
	primary, srv := startPrimary(t)
	h := testbed.NewHome(t)
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	child := testbed.Self(t, fakepalace.ProgramName)
	palace := filepath.Join(t.TempDir(), "palace")
	h.Setenv("PATH", filepath.Dir(testbed.Node(t))+":"+h.Getenv("PATH"))
	args := []string{filepath.Join(dir, "node_modules", ".bin", "mcp-inspector"), "--cli",
		"-e", "MEMPALACE_EDGE_CHILD=" + child, "-e", "MEMPALACE_PALACE_PATH=" + palace,
		"-e", "MEMPALACE_REMOTE_URL=" + srv.URL(), "-e", "MEMPALACE_REMOTE_TOKEN=" + testToken,
		bin, "edge", "--method", "tools/call", "--tool-name", "mempalace_add_drawer",
		"--tool-arg", "wing=w", "room=r", "content=from the inspector", "--format", "json", "-q"}
	out, errOut, err := h.Run(t, 90*time.Second, testbed.Node(t), args...)
	if err != nil || !strings.Contains(out, `drawer_w_r_`) || !strings.Contains(out, "queued") {
		t.Fatalf("inspector: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	st, _ := fakepalace.ReadDump(palace)
	if len(st.Drawers) != 1 {
		t.Fatalf("the inspector's write did not land in the local palace: %v", st.Drawers)
	}
	// The edge exits when the inspector disconnects; what was queued is
	// flushed by the next edge (here: edge flush).
	deadline := time.Now().Add(10 * time.Second)
	for len(primary.Dump().Drawers) == 0 && time.Now().Before(deadline) {
		fo, fe, _ := h.Run(t, 30*time.Second, "env", "MEMPALACE_PALACE_PATH="+palace, "MEMPALACE_REMOTE_URL="+srv.URL(), "MEMPALACE_REMOTE_TOKEN="+testToken, bin, "edge", "flush")
		if len(primary.Dump().Drawers) == 0 {
			t.Logf("flush: %s %s", fo, fe)
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(primary.Dump().Drawers) != 1 {
		t.Fatal("the inspector's write never reached the primary")
	}
}

// server-everything behind a bearer-checking wrapper is a compliant
// Streamable HTTP primary (sessions, SSE responses). Its tools, which the
// local palace lacks and the catalogue does not know, are not listed (a
// call could not be answered; the description would only put the
// primary's text before the model), nor kept in the cache; the token is
// sent on every request; after the server restarts (sessions gone) the
// edge re-initializes.
func TestCompliantStreamableHTTPPrimary(t *testing.T) {
	testbed.Integration(t, "drives the pinned npm clients")
	testbed.Dir(t)
	port := testbed.FreePort(t)
	env := append(os.Environ(), "MCP_TOKEN="+testToken, fmt.Sprintf("PORT=%d", port))
	wrapper := testbed.Script(t, "auth-http.mjs")
	srv := testbed.Start(t, env, "listening", testbed.Node(t), wrapper)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	child := testbed.Self(t, fakepalace.ProgramName)
	palace := filepath.Join(t.TempDir(), "palace")
	common := []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace, "MEMPALACE_REMOTE_URL=" + url, "MEMPALACE_REMOTE_TOKEN=" + testToken}

	lines := sdkLines(t, common, `[{"name":"echo","arguments":{"message":"to the primary"}},{"name":"mempalace_status","arguments":{}}]`)
	all, _ := json.Marshal(lines)
	if strings.Contains(fmt.Sprint(lines[1]["tools"]), "echo") || strings.Contains(callText(lines, "echo"), "Echo: to the primary") {
		t.Fatalf("a tool only the primary has, unknown to the catalogue, listed or called: %s", all)
	}
	if !strings.Contains(string(all), `"mempalace_status"`) {
		t.Fatalf("local tools missing: %s", all)
	}
	if !strings.Contains(srv.Log(), "auth=Bearer "+testToken+" rpc=tools/call") {
		t.Fatalf("the bearer token was not sent on the call:\n%s", srv.Log())
	}
	// With the primary stopped, the cached list does not bring echo back.
	srv.Stop()
	lines = sdkLines(t, common, `[{"name":"mempalace_status","arguments":{}}]`)
	if strings.Contains(fmt.Sprint(lines[1]["tools"]), "echo") || !strings.Contains(fmt.Sprint(lines[1]["tools"]), "mempalace_status") {
		t.Fatalf("offline: %v", lines)
	}
	// Restarted (all sessions gone): a new edge process reaches it again.
	srv = testbed.Start(t, env, "listening", testbed.Node(t), wrapper)
	sdkLines(t, common, `[{"name":"mempalace_status","arguments":{}}]`)
	if !strings.Contains(srv.Log(), "auth=Bearer "+testToken+" rpc=tools/call") {
		t.Fatalf("after restart, no call reached the primary:\n%s", srv.Log())
	}
}

// An unknown tool is a write (RFC 001 §4.2) and is replayed exactly as the
// agent called it: server-memory (no MemPalace tool at all) is both the
// local server and, behind the official SDK's Streamable HTTP transport,
// the primary. create_entities lands in both, under its own name (it was
// replayed as mempalace_create_entities and blocked the queue).
func TestUnknownToolReplaysUnderItsOwnName(t *testing.T) {
	testbed.Integration(t, "drives the pinned npm clients")
	dir := testbed.Dir(t)
	port := testbed.FreePort(t)
	primaryFile := filepath.Join(t.TempDir(), "primary-memory.jsonl")
	env := append(os.Environ(), "MCP_TOKEN="+testToken, fmt.Sprintf("PORT=%d", port), "MEMORY_FILE_PATH="+primaryFile)
	srv := testbed.Start(t, env, "listening", testbed.Node(t), testbed.Script(t, "memory-http.mjs"))
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	memory := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	palace := filepath.Join(t.TempDir(), "palace")
	localFile := filepath.Join(t.TempDir(), "local-memory.jsonl")
	common := []string{"MEMPALACE_EDGE_CHILD=" + testbed.Node(t) + " " + memory, "MEMORY_FILE_PATH=" + localFile,
		"MEMPALACE_PALACE_PATH=" + palace, "MEMPALACE_REMOTE_URL=" + url, "MEMPALACE_REMOTE_TOKEN=" + testToken, "LINGER_MS=1500"}
	lines, stderr := sdkRun(t, common, `[{"name":"create_entities","arguments":{"entities":[{"name":"ada","entityType":"person","observations":["wrote the first program"]}]}}]`)
	if !strings.Contains(callText(lines, "create_entities"), "wrote the first program") {
		t.Fatalf("create_entities through the edge: %s\n%s", callText(lines, "create_entities"), stderr)
	}
	local, _ := os.ReadFile(localFile)
	if !strings.Contains(string(local), "wrote the first program") {
		t.Fatalf("the local server-memory does not have it: %q", local)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(readFile(primaryFile), "wrote the first program") {
		h := testbed.NewHome(t)
		h.Run(t, 30*time.Second, "env", "MEMPALACE_PALACE_PATH="+palace, "MEMPALACE_REMOTE_URL="+url, "MEMPALACE_REMOTE_TOKEN="+testToken, testbed.Build(t, "./cmd/devbox-config", "devbox-config"), "edge", "flush")
	}
	if !strings.Contains(readFile(primaryFile), "wrote the first program") {
		t.Fatalf("create_entities never reached the primary; its calls:\n%s", srv.Log())
	}
	if !strings.Contains(srv.Log(), "tools/call create_entities") || strings.Contains(srv.Log(), "mempalace_create_entities") {
		t.Errorf("the primary saw:\n%s", srv.Log())
	}
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }
