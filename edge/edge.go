package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Version is reported to MCP peers; set by the command.
var Version = "dev"

// Edge is one running edge: the agent-facing server and its supervisors.
type Edge struct {
	cfg      Config
	log      *slog.Logger
	server   *mcp.Server
	implJSON []byte
	child    *Child
	primary  *Primary
	outbox   *outbox.Store
	obErr    error
	policy   *Policy
	polErr   error // the policy file could not be read: nothing replicates

	mu           sync.Mutex
	regMu        sync.Mutex // serializes addTools, so "registered" means AddTool is done
	registered   map[string]bool
	childTools   map[string]*mcp.Tool
	primaryTools map[string]*mcp.Tool
	toolsReady   chan struct{}
	readyOnce    sync.Once
	childListed  bool // the child's tool list is known (live or cached)
	agent        *mcp.ServerSession
	initialized  atomic.Bool // the agent finished initialize: the fast lane is open
	mismatch     string      // embedder canary: why merging stopped ("" = fine)
}

// New builds an edge from its configuration; Serve runs it.
func New(cfg Config) *Edge {
	e := &Edge{cfg: cfg, log: cfg.Log, registered: map[string]bool{}, childTools: map[string]*mcp.Tool{}, primaryTools: map[string]*mcp.Tool{}, toolsReady: make(chan struct{})}
	impl := &mcp.Implementation{Name: "mempalace-edge", Title: "MemPalace (devbox-config edge)", Version: Version}
	e.implJSON, _ = json.Marshal(impl) // for stateless answers (statelessResult)
	e.server = mcp.NewServer(impl, &mcp.ServerOptions{
		InitializedHandler: func(ctx context.Context, r *mcp.InitializedRequest) {
			e.setAgent(r.Session)
			e.initialized.Store(true)
		},
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
	})
	// tools/list and tools/call wait (bounded) for the first tool list, so
	// an agent that asks at once gets the palace's tools rather than none or
	// "unknown tool"; initialize is never held up.
	e.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" || method == "tools/call" {
				select {
				case <-e.toolsReady:
				case <-time.After(15 * time.Second):
				case <-ctx.Done():
				}
			}
			res, err := next(ctx, method, req)
			if method == "logging/setLevel" && err == nil {
				// The agent's level applies to the child too, so its log
				// messages are produced and pass through.
				if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok {
					go e.child.SetLoggingLevel(p)
				}
			}
			return res, err
		}
	})
	e.child = NewChild(cfg.Child, cfg.ChildEnv, cfg.Log, ChildOptions{
		OnTools:    func(t []*mcp.Tool) { e.addTools(t, false) },
		OnLog:      e.forwardLog,
		OnProgress: e.forwardProgress,
		Stderr:     cfg.ChildStderr,
	})
	return e
}

// Serve runs the edge on an agent connection until it closes or ctx ends.
func (e *Edge) Serve(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if e.cfg.PassThrough() {
		e.log.Info("no MEMPALACE_REMOTE_URL: transparent pass-through to the local palace (no files, no network)")
	} else {
		e.start(ctx, &wg)
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.child.Run(ctx) }()

	sw := &syncWriter{w: out}
	lane := newFastLane(ctx, e, sw)
	ss, err := e.server.Connect(ctx, &mcp.IOTransport{Reader: guardInput(in, sw, e.log, lane.intercept), Writer: sw, MaxLineLength: MaxMessage + 1}, nil)
	if err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("agent connection: %w", err)
	}
	e.setAgent(ss)
	err = ss.Wait()
	cancel()
	lane.wg.Wait()
	wg.Wait()
	if e.primary != nil {
		e.primary.Close()
	}
	if e.outbox != nil {
		e.outbox.Close()
	}
	return err
}

