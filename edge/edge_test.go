package edge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

const testToken = "tok-SECRET-edge-test"

type harness struct {
	t       testing.TB
	palace  string
	primary *fakepalace.Palace
	srv     *fakepalace.HTTPServer
	edge    *Edge
	s       *mcp.ClientSession
	logs    *testbed.SyncBuffer
	// childLog is the child's stderr (FAKEPALACE_TRACE=1 lines);
	// primaryLog the primary's trace.
	childLog, primaryLog *testbed.SyncBuffer
	// With harnessOpts.raw: the agent's side as JSON lines, no SDK.
	in    io.Writer
	lines chan map[string]any
	seen  map[string]map[string]any
	// stop cancels Serve's context (a signal, in the binary); done is
	// closed when Serve has returned.
	stop func()
	done chan struct{}
}

type harnessOpts struct {
	passThrough bool
	session     bool
	embedder    string
	childEnv    []string
	policy      string
	device      string
	palace      string // use this palace directory (default: a new one)
	timeout     time.Duration
	raw         bool     // the agent is the test, writing JSON-RPC lines
	child       []string // the local palace server's argv (default: the test double)
	primaryDown bool     // nothing listens at the primary's URL
	// primaryNow is the test double primary's clock (default time.Now).
	primaryNow func() time.Time
	// env is the edge's environment: its palace, child and child's
	// environment are what `devbox-config edge` makes of it
	// (ladder.ResolveEdge, ladder.ChildEnviron, ConfigFrom), in edge mode
	// against the primary.
	env []string
	// realLocal is a real MemPalace palace: its mempalace-mcp is the
	// child, with exactly its environment (testbed/realpalace).
	realLocal *realpalace.Palace
	// primaryURL is a primary of the test's own (real serve, a proxy in
	// front of it) with testToken; no double is started.
	primaryURL string
	// token is the primary's bearer (default testToken); tokenFn, if set,
	// is asked for it on every request instead (a token revoked mid-run).
	token   string
	tokenFn func() string
	// wakeWait, mailboxPoll: Config's (default: the edge's).
	wakeWait, mailboxPoll time.Duration
	// grantAsk: Config's (default: the edge's).
	grantAsk time.Duration
	// stopGrace: Config's (default: the edge's).
	stopGrace time.Duration
	// lease: Config's (default: the edge's).
	lease time.Duration
	// writeGrace: Config's (default: the edge's).
	writeGrace time.Duration
	// writeBound: Config's (default: the edge's).
	writeBound time.Duration
	// childExitWait: Config's (default: the edge's); short where the test
	// stops a local palace that is still at a call it never answers.
	childExitWait time.Duration
	// trustWait: Config's (default: the edge's wakeTrustWait); long where
	// the test means the device header a kept view waits for, not the bound.
	trustWait time.Duration
	// childMaxMessage: Config's (default: the edge's 64 MiB).
	childMaxMessage int
	// primaryMaxAnswer: Config's (default: the edge's 64 MiB).
	primaryMaxAnswer int
	// identity is the agent's identity (default opencode@edge-test).
	identity string
	// agentRefused is MEMPALACE_AGENT_NAME as given, refused by the
	// ladder: the identity is then identity as it is ("": none).
	agentRefused string
	// labelRefused is MEMPALACE_ORIGIN_LABEL as given, refused by the
	// ladder (the identity is then identity as it is).
	labelRefused string
	// client is the agent's client options (default none).
	client *mcp.ClientOptions
	// out wraps the edge's output to the agent (default as it is).
	out func(io.WriteCloser) io.WriteCloser
	// beforeServe, if set, is run on the edge before it serves.
	beforeServe func(*Edge)
}

