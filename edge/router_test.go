package edge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/testbed"
)

// inProcess answers tool calls from a test double in this process, over
// the same wire encoding the child and the primary use: the router's two
// interfaces without a process or a socket.
type inProcess struct {
	pl     *fakepalace.Palace
	down   bool            // the primary's breaker is open
	device deviceinfo.Info // what the primary advertises (none without an ID)
}

func (s *inProcess) Relay(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error, error) {
	if s.down {
		return nil, nil, ErrPrimaryDown
	}
	line, err := s.pl.Handle(wire.Request("t-1", "tools/call", params))
	if err != nil {
		return nil, nil, err
	}
	return wire.SplitAnswer(line)
}

func (s *inProcess) call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	params, err := wire.EncodeCallParams(p)
	if err != nil {
		return nil, err
	}
	raw, rpcErr, err := s.Relay(ctx, params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	if err != nil {
		return nil, err
	}
	return wire.DecodeResult(raw)
}

// localPalace
func (s *inProcess) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return s.call(ctx, p)
}

// primaryPalace (through primaryOf)
type inProcessPrimary struct{ *inProcess }

func (s inProcessPrimary) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	return s.call(ctx, p)
}
func (s inProcessPrimary) CallLong(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	return s.call(ctx, p)
}
func (s inProcessPrimary) Up() bool        { return !s.down }
func (s inProcessPrimary) Connected() bool { return !s.down }
func (s inProcessPrimary) Device() (deviceinfo.Info, bool) {
	return s.device, s.device.ID != ""
}
func (s inProcessPrimary) RefreshDevice(context.Context) bool { return false }
func (s inProcessPrimary) LastStatus() int                    { return 200 }
func (s inProcessPrimary) ListTools(context.Context) ([]*mcp.Tool, error) {
	line, err := s.pl.Handle(wire.Request("t-1", "tools/list", nil))
	if err != nil {
		return nil, err
	}
	raw, rpcErr, err := wire.SplitAnswer(line)
	if rpcErr != nil {
		return nil, rpcErr
	}
	var r mcp.ListToolsResult
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	return r.Tools, err
}
func (s inProcessPrimary) State() string {
	if s.down {
		return "down"
	}
	return "up"
}

// startPrimary starts a fake primary over HTTP (bearer testToken) on a
// free port, stopped when the test ends.
func startPrimary(t *testing.T) (*fakepalace.Palace, *fakepalace.HTTPServer) {
	t.Helper()
	return testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: testToken})
}

func newPalace(t *testing.T) *fakepalace.Palace {
	t.Helper()
	pl, err := fakepalace.New(fakepalace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// routerUnderTest is an edge with no processes: the router, an outbox in
// a temp dir, and two in-process palaces.
func routerUnderTest(t *testing.T) (*Edge, *inProcess, *inProcess, *outbox.Store) {
	t.Helper()
	local, primary := &inProcess{pl: newPalace(t)}, &inProcess{pl: newPalace(t)}
	ob, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	e := &Edge{
		cfg:         Config{PrimaryURL: "http://primary.invalid/mcp", CallTimeout: 1e9},
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		localServer: local, remote: inProcessPrimary{primary},
		outbox: ob, pw: &policyWatch{dir: t.TempDir(), pol: &Policy{Version: 1, Wings: map[string]Rule{"private": {Replicate: "local"}}}},
		listedFrom: map[string]toolSource{}, childTools: map[string]*mcp.Tool{}, primaryTools: map[string]*mcp.Tool{},
	}
	return e, local, primary, ob
}

func routed(t *testing.T, e *Edge, tool string, args map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(args)
	return routedRaw(t, e, tool, b)
}

// routedRaw is routed with the arguments as the agent's bytes.
func routedRaw(t *testing.T, e *Edge, tool string, args []byte) map[string]any {
	t.Helper()
	res, err := e.route(context.Background(), newCall(&mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}))
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text, ok := objectText(res)
	if !ok {
		t.Fatalf("%s: not a JSON object result: %+v", tool, res)
	}
	return objectMap(text)
}

func TestRouterInProcess(t *testing.T) {
	t.Parallel()
	e, local, primary, ob := routerUnderTest(t)
	ctx := context.Background()

	// A write lands locally and is queued under the agent's name; a wing
	// the policy keeps local is not queued.
	w := routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "written here"})
	if edge, _ := w["edge"].(map[string]any); edge["replication"] != "queued" {
		t.Errorf("add_drawer: %v", w)
	}
	routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "private", "room": "r", "content": "stays here"})
	if n := local.pl.Dump().CountContent("stays here"); n != 1 {
		t.Errorf("local palace holds the private drawer %d times", n)
	}
	ops, _ := ob.List(ctx, 10)
	if len(ops) != 1 || ops[0].Tool != "mempalace_add_drawer" || ops[0].Wing != "notes" {
		t.Fatalf("queued: %+v", ops)
	}

	// A merged read sees both palaces.
	primary.pl.Handle(wire.Request("x", "tools/call", json.RawMessage(`{"name":"mempalace_add_drawer","arguments":{"wing":"notes","room":"r","content":"written elsewhere"}}`)))
	s := routed(t, e, "mempalace_search", map[string]any{"query": "written", "limit": 10})
	origins := map[string]string{}
	for _, h := range s["results"].([]any) {
		hm := h.(map[string]any)
		origins[hm["text"].(string)] = palaceOf(hm)
	}
	if origins["written here"] != "local" || origins["written elsewhere"] != "primary" {
		t.Errorf("merged search origins: %v", origins)
	}

	// A primary-first read falls back to the local palace, degraded.
	primary.down = true
	st := routed(t, e, "mempalace_list_wings", nil)
	if st["degraded"] != true || st["wings"].(map[string]any)["private"] == nil {
		t.Errorf("list_wings with the primary down: %v", st)
	}
	// A coordination read has nowhere else to go: a clear error.
	ev := routed(t, e, "mempalace_event_list", map[string]any{})
	if ev["success"] != false || !strings.Contains(ev["error"].(string), "primary is unreachable") {
		t.Errorf("event_list with the primary down: %v", ev)
	}
	// A merged read neither palace answers usably: the local palace's own
	// answer (here its JSON-RPC error), asked once.
	rec := &recording{args: map[string][]string{}}
	e.localServer = recordingLocal{local, rec}
	_, err := e.route(ctx, newCall(&mcp.CallToolParams{Name: "mempalace_search", Arguments: json.RawMessage(`{}`)}))
	if rpcErr := peerError(err); rpcErr == nil || !strings.Contains(rpcErr.Message, "query") || len(rec.args["mempalace_search"]) != 1 {
		t.Errorf("search without a query, the primary down: %v, the local palace asked %d times", err, len(rec.args["mempalace_search"]))
	}
	e.localServer = local
	// Local-only tools never reach the primary.
	before := primary.pl.Calls("mempalace_get_aaak_spec") + primary.pl.Calls("mempalace_hook_settings")
	primary.down = false
	routed(t, e, "mempalace_hook_settings", map[string]any{})
	if primary.pl.Calls("mempalace_hook_settings") != 0 || before != 0 {
		t.Error("hook_settings reached the primary")
	}
	// A by-id read of a drawer only the primary has is asked of it.
	var d map[string]any
	json.Unmarshal([]byte(gjsonText(t, primary.pl, `{"name":"mempalace_search","arguments":{"query":"written elsewhere"}}`)), &d)
	id := d["results"].([]any)[0].(map[string]any)["drawer_id"].(string)
	g := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": id})
	if g["content"] != "written elsewhere" || g["edge"].(map[string]any)["source"] != "primary" {
		t.Errorf("get_drawer of a primary-only drawer: %v", g)
	}
}