// start brings up the edge-mode parts: state dir, policy, tool cache,
// outbox and flusher, the primary supervisor.
func (e *Edge) start(ctx context.Context, wg *sync.WaitGroup) {
	dir := e.cfg.StateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.log.Error("cannot create the edge's state directory; replication is off", "dir", dir, "err", err)
	}
	pol, err := LoadPolicy(dir)
	if err != nil {
		// Replicating with an unknown policy could send a private wing to
		// the primary: nothing replicates until the file is fixed.
		e.log.Error("replication policy unreadable; nothing is replicated until it is fixed", "err", err)
		pol, e.polErr = &Policy{Version: 1, Wings: map[string]Rule{"*": {Replicate: "local"}}}, err
	}
	e.policy = pol
	e.loadToolCache()
	ob, err := outbox.Open(filepath.Join(dir, outbox.FileName), e.cfg.OriginDevice, e.cfg.OriginLabel)
	if err != nil {
		e.obErr = err
		e.log.Error("outbox unavailable: local writes still succeed but are not replicated", "err", err)
	}
	e.outbox = ob
	e.primary = NewPrimary(e.cfg.PrimaryURL, e.cfg.Token, e.log, PrimaryOptions{
		Timeout: e.cfg.CallTimeout,
		OnUp: func() {
			if e.outbox != nil {
				e.outbox.Resume(context.Background())
			}
		},
		OnTools: func(t []*mcp.Tool) { e.addTools(t, true) },
	})
	if ob != nil {
		f := &outbox.Flusher{S: ob, P: primaryAdapter{e.primary}, Log: e.log, Lease: e.cfg.Lease}
		wg.Add(1)
		go func() { defer wg.Done(); f.Run(ctx) }()
	}
	// Connect early (in the background) to learn the primary's tools; a
	// failure only opens the breaker. The tool list waits for the primary's
	// tools at most 3 s, and not at all once the primary is known down.
	go func() {
		cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
		defer cancel()
		if _, err := e.primary.sessionFor(cctx); err != nil && ctx.Err() == nil {
			e.primary.fail(err)
			e.readyWhenChild()
		}
	}()
	go func() {
		select {
		case <-time.After(3 * time.Second):
			e.readyWhenChild()
		case <-ctx.Done():
		}
	}()
}

// readyWhenChild marks the tools ready as soon as the child's list is in.
func (e *Edge) readyWhenChild() {
	for i := 0; i < 600; i++ {
		e.mu.Lock()
		known := e.childListed
		e.mu.Unlock()
		if known {
			e.markToolsReady()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	e.markToolsReady()
}

// markToolsReady lets tools/list and tools/call through.
func (e *Edge) markToolsReady() { e.readyOnce.Do(func() { close(e.toolsReady) }) }

func (e *Edge) setAgent(ss *mcp.ServerSession) {
	e.mu.Lock()
	e.agent = ss
	e.mu.Unlock()
}

func (e *Edge) agentSession() *mcp.ServerSession {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.agent
}

func (e *Edge) forwardLog(ctx context.Context, p *mcp.LoggingMessageParams) {
	if ss := e.agentSession(); ss != nil {
		ss.Log(ctx, p)
	}
}

func (e *Edge) forwardProgress(ctx context.Context, p *mcp.ProgressNotificationParams) {
	if ss := e.agentSession(); ss != nil {
		ss.NotifyProgress(ctx, p)
	}
}

// ---- tools ----

// addTools registers tools; fromPrimary marks the primary's list (only
// the tools the child lacks are added from it). Tools are never removed:
// the list an agent saw stays the same, online or offline.
func (e *Edge) addTools(tools []*mcp.Tool, fromPrimary bool) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	e.mu.Lock()
	var add []*mcp.Tool
	for _, t := range tools {
		if fromPrimary {
			e.primaryTools[t.Name] = t
		} else {
			e.childTools[t.Name] = t
		}
	}
	for _, t := range tools {
		if !e.registered[t.Name] {
			if st := sanitizeTool(t); st != nil {
				e.registered[t.Name] = true
				add = append(add, st)
			} else {
				e.log.Warn("tool skipped: its input schema is not an object schema", "tool", t.Name)
			}
		}
	}
	e.mu.Unlock()
	for _, t := range add {
		e.server.AddTool(t, e.handler)
	}
	e.mu.Lock()
	if !fromPrimary {
		e.childListed = true // only now: its tools are registered
	}
	childKnown, primaryKnown := e.childListed, len(e.primaryTools) > 0
	e.mu.Unlock()
	if childKnown && (primaryKnown || e.cfg.PassThrough()) {
		e.markToolsReady()
	}
	if !e.cfg.PassThrough() && childKnown {
		// Only a full view is cached: a cache written before the child's
		// list was in would make every tool look primary-only next time,
		// and writes would skip the local palace.
		e.saveToolCache()
	}
}

// sanitizeTool guards go-sdk's AddTool, which panics on a schema without
// "type":"object".
func sanitizeTool(t *mcp.Tool) *mcp.Tool {
	c := *t
	switch s := t.InputSchema.(type) {
	case nil:
		c.InputSchema = map[string]any{"type": "object"}
	case map[string]any:
		if s["type"] == nil {
			m := map[string]any{}
			for k, v := range s {
				m[k] = v
			}
			m["type"] = "object"
			c.InputSchema = m
		} else if s["type"] != "object" {
			return nil
		}
	}
	return &c
}

type toolCache struct {
	Child   []*mcp.Tool `json:"child"`
	Primary []*mcp.Tool `json:"primary"`
}

const toolCacheFile = "tools.json"

// loadToolCache registers the tools last seen, so the list is there at
// once, offline too, before the child or the primary answer.
func (e *Edge) loadToolCache() {
	b, err := os.ReadFile(filepath.Join(e.cfg.StateDir(), toolCacheFile))
	if err != nil {
		return
	}
	var c toolCache
	if json.Unmarshal(b, &c) != nil {
		return
	}
	e.addTools(c.Primary, true)
	if len(c.Child) > 0 {
		e.addTools(c.Child, false)
	}
}

func (e *Edge) saveToolCache() {
	e.mu.Lock()
	var c toolCache
	for name, t := range e.primaryTools {
		if e.childTools[name] == nil {
			c.Primary = append(c.Primary, t)
		}
	}
	for _, t := range e.childTools {
		c.Child = append(c.Child, t)
	}
	e.mu.Unlock()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return
	}
	tmp := filepath.Join(e.cfg.StateDir(), "."+toolCacheFile+".tmp")
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, filepath.Join(e.cfg.StateDir(), toolCacheFile))
	}
}