func start(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, palace: filepath.Join(t.TempDir(), "palace"), logs: &testbed.SyncBuffer{}, childLog: &testbed.SyncBuffer{}, primaryLog: &testbed.SyncBuffer{}}
	if o.palace != "" {
		h.palace = o.palace
	}
	if o.realLocal != nil {
		h.palace = o.realLocal.Dir
	}
	child := testbed.Self(t, fakepalace.ProgramName)
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{
		Token: func() string { return cmp.Or(o.token, testToken) }, Child: []string{child},
		ChildEnv: append(append(os.Environ(), "MEMPALACE_PALACE_PATH="+h.palace), o.childEnv...),
		Palace:   h.palace, Agent: "opencode", Identity: cmp.Or(o.identity, "opencode@edge-test"), OriginDevice: o.device, CallTimeout: 3 * time.Second, Probe: 10 * time.Millisecond, Log: log,
		ChildStderr: io.MultiWriter(h.childLog, os.Stderr),
	}
	if o.tokenFn != nil {
		cfg.Token = o.tokenFn
	}
	if o.agentRefused != "" {
		cfg.AgentRefused, cfg.Agent, cfg.Identity = o.agentRefused, "", o.identity
	}
	cfg.LabelRefused = o.labelRefused
	if o.timeout > 0 {
		cfg.CallTimeout = o.timeout
	}
	cfg.GrantAsk, cfg.Lease = o.grantAsk, o.lease
	cfg.WakeWait, cfg.MailboxPoll, cfg.StopGrace, cfg.WriteGrace, cfg.WriteBound, cfg.childExitWait, cfg.trustWait = o.wakeWait, o.mailboxPoll, o.stopGrace, o.writeGrace, o.writeBound, o.childExitWait, o.trustWait
	cfg.childMaxMessage, cfg.primaryMaxAnswer = o.childMaxMessage, o.primaryMaxAnswer
	switch {
	case o.primaryURL != "":
		cfg.PrimaryURL = o.primaryURL
	case !o.passThrough:
		h.primary, h.srv = testbed.Primary(t, fakepalace.Options{Dir: t.TempDir(), Embedder: o.embedder, Now: o.primaryNow}, fakepalace.HTTPOptions{Token: testToken, SessionMode: o.session})
		fakepalace.SetTrace(h.primary, h.primaryLog)
		cfg.PrimaryURL = h.srv.URL()
		if o.primaryDown {
			h.srv.Stop()
		}
	}
	if o.env != nil {
		env := append(o.env, ladder.EnvEdge+"=1", ladder.EnvRemoteURL+"="+cfg.PrimaryURL, ladder.EnvRemoteToken+"="+testToken)
		s, _, err := ladder.ResolveEdge(func(k string) (string, bool) {
			for _, kv := range slices.Backward(env) {
				if v, ok := strings.CutPrefix(kv, k+"="); ok {
					return v, true
				}
			}
			return "", false
		}, exec.LookPath)
		if err != nil {
			t.Fatal(err)
		}
		from := ConfigFrom(s, cfg.Token, ladder.ChildEnviron(env, s.Palace), "test", log)
		cfg.Child, cfg.ChildEnv, cfg.Palace, h.palace = from.Child, from.ChildEnv, from.Palace, from.Palace
	}
	if o.realLocal != nil {
		cfg.Child, cfg.ChildEnv = o.realLocal.MCPCommand(), o.realLocal.Env()
	}
	if o.child != nil {
		cfg.Child = o.child
	}
	if o.policy != "" {
		os.MkdirAll(filepath.Join(h.palace, "edge"), 0o700)
		os.WriteFile(filepath.Join(h.palace, "edge", PolicyFile), []byte(o.policy), 0o600)
	}
	h.edge = New(cfg)
	if o.beforeServe != nil {
		o.beforeServe(h.edge)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.stop, h.done = cancel, done
	var out io.WriteCloser = outW
	if o.out != nil {
		out = o.out(outW)
	}
	go func() { h.edge.Serve(ctx, inR, out); outW.Close(); close(done) }()
	if o.raw {
		h.in, h.lines, h.seen = inW, make(chan map[string]any, 100), map[string]map[string]any{}
		go func() {
			dec := json.NewDecoder(outR)
			for {
				var m map[string]any
				if dec.Decode(&m) != nil {
					close(h.lines)
					return
				}
				h.lines <- m
			}
		}()
		t.Cleanup(func() {
			inW.Close()
			cancel()
			<-done
		})
		return h
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, o.client).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() {
		s.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("edge did not stop")
		}
		if strings.Contains(h.logs.String(), testToken) {
			t.Error("the token appears in the edge's log")
		}
	})
	return h
}

