package fakepalace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// Options configure a palace.
type Options struct {
	// Dir persists the palace (fakepalace.json) so a stopped and restarted
	// server keeps it. Empty: memory only.
	Dir string
	// Embedder names the embedding model; different names give different
	// vectors (default "minilm").
	Embedder string
	// OmitDrawerID drops drawer_id from search hits, as 3.6.0 did.
	OmitDrawerID bool
	// ReadOnly hides mutating tools and refuses them with -32003.
	ReadOnly bool
	// Version is the release the double plays (default "3.11.0", the one
	// the contract runs against real MemPalace): serverInfo.version, and
	// the parameters and behaviour a later release added (kg_timeline
	// paging and event_list's order from 3.10.0; writer, and from_agent
	// no longer filtering event reads, from 3.11.0; timestamps with a UTC
	// offset and hallways.sqlite3 from 3.12.0, read from its release notes:
	// release.go).
	Version string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Instructions, when set, is the initialize result's "instructions":
	// what an MCP server asks a client to put into its model's context.
	// Real MemPalace sends none; tests use it to see which clients do.
	Instructions string
}

// Palace is one MemPalace instance: its state and its tool dispatcher.
// Every tool call runs under one lock, as upstream serializes requests.
type Palace struct {
	mu      sync.Mutex
	st      *State
	opts    Options
	tools   []tool
	byName  map[string]tool
	now     func() time.Time
	wake    chan struct{}
	calls   map[string]int
	latency map[string]time.Duration
	hold    map[string]<-chan struct{}
	// vectors memoizes chunk embeddings, as a real palace stores them:
	// only the query is embedded per search.
	vectors map[string][]float64
	// Hooks for the stdio program's fault switches: a non-nil answer is
	// the call's, the tool not run.
	beforeCall func(name string) any
	// trace, when set, gets one line per message received.
	trace io.Writer
	// maxAnswer, when set, ends the stdio program instead of writing an
	// answer longer (SetMaxAnswer).
	maxAnswer int
}