// primaryOnlyTool reports a tool the primary has and the local palace
// does not (a newer primary). Until the child's list is known, no tool is
// judged primary-only.
func (e *Edge) primaryOnlyTool(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, onPrimary := e.primaryTools[name]
	return onPrimary && e.childListed && e.childTools[name] == nil
}

// ---- calls ----

// handler is the SDK's way in for a tool call (before the fast lane opens).
func (e *Edge) handler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	e.setAgentIfNone(req.Session)
	return e.route(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: rawArgs(req.Params.Arguments), Meta: forwardMeta(req.Params.Meta)})
}

// route routes one tool call (RFC 001 §4.2).
func (e *Edge) route(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	name := p.Name
	if e.cfg.PassThrough() {
		return e.local(ctx, p)
	}
	if e.primaryOnlyTool(name) {
		return e.primaryOnly(ctx, p, "a tool only the primary has")
	}
	switch Route(name) {
	case MergedRead:
		return e.mergedRead(ctx, p)
	case PrimaryFirst:
		return e.primaryFirst(ctx, p)
	case ByID:
		return e.byID(ctx, p)
	case LocalOnly:
		return e.local(ctx, p)
	case Coordination:
		if IsCoordinationWrite(name) {
			return e.coordinationWrite(ctx, p)
		}
		return e.primaryOnly(ctx, p, "the coordination log lives on the primary")
	}
	return e.write(ctx, p)
}

func (e *Edge) setAgentIfNone(ss *mcp.ServerSession) {
	e.mu.Lock()
	if e.agent == nil {
		e.agent = ss
	}
	e.mu.Unlock()
}

func rawArgs(a json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(a)) == 0 || string(bytes.TrimSpace(a)) == "null" {
		return json.RawMessage("{}")
	}
	return a
}

// local calls the child. A JSON-RPC error from it is the agent's answer as
// it is; a child that is down gives an error result, never a hang.
func (e *Edge) local(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, err := e.child.Call(ctx, p)
	if err != nil {
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, rpcErr
		}
		return localDown(err), nil
	}
	return res, nil
}

// localDown is the error result for a local palace that cannot answer.
func localDown(err error) *mcp.CallToolResult {
	msg := err.Error()
	if !errors.Is(err, ErrLocalDown) {
		msg = ErrLocalDown.Error() + ": " + msg
	}
	return errorResult(msg, map[string]any{"local": "down"})
}

// primaryOnly calls the primary; down -> a clear error result.
func (e *Edge) primaryOnly(ctx context.Context, p *mcp.CallToolParams, why string) (*mcp.CallToolResult, error) {
	if e.primary == nil {
		return errorResult("no primary is configured ("+why+")", nil), nil
	}
	res, err := e.callPrimary(ctx, p, true)
	if err != nil {
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, rpcErr
		}
		return errorResult(fmt.Sprintf("the primary is unreachable (%s): %v", why, err), map[string]any{"primary": e.primary.State()}), nil
	}
	return res, nil
}

// callPrimary bounds long-polls by their own timeout plus the call timeout.
func (e *Edge) callPrimary(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	if strings.HasSuffix(p.Name, "event_wait") {
		var a struct {
			TimeoutMS *float64 `json:"timeout_ms"`
		}
		json.Unmarshal(p.Arguments.(json.RawMessage), &a)
		ms := 60000.0
		if a.TimeoutMS != nil {
			ms = min(*a.TimeoutMS, 300000)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond+e.cfg.CallTimeout)
		defer cancel()
		return e.primary.CallLong(ctx, p, retry)
	}
	return e.primary.Call(ctx, p, retry)
}