// send writes one JSON-RPC message as the agent (raw harness).
func (h *harness) send(msg map[string]any) {
	h.t.Helper()
	b, _ := json.Marshal(msg)
	if _, err := h.in.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
}

// await returns the edge's answer to id, or nil if none came within d;
// other messages are kept in h.seen (raw harness).
func (h *harness) await(id string, d time.Duration) map[string]any {
	if m, ok := h.seen[id]; ok {
		return m
	}
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-h.lines:
			if !ok {
				return nil
			}
			if mid, ok := m["id"]; ok {
				h.seen[fmt.Sprint(mid)] = m
				if fmt.Sprint(mid) == id {
					return m
				}
			}
		case <-deadline:
			return nil
		}
	}
}

// handshake is the legacy initialize exchange (raw harness).
func (h *harness) handshake() {
	h.t.Helper()
	h.send(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "0"}}})
	if a := h.await("0", 5*time.Second); a["result"] == nil {
		h.t.Fatalf("initialize: %v", a)
	}
	h.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// call runs a tool through the edge and decodes the text block.
func (h *harness) call(name string, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_" + name, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	var m map[string]any
	if len(res.Content) > 0 {
		json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &m)
	}
	return m, res
}

// onPrimary calls the primary directly, as another device would.
func (h *harness) onPrimary(name string, args map[string]any) map[string]any {
	h.t.Helper()
	return postTool(h.t, h.srv.URL(), testToken, name, args)
}

// postTool calls a tool on an MCP endpoint that answers plain POSTs (the
// test double, a gateway) with a bearer; the answer's text, decoded.
func postTool(t testing.TB, url, token, name string, args map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + name, "arguments": args}})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Result struct {
			Content []struct{ Text string }
		}
	}
	json.NewDecoder(resp.Body).Decode(&r)
	var m map[string]any
	json.Unmarshal([]byte(r.Result.Content[0].Text), &m)
	return m
}