// New opens (or creates) a palace.
func New(opts Options) (*Palace, error) {
	if opts.Embedder == "" {
		opts.Embedder = "minilm"
	}
	if opts.Version == "" {
		opts.Version = "3.11.0"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	st, err := ReadDump(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := openHallways(opts.Dir, opts.Version); err != nil {
		return nil, err
	}
	pl := &Palace{st: st, opts: opts, tools: tools(opts.Version), byName: map[string]tool{}, now: opts.Now, wake: make(chan struct{}), calls: map[string]int{}, latency: map[string]time.Duration{}, hold: map[string]<-chan struct{}{}, vectors: map[string][]float64{}}
	for _, t := range pl.tools {
		pl.byName[t.name] = t
	}
	return pl, nil
}

// SupportedProtocolVersions is SUPPORTED_PROTOCOL_VERSIONS (3.6.0–dev).
var SupportedProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// ErrParse is returned by Handle for input that is not JSON.
var ErrParse = errors.New("parse error")

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  any             `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// Handle processes one JSON-RPC message and returns the response bytes, or
// nil when there is nothing to answer (a notification). Input that is not
// JSON returns ErrParse; the transport decides (stdio: no reply, HTTP: 400).
func (pl *Palace) Handle(msg []byte) ([]byte, error) {
	if !json.Valid(msg) {
		return nil, ErrParse
	}
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return encode(nil, nil, &rpcError{Code: -32600, Message: "Invalid Request"}), nil
	}
	var req request
	if err := json.Unmarshal(trimmed, &req); err != nil {
		return encode(nil, nil, &rpcError{Code: -32600, Message: "Invalid Request"}), nil
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(trimmed, &raw)
	_, hasID := raw["id"]
	method, ok := req.Method.(string)
	if !ok {
		if !hasID {
			return nil, nil
		}
		return encode(req.ID, nil, &rpcError{Code: -32601, Message: fmt.Sprintf("Unknown method: expected a string, got %T", req.Method)}), nil
	}
	if strings.HasPrefix(method, "notifications/") {
		return nil, nil
	}
	result, rerr := pl.dispatch(method, req.Params)
	if !hasID {
		return nil, nil
	}
	return encode(req.ID, result, rerr), nil
}

func encode(id json.RawMessage, result any, rerr *rpcError) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	m := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		m["error"] = rerr
	} else {
		m["result"] = result
	}
	return marshal(m, "")
}

// marshal is v's JSON as Python's json.dumps(ensure_ascii=False) writes
// it: no HTML escaping, indented by indent ("" for one line).
func marshal(v any, indent string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func (pl *Palace) dispatch(method string, params json.RawMessage) (any, *rpcError) {
	switch method {
	case "initialize":
		var p struct {
			ProtocolVersion *string `json:"protocolVersion"`
		}
		json.Unmarshal(params, &p)
		v := "2024-11-05" // absent
		if p.ProtocolVersion != nil {
			v = "2025-11-25" // unsupported
			if slices.Contains(SupportedProtocolVersions, *p.ProtocolVersion) {
				v = *p.ProtocolVersion
			}
		}
		res := map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "mempalace", "version": pl.opts.Version}}
		if pl.opts.Instructions != "" {
			res["instructions"] = pl.opts.Instructions
		}
		return res, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		list := []any{}
		for _, t := range pl.tools {
			if pl.readOnly() && refusedReadOnly(t) {
				continue
			}
			list = append(list, map[string]any{"name": t.name, "description": t.desc, "inputSchema": t.schema()})
		}
		return map[string]any{"tools": list}, nil
	case "tools/call":
		return pl.call(params)
	}
	return nil, &rpcError{Code: -32601, Message: "Unknown method: " + method}
}

func refusedReadOnly(t tool) bool { return t.mutating || t.name == "mempalace_hook_settings" }

func (pl *Palace) readOnly() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.opts.ReadOnly
}

// call runs tools/call in upstream's order: name check, unknown tool,
// unknown arguments, coercion, gates, then the handler (whose missing
// required arguments are -32602 too).
func (pl *Palace) call(params json.RawMessage) (any, *rpcError) {
	t, a, rerr := pl.toolArgs(params)
	if rerr != nil {
		return nil, rerr
	}
	pl.await(t.name)
	return pl.run(t, a)
}

// toolArgs reads a tools/call's params: the tool and its arguments coerced
// to their types, or the error MemPalace answers.
func (pl *Palace) toolArgs(params json.RawMessage) (tool, args, *rpcError) {
	var p struct {
		Name      *string        `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil && len(bytes.TrimSpace(params)) > 0 {
		return tool{}, nil, &rpcError{Code: -32602, Message: "Invalid params: 'name' must be a string and 'arguments' an object"}
	}
	if p.Name == nil || *p.Name == "" {
		return tool{}, nil, &rpcError{Code: -32602, Message: "Invalid params: 'name' is required for tools/call"}
	}
	name := *p.Name
	t, ok := pl.byName[name]
	if !ok {
		return tool{}, nil, &rpcError{Code: -32601, Message: "Unknown tool: " + name}
	}
	a, rerr := coerceArgs(t, p.Arguments)
	if rerr != nil {
		return tool{}, nil, rerr
	}
	if pl.readOnly() && refusedReadOnly(t) {
		return tool{}, nil, &rpcError{Code: -32003, Message: "Server is in read-only mode; this tool is disabled", Data: map[string]any{"tool": name}}
	}
	if missing := missingArgs(t, a); len(missing) > 0 {
		return tool{}, nil, paramsError("Missing required", missing, name)
	}
	return t, a, nil
}

// coerceArgs is the arguments given, coerced to t's parameter types; one t does
// not take is an error, but wait_for_previous, which every tool takes and
// drops, of any value, as upstream does.
func coerceArgs(t tool, given map[string]any) (args, *rpcError) {
	var unknown []string
	a := args{}
	for k, v := range given {
		if k == catalogue.WaitForPrevious {
			continue
		}
		pr, ok := t.prop(k)
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		cv, err := coerce(pr.typ, v)
		if err != nil {
			return nil, &rpcError{Code: -32602, Message: fmt.Sprintf("Invalid value for parameter '%s'", k)}
		}
		a[k] = cv
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, paramsError("Unknown", unknown, t.name)
	}
	return a, nil
}

// missingArgs is the required arguments of t that a lacks.
func missingArgs(t tool, a args) []string {
	var missing []string
	for _, r := range t.required {
		if _, ok := a[r]; !ok {
			missing = append(missing, r)
		}
	}
	if t.name == "mempalace_diary_write" && !a.has("entry") && !a.has("content") {
		missing = append(missing, "entry")
	}
	return missing
}

// await holds a call of the tool name for its latency, then until its
// hold is released.
func (pl *Palace) await(name string) {
	pl.mu.Lock()
	d, ok := pl.latency[name] // a tool's own latency, even 0, beats "*"
	if !ok {
		d = pl.latency["*"]
	}
	pl.mu.Unlock()
	time.Sleep(d)
	pl.mu.Lock()
	hold := pl.hold[name] // read after the latency, as a test may set it meanwhile
	pl.mu.Unlock()
	if hold != nil {
		<-hold
	}
}

// run calls t's handler (or the failure beforeCall gives) and saves the
// state after a mutating tool.
func (pl *Palace) run(t tool, a args) (any, *rpcError) {
	name := t.name
	var failed any
	if pl.beforeCall != nil {
		failed = pl.beforeCall(name)
	}
	pl.mu.Lock()
	pl.calls[name]++
	result := failed
	if result == nil {
		result = t.handler(pl, a)
	}
	var saveErr error
	if t.mutating {
		saveErr = save(pl.opts.Dir, pl.st)
		if saveErr == nil {
			saveErr = recordEmbedder(pl.opts.Dir, pl.opts.Embedder)
		}
	}
	pl.mu.Unlock()
	if e, ok := result.(*rpcError); ok {
		return nil, e // a handler that raised: nothing was changed
	}
	if saveErr != nil {
		return nil, &rpcError{Code: -32000, Message: "Internal tool error", Data: map[string]any{"error_class": "OSError", "message": saveErr.Error()}}
	}
	return textContent(result), nil
}

// integrityExempt are the tools MemPalace 3.11 still answers on a palace
// whose SQLite failed its integrity check (_SQLITE_INTEGRITY_ALLOWED_TOOLS:
// the coordination log lives in its own file).
var integrityExempt = map[string]bool{
	"mempalace_status": true, "mempalace_reconnect": true, "mempalace_event_append": true, "mempalace_task_create": true,
	"mempalace_event_list": true, "mempalace_event_wait": true, "mempalace_event_ack": true, "mempalace_artifact_put": true,
	"mempalace_artifact_get": true, "mempalace_patch_submit": true, "mempalace_mesh_peers": true,
}

// paramsError is -32602 naming the arguments (what: "Unknown",
// "Missing required") in upstream's words.
func paramsError(what string, names []string, tool string) *rpcError {
	s := "s"
	if len(names) == 1 {
		s = ""
	}
	return &rpcError{Code: -32602, Message: fmt.Sprintf("%s parameter%s '%s' for tool %s", what, s, strings.Join(names, "', '"), tool)}
}

// textContent is a tool result as MemPalace sends every one: a single
// text block of json.dumps(result, indent=2, ensure_ascii=False).
func textContent(result any) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": string(marshal(result, "  "))}}}
}