// gjsonText is the text of a tool result the palace gives for params.
func gjsonText(t *testing.T, pl *fakepalace.Palace, params string) string {
	t.Helper()
	line, err := pl.Handle(wire.Request("q", "tools/call", json.RawMessage(params)))
	if err != nil {
		t.Fatal(err)
	}
	raw, rpcErr, err := wire.SplitAnswer(line)
	if err != nil || rpcErr != nil {
		t.Fatal(err, rpcErr)
	}
	res, err := wire.DecodeResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// recording remembers the arguments' bytes of every call it is given.
type recording struct {
	mu   sync.Mutex
	args map[string][]string // tool -> each call's arguments, as received
}

func (r *recording) note(p *mcp.CallToolParams) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := p.Arguments.(json.RawMessage)
	r.args[p.Name] = append(r.args[p.Name], string(b))
}

type recordingLocal struct {
	*inProcess
	*recording
}

func (s recordingLocal) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	s.note(p)
	return s.inProcess.Call(ctx, p)
}

type recordingPrimary struct {
	inProcessPrimary
	*recording
}

func (s recordingPrimary) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	s.note(p)
	return s.inProcessPrimary.Call(ctx, p, retry)
}

// A call is understood once and forwarded as the agent wrote it: the
// arguments' bytes (spacing, key order, a number's spelling) reach the
// local palace and the primary unchanged on every route that forwards
// them, and a write's outbox payload is them, byte for byte (what the
// flusher sends).
func TestCallsForwardTheAgentsBytes(t *testing.T) {
	t.Parallel()
	e, local, primary, ob := routerUnderTest(t)
	lrec, prec := &recording{args: map[string][]string{}}, &recording{args: map[string][]string{}}
	e.localServer, e.remote = recordingLocal{local, lrec}, recordingPrimary{inProcessPrimary{primary}, prec}
	ctx := context.Background()
	for _, c := range []struct {
		tool, args     string
		local, primary bool // reaches the local palace, the primary
	}{
		{"mempalace_add_drawer", `{ "content" : "spelled  as sent \u00e9", "wing":"notes","room":"r" }`, true, false},
		{"mempalace_search", `{"limit":5.0, "query":"spelled"}`, true, true},
		{"mempalace_list_wings", ` {} `, false, true},
		{"mempalace_hook_settings", `{"silent_save" :true}`, true, false},
	} {
		if _, err := e.route(ctx, newCall(&mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})); err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		for _, side := range []struct {
			name string
			want bool
			rec  *recording
		}{{"local", c.local, lrec}, {"primary", c.primary, prec}} {
			got := side.rec.args[c.tool]
			if side.want && (len(got) != 1 || got[0] != c.args) {
				t.Errorf("%s: the %s palace got %q, the agent sent %q", c.tool, side.name, got, c.args)
			}
		}
	}
	ops, err := ob.List(ctx, 10)
	if err != nil || len(ops) != 1 || string(ops[0].Payload) != `{ "content" : "spelled  as sent \u00e9", "wing":"notes","room":"r" }` {
		t.Fatalf("queued: %+v %v", ops, err)
	}
}

// Issue 29, point 5: the agent's answer names the op by its full id (as
// `edge outbox list --json` does; the commands take it or its short form).
// Before, answers carried a 16-digit prefix, tables 12 and JSON 64.
func TestTheAgentIsToldTheFullOpID(t *testing.T) {
	t.Parallel()
	e, _, _, ob := routerUnderTest(t)
	res := routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "which op?"})
	edge, _ := res["edge"].(map[string]any)
	id, _ := edge["op_id"].(string)
	ops, _ := ob.List(context.Background(), 10)
	if len(ops) != 1 || id != ops[0].ID {
		t.Fatalf("the agent was told op %q; the outbox holds %v", id, ops)
	}
}