func (h *harness) localState() *fakepalace.State {
	st, err := fakepalace.ReadDump(h.palace)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// eventually polls cond for up to 10 s (replication is asynchronous).
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s\nlog:\n%s", what, h.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRoutingTable(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{policy: `{"version":1,"wings":{"private":{"replicate":"local"}}}`, device: "dev-7f3a"})

	// write: local first, replicated, stamped on the primary only
	r, _ := h.call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "we chose sqlite for the outbox"})
	if r["success"] != true || r["edge"].(map[string]any)["replication"] != "queued" {
		t.Fatalf("add_drawer: %v", r)
	}
	if h.localState().CountContent("we chose sqlite for the outbox") != 1 {
		t.Fatal("write did not land locally")
	}
	h.eventually("the write on the primary", func() bool { return h.primary.Dump().CountContent("we chose sqlite for the outbox") == 1 })
	for _, d := range h.primary.Dump().Drawers {
		if d.AddedBy != "opencode/-/dev-7f3a" {
			t.Errorf("primary stamp %q", d.AddedBy)
		}
	}
	for _, d := range h.localState().Drawers {
		if d.AddedBy != "mcp" {
			t.Errorf("the local palace was stamped: %q", d.AddedBy)
		}
	}

	// write to a local wing: never leaves the device
	r, _ = h.call("add_drawer", map[string]any{"wing": "private", "room": "notes", "content": "my private outbox thoughts"})
	if !strings.Contains(fmt.Sprint(r["edge"]), "local only") {
		t.Fatalf("local wing: %v", r)
	}
	// a drawer only the primary has (another device wrote it)
	h.onPrimary("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "the outbox flushes in order"})

	// merged read: union, dedupe by drawer_id, sorted by distance, tagged
	r, _ = h.call("search", map[string]any{"query": "outbox", "limit": 10})
	hits := r["results"].([]any)
	origins := map[string]string{}
	last := -1.0
	for _, x := range hits {
		hm := x.(map[string]any)
		origins[hm["text"].(string)] = palaceOf(hm)
		if d := hm["distance"].(float64); d < last {
			t.Errorf("not sorted by distance: %v", hits)
		} else {
			last = d
		}
	}
	want := map[string]string{"we chose sqlite for the outbox": "both", "my private outbox thoughts": "local", "the outbox flushes in order": "primary"}
	for text, o := range want {
		if origins[text] != o {
			t.Errorf("hit %q origin %q, want %q (all: %v)", text, origins[text], o, origins)
		}
	}
	if len(hits) != 3 || r["degraded"] != nil {
		t.Fatalf("merged search: %v", r)
	}
	if r, _ := h.call("search", map[string]any{"query": "outbox", "limit": 2}); len(r["results"].([]any)) != 2 {
		t.Fatalf("limit not applied to the merged list: %v", r)
	}

	// primary first: a fact only the primary has
	h.onPrimary("kg_add", map[string]any{"subject": "fleet", "predicate": "uses", "object": "edge"})
	if r, _ := h.call("kg_query", map[string]any{"entity": "fleet"}); r["count"] != 1.0 || r["edge"].(map[string]any)["source"] != "primary" {
		t.Fatalf("kg_query: %v", r)
	}

	// by id: not here, so from the primary
	id := DrawerIDFor("shared", "notes", "the outbox flushes in order")
	if r, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); r["content"] != "the outbox flushes in order" {
		t.Fatalf("get_drawer: %v", r)
	}

	// local only: never proxied
	for _, tool := range []string{"sync", "mine", "reconnect", "hook_settings"} {
		args := map[string]any{}
		if tool == "mine" {
			args["source"] = "/workspace"
		}
		h.call(tool, args)
		if n := h.primary.Calls("mempalace_" + tool); n != 0 {
			t.Errorf("%s reached the primary %d times", tool, n)
		}
	}
	h.call("delete_drawer", map[string]any{"drawer_id": DrawerIDFor("shared", "notes", "we chose sqlite for the outbox")})
	if h.primary.Calls("mempalace_delete_drawer") != 0 || h.primary.Dump().CountContent("we chose sqlite for the outbox") != 1 {
		t.Fatal("a delete reached the primary")
	}

	// coordination: the primary's log only, with the primary's own event id
	r, _ = h.call("event_append", map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "opencode@laptop", "to_agent": "pi@desk"})
	ev, _ := r["event"].(map[string]any)
	if r["success"] != true || !strings.HasPrefix(fmt.Sprint(ev["id"]), "evt_") {
		t.Fatalf("event_append: %v", r)
	}
	if len(h.localState().Events) != 0 || len(h.primary.Dump().Events) != 1 {
		t.Fatal("a coordination write touched the local log, or did not reach the primary once")
	}
	if r, _ := h.call("event_list", map[string]any{"to_agent": "pi@desk"}); r["count"] != 1.0 {
		t.Fatalf("event_list: %v", r)
	}
}

// DrawerIDFor is the drawer id MemPalace gives add_drawer content.
func DrawerIDFor(wing, room, content string) string { return fakepalace.DrawerID(wing, room, content) }