// coerce converts an argument to its schema type the way upstream's
// dispatcher does for integer and number (from strings and floats).
func coerce(typ string, v any) (any, error) {
	switch typ {
	case "integer":
		switch x := v.(type) {
		case json.Number:
			if i, err := x.Int64(); err == nil {
				return i, nil
			}
			f, err := x.Float64()
			return int64(f), err
		case string:
			return strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		case nil:
			return nil, nil
		}
		return nil, fmt.Errorf("not an integer")
	case "number":
		switch x := v.(type) {
		case json.Number:
			return x.Float64()
		case string:
			return strconv.ParseFloat(strings.TrimSpace(x), 64)
		case nil:
			return nil, nil
		}
		return nil, fmt.Errorf("not a number")
	}
	return normalize(v), nil
}

// normalize turns json.Number inside objects and arrays into float64,
// but for an integer literal, kept as written: Python's int is exact at
// any size, so MemPalace answers 2^64-1 in metadata as it was sent.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			return x
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

// ---- controls for tests and the program ----

// SetReadOnly switches read-only mode at run time.
func (pl *Palace) SetReadOnly(on bool) {
	pl.mu.Lock()
	pl.opts.ReadOnly = on
	pl.mu.Unlock()
}

// SetLatency adds d before every call of tool ("*" for every tool).
func (pl *Palace) SetLatency(tool string, d time.Duration) {
	pl.mu.Lock()
	pl.latency[tool] = d
	pl.mu.Unlock()
}