// primaryFirst asks the primary; on any failure (down, an error, a tool
// it lacks) it answers from the local palace, marked degraded.
func (e *Edge) primaryFirst(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, err := e.callPrimary(ctx, p, true)
	if err == nil && !res.IsError {
		return annotate(res, map[string]any{"source": "primary"}, false), nil
	}
	why := e.primary.State()
	if err == nil {
		why = "the primary answered an error: " + resultText(res)
	} else if rpcErr := peerError(err); rpcErr != nil {
		why = "the primary answered an error: " + rpcErr.Message
	}
	local, lerr := e.local(ctx, p)
	if lerr != nil || local == nil || local.IsError {
		if err == nil {
			return res, nil // both failed: the primary's own answer
		}
		return local, lerr
	}
	return annotate(local, map[string]any{"source": "local", "primary": why}, true), nil
}

func resultText(res *mcp.CallToolResult) string {
	if res != nil && len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return "(no text)"
}

func (e *Edge) byID(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, err := e.local(ctx, p)
	if err != nil || res == nil {
		return res, err
	}
	return e.byIDMissing(ctx, p, res), nil
}

// byIDMissing: a drawer the local palace does not have is asked of the
// primary (while it is up); any other local answer stands.
func (e *Edge) byIDMissing(ctx context.Context, p *mcp.CallToolParams, res *mcp.CallToolResult) *mcp.CallToolResult {
	m := resultJSON(res)
	if m == nil || !strings.HasPrefix(fmt.Sprint(m["error"]), "Drawer not found") || !e.primary.Up() {
		return res
	}
	pres, perr := e.callPrimary(ctx, p, true)
	if perr != nil {
		return annotate(res, map[string]any{"source": "local", "primary": e.primary.State()}, true)
	}
	return annotate(pres, map[string]any{"source": "primary"}, false)
}

// write: local first, the agent gets the local result; a successful write
// to a replicated wing is enqueued for the primary.
func (e *Edge) write(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	args := argsMap(p.Arguments)
	tool := strings.TrimPrefix(p.Name, "mempalace_")
	var oldWing string
	if tool == "update_drawer" {
		oldWing = e.localWing(ctx, fmt.Sprint(args["drawer_id"]))
	}
	res, err := e.local(ctx, p)
	if err != nil || res == nil || res.IsError {
		return res, err
	}
	m := resultJSON(res)
	if m != nil && (m["success"] == false || m["error"] != nil) {
		return res, nil // the local palace refused it: nothing to replicate
	}
	payload, wing, replicate := e.replicable(tool, args, oldWing)
	if e.polErr != nil {
		return annotate(res, map[string]any{"replication": fmt.Sprintf("not replicated: policy unreadable: %v", e.polErr)}, false), nil
	}
	if !replicate {
		return annotate(res, map[string]any{"replication": "local only (policy)"}, false), nil
	}
	if e.outbox == nil {
		return annotate(res, map[string]any{"replication": fmt.Sprintf("not replicated: outbox unavailable: %v", e.obErr)}, false), nil
	}
	b, _ := json.Marshal(payload)
	op, err := e.outbox.Enqueue(ctx, p.Name, b, wing)
	if err != nil {
		e.log.Error("outbox write failed; the local write stands but is not replicated", "tool", p.Name, "err", err)
		return annotate(res, map[string]any{"replication": fmt.Sprintf("not replicated: %v", err)}, false), nil
	}
	return annotate(res, map[string]any{"replication": "queued", "op_id": op.ID[:16]}, false), nil
}

// localWing finds the wing of a drawer in the local palace.
func (e *Edge) localWing(ctx context.Context, id string) string {
	b, _ := json.Marshal(map[string]any{"drawer_id": id})
	res, err := e.child.Call(ctx, &mcp.CallToolParams{Name: "mempalace_get_drawer", Arguments: json.RawMessage(b)})
	if err != nil {
		return ""
	}
	m := resultJSON(res)
	if m == nil {
		return ""
	}
	w, _ := m["wing"].(string)
	return w
}