func TestPrimaryDownDegradesThenRecovers(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{timeout: 5 * time.Second})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written while online"})
	h.eventually("replication", func() bool { return h.primary.Dump().CountContent("written while online") == 1 })
	tools, _ := h.s.ListTools(context.Background(), nil)

	h.srv.Stop()
	r, _ := h.call("search", map[string]any{"query": "online"})
	if r["degraded"] != true || len(r["results"].([]any)) != 1 {
		t.Fatalf("search with the primary down: %v", r)
	}
	// The breaker is open now: the next read does not pay the timeout.
	begin := time.Now()
	r, _ = h.call("kg_stats", nil)
	if took := time.Since(begin); took > 2*time.Second || r["degraded"] != true {
		t.Fatalf("read with the breaker open took %v: %v", took, r)
	}
	r, _ = h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": "offline, still writing"})
	if r["success"] != true || r["edge"].(map[string]any)["replication"] != "queued" {
		t.Fatalf("offline write: %v", r)
	}
	// A coordination write is queued at once: with the breaker open the
	// edge does not wait out the call timeout for a send that cannot come.
	begin = time.Now()
	r, _ = h.call("event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@laptop"})
	if took := time.Since(begin); r["queued"] != true || took > 2*time.Second {
		t.Fatalf("offline coordination write (answered after %v): %v", took, r)
	}
	if r, res := h.call("event_list", map[string]any{}); !res.IsError || !strings.Contains(fmt.Sprint(r["error"]), "primary is unreachable") {
		t.Fatalf("offline coordination read: %v", r)
	}
	after, _ := h.s.ListTools(context.Background(), nil)
	if len(after.Tools) != len(tools.Tools) {
		t.Fatalf("tools vanished offline: %d -> %d", len(tools.Tools), len(after.Tools))
	}

	// The primary comes back on the same port: the queued writes arrive
	// once, in order, without any action.
	if err := h.srv.Start(""); err != nil {
		t.Fatal(err)
	}
	h.eventually("the queued diary on the primary", func() bool { return h.primary.Dump().CountContent("offline, still writing") == 1 })
	h.eventually("the queued event on the primary", func() bool { return len(h.primary.Dump().Events) == 1 })
	time.Sleep(300 * time.Millisecond)
	if n := h.primary.Dump().CountContent("offline, still writing"); n != 1 {
		t.Fatalf("diary arrived %d times", n)
	}
	r, _ = h.call("search", map[string]any{"query": "online"})
	if r["degraded"] != nil {
		t.Fatalf("still degraded after recovery: %v", r)
	}
}

func TestEmbedderCanary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{embedder: "embeddinggemma"})
	// Its first answer lost: the primary holds the drawer for a while
	// before the edge knows it landed, as a busy machine may make it (the
	// edge's hit stands for one not known landed, so no pair to compare).
	h.srv.DropAfterApplyTool("mempalace_add_drawer", 1)
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the same drawer on both sides"})
	h.drained()
	h.call("add_drawer", map[string]any{"wing": "private", "room": "r", "content": "drawer on both sides too"})
	r, _ := h.call("search", map[string]any{"query": "drawer both sides"})
	if r["embedder_mismatch"] != true {
		t.Fatalf("no mismatch flagged: %v", r)
	}
	for _, x := range r["results"].([]any) {
		if palaceOf(x) != "primary" {
			t.Fatalf("local hits merged despite the mismatch: %v", r["results"])
		}
	}
	if !strings.Contains(h.logs.String(), "embedder mismatch") {
		t.Fatal("mismatch not logged")
	}
}

func TestSessionModePrimaryReinitializes(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{session: true})
	if r, _ := h.call("kg_stats", nil); r["edge"].(map[string]any)["source"] != "primary" {
		t.Fatalf("kg_stats: %v", r)
	}
	h.srv.ExpireSessions()
	r, _ := h.call("kg_stats", nil)
	if r["edge"].(map[string]any)["source"] != "primary" || r["degraded"] != nil {
		t.Fatalf("after session expiry the read fell back instead of re-initializing: %v", r)
	}
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "via a session primary"})
	h.eventually("replication", func() bool { return h.primary.Dump().CountContent("via a session primary") == 1 })
}

func TestChildRespawn(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{passThrough: true, childEnv: []string{"FAKEPALACE_CRASH_ON=mempalace_mine"}})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "before the crash"})
	r, res := h.call("mine", map[string]any{"source": "/x"})
	if !res.IsError || !strings.Contains(fmt.Sprint(r["error"]), "local palace unavailable") {
		t.Fatalf("call in flight when the child died: %v", r)
	}
	r, _ = h.call("list_drawers", nil)
	if r["total"] != 1.0 {
		t.Fatalf("after respawn: %v", r)
	}
	if n := h.edge.child.Spawns(); n != 2 {
		t.Fatalf("child started %d times, want 2", n)
	}
}