// SetHold makes every call of tool wait until release is closed (nil
// removes the hold): a test decides when the palace answers.
func (pl *Palace) SetHold(tool string, release <-chan struct{}) {
	pl.mu.Lock()
	pl.hold[tool] = release
	pl.mu.Unlock()
}

// Calls returns how many times a tool was called (handler reached).
func (pl *Palace) Calls(tool string) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.calls[tool]
}

// Dump returns a deep copy of the palace's state.
func (pl *Palace) Dump() *State {
	pl.mu.Lock()
	b, _ := json.Marshal(pl.st)
	pl.mu.Unlock()
	s := newState()
	json.Unmarshal(b, s)
	return s
}

// wakeWaiters releases every event_wait (called under pl.mu).
func (pl *Palace) wakeWaiters() {
	close(pl.wake)
	pl.wake = make(chan struct{})
}

// SetTrace makes the palace write one line per message it receives (over
// stdio or HTTP) to w: `fakepalace: received {"method":…,"name":…,"id":…,"requestId":…,
// "meta":[…]}` (name: the tool, requestId: for a cancellation, meta: the
// keys of params._meta). Tests use
// it to see what reached the server; it changes no behaviour (like
// MemPalace, the double does nothing with a cancellation: it answers
// one request at a time).
// Set it before serving.
func SetTrace(pl *Palace, w io.Writer) { pl.trace = w }

func (pl *Palace) traceMessage(line []byte) {
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name      string                     `json:"name"`
			RequestID json.RawMessage            `json:"requestId"`
			Meta      map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	keys := append([]string{}, slices.Sorted(maps.Keys(m.Params.Meta))...) // [] when none, not null
	b, _ := json.Marshal(map[string]any{"method": m.Method, "name": m.Params.Name, "id": m.ID, "requestId": m.Params.RequestID, "meta": keys})
	fmt.Fprintf(pl.trace, "fakepalace: received %s\n", b)
}

// SetMaxAnswer makes ServeStdio end, its output closed, instead of
// writing an answer over n bytes: what the edge does to a local palace
// server whose line passes its cap (64 MiB), reached in a test without
// writing 64 MiB. Set it before serving.
func SetMaxAnswer(pl *Palace, n int) { pl.maxAnswer = n }

// SetStdioFaults installs the stdio program's fault switches: crashOn
// exits the process when that tool is called (the call in flight never gets
// an answer); garbageOn writes a line that is not JSON to out first;
// failOn answers that tool as MemPalace does when its store raises (a
// locked or unreadable palace: {"success": false, "error": ...}), nothing
// changed.
func SetStdioFaults(pl *Palace, crashOn, garbageOn, failOn string, damaged bool, out io.Writer) {
	pl.beforeCall = func(name string) any {
		if damaged && !integrityExempt[name] {
			return &rpcError{Code: -32002, Message: "Palace SQLite integrity check failed; refusing tool call until the palace is repaired"}
		}
		if name == garbageOn {
			fmt.Fprintln(out, "this is not JSON-RPC {{{")
		}
		if name == crashOn {
			os.Exit(3)
		}
		if name == failOn {
			return fail("database is locked")
		}
		return nil
	}
}