// replicable decides what (if anything) goes to the outbox for a write:
// the payload (with provenance stamped), its wing, and whether the policy
// replicates it.
func (e *Edge) replicable(tool string, args map[string]any, oldWing string) (map[string]any, string, bool) {
	out := map[string]any{}
	for k, v := range args {
		out[k] = v
	}
	wing, _ := args["wing"].(string)
	switch tool {
	case "kg_add", "kg_invalidate", "kg_supersede":
		return out, "", e.policy.KGReplicated()
	case "diary_write":
		if wing == "" {
			wing = "wing_" + strings.ToLower(fmt.Sprint(args["agent_name"]))
		}
	case "update_drawer":
		if oldWing != "" {
			wing = oldWing
		}
	case "create_tunnel":
		wing, _ = args["source_wing"].(string)
	case "checkpoint":
		items, _ := args["items"].([]any)
		var keep []any
		for _, it := range items {
			im, _ := it.(map[string]any)
			if w, _ := im["wing"].(string); e.policy.Replicated(w) {
				keep = append(keep, it)
			}
		}
		diaryOK := false
		if d, ok := args["diary"].(map[string]any); ok {
			dw, _ := d["wing"].(string)
			if dw == "" {
				dw = "wing_" + strings.ToLower(fmt.Sprint(d["agent_name"]))
			}
			diaryOK = e.policy.Replicated(dw)
			if !diaryOK {
				delete(out, "diary")
			}
		}
		if len(keep) == 0 && !diaryOK {
			return nil, "", false
		}
		if keep == nil {
			keep = []any{}
		}
		out["items"] = keep
		e.stamp(out)
		return out, wing, true
	}
	if wing != "" && !e.policy.Replicated(wing) {
		return nil, wing, false
	}
	if tool == "add_drawer" {
		e.stamp(out)
	}
	return out, wing, true
}

// stamp sets added_by = "<agent>/<label>/<device>" on a write bound for
// the primary, only when MEMPALACE_ORIGIN_DEVICE is set (RFC 001 §7.3.4,
// §7.3.5): never a hostname, container id or placeholder; the local palace
// is never stamped.
func (e *Edge) stamp(args map[string]any) {
	if e.cfg.OriginDevice == "" {
		return
	}
	label := e.cfg.OriginLabel
	if label == "" {
		label = "-"
	}
	agent := e.cfg.Agent
	if agent == "" {
		agent = "mcp"
	}
	args["added_by"] = agent + "/" + label + "/" + e.cfg.OriginDevice
}

// coordinationWrite: durable through the outbox and sent at once; the agent
// gets the primary's own answer (its event id), or "queued" when the
// primary cannot be reached in time.
func (e *Edge) coordinationWrite(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if e.outbox == nil {
		return e.primaryOnly(ctx, p, "the outbox is unavailable, sent directly")
	}
	op, err := e.outbox.Enqueue(ctx, p.Name, p.Arguments.(json.RawMessage), "")
	if err != nil {
		e.log.Error("outbox write failed; sending directly", "tool", p.Name, "err", err)
		return e.primaryOnly(ctx, p, "the outbox failed, sent directly")
	}
	wctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	done, _ := e.outbox.Wait(wctx, op.ID)
	switch done.State {
	case outbox.Done:
		var m map[string]any
		json.Unmarshal(done.Result, &m)
		return jsonResult(m, false), nil
	case outbox.Dead:
		return errorResult(fmt.Sprintf("the primary refused this write: %s", done.Error), map[string]any{"op_id": op.ID[:16]}), nil
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "op_id": op.ID[:16],
		"message": "the primary is unreachable; the write is queued durably and will be sent once, in order, when it is back",
		"edge":    map[string]any{"primary": e.primary.State(), "degraded": true},
	}, false), nil
}

func argsMap(a any) map[string]any {
	var m map[string]any
	switch x := a.(type) {
	case json.RawMessage:
		json.Unmarshal(x, &m)
	case map[string]any:
		m = x
	}
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// primaryAdapter lets the outbox send through the supervisor.
type primaryAdapter struct{ p *Primary }

func (a primaryAdapter) Up() bool { return a.p.Up() }

func (a primaryAdapter) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	b, _ := json.Marshal(args)
	res, err := a.p.Call(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(b)}, false)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return nil, outbox.ErrUnauthorized
		}
		if rpcErr := peerError(err); rpcErr != nil {
			return nil, &outbox.RPCError{Code: int(rpcErr.Code), Message: rpcErr.Message}
		}
		return nil, err
	}
	m := resultJSON(res)
	if m == nil {
		m = map[string]any{}
		if res.IsError {
			m["success"] = false
			m["error"] = "the primary answered isError"
		}
	}
	return m, nil
}

// FlushTarget adapts a Primary for an outbox Flusher outside a running
// edge (devbox-config edge flush).
func FlushTarget(p *Primary) outbox.Primary { return primaryAdapter{p} }