func TestPassThroughCreatesNothing(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{passThrough: true})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "solitary"})
	h.call("search", map[string]any{"query": "solitary"})
	entries, _ := os.ReadDir(h.palace)
	for _, e := range entries {
		if e.Name() != "fakepalace.json" && e.Name() != fakepalace.SidecarFile { // the child's own files
			t.Errorf("pass-through created %s", e.Name())
		}
	}
	if h.edge.primary != nil || h.edge.outbox != nil {
		t.Fatal("pass-through made a primary client or an outbox")
	}
	if !strings.Contains(h.logs.String(), "pass-through") {
		t.Fatal("pass-through not announced on stderr")
	}
}

func TestCorruptOutboxLocalWriteStillSucceeds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	palace := filepath.Join(dir, "palace")
	os.MkdirAll(filepath.Join(palace, "edge"), 0o700)
	os.WriteFile(filepath.Join(palace, "edge", "outbox.sqlite"), []byte("this is not a database, it is garbage"), 0o600)
	h := start(t, harnessOpts{palace: palace})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "must not be held hostage"})
	if r["success"] != true || !strings.Contains(fmt.Sprint(r["edge"]), "outbox unavailable") {
		t.Fatalf("write with a corrupt outbox: %v", r)
	}
	if h.localState().CountContent("must not be held hostage") != 1 {
		t.Fatal("local write lost")
	}
	if !strings.Contains(h.logs.String(), "outbox.sqlite") {
		t.Fatal("the error does not name the outbox file")
	}
}

func writeFile(dir, name, body string) error {
	return os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// An unwritable outbox (its directory is a file) is a clear error and the
// local write still succeeds.
func TestUnwritableOutboxLocalWriteStillSucceeds(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	os.MkdirAll(palace, 0o700)
	os.WriteFile(filepath.Join(palace, "edge"), []byte("not a directory"), 0o600)
	h := start(t, harnessOpts{palace: palace})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "still written"})
	if r["success"] != true || !strings.Contains(fmt.Sprint(r["edge"]), "not replicated") || !strings.Contains(fmt.Sprint(r["edge"]), "edge") {
		t.Fatalf("write with an unwritable outbox: %v", r)
	}
	if h.localState().CountContent("still written") != 1 {
		t.Fatal("local write lost")
	}
	if !strings.Contains(h.logs.String(), "outbox unavailable") || !strings.Contains(h.logs.String(), filepath.Join(palace, "edge")) {
		t.Fatalf("no clear error in the log:\n%s", h.logs.String())
	}
}

// A tool cache written before the child's list was known (only the
// primary's tools in it) must not make a later edge send writes straight
// to the primary: writes stay local first.
func TestPartialToolCacheKeepsWritesLocalFirst(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	os.MkdirAll(filepath.Join(palace, "edge"), 0o700)
	var primaryOnly []map[string]any
	for _, n := range []string{"mempalace_add_drawer", "mempalace_search", "mempalace_status"} {
		primaryOnly = append(primaryOnly, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
	}
	b, _ := json.Marshal(map[string]any{"child": []any{}, "primary": primaryOnly})
	os.WriteFile(filepath.Join(palace, "edge", toolCacheFile), b, 0o600)
	h := start(t, harnessOpts{palace: palace, device: "dev-9"})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "local first, always"})
	if r["success"] != true || h.localState().CountContent("local first, always") != 1 {
		t.Fatalf("the write skipped the local palace: %v", r)
	}
	h.eventually("replication", func() bool { return h.primary.Dump().CountContent("local first, always") == 1 })
	for _, d := range h.primary.Dump().Drawers {
		if d.AddedBy != "opencode/-/dev-9" {
			t.Fatalf("primary copy stamped %q", d.AddedBy)
		}
	}
}
