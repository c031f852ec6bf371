package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/wire"
)

// fastLane answers the agent's tool calls beside the SDK's server session,
// once the session is initialized: the guard hands it each tools/call for
// a tool the edge lists, and it writes the answer itself. Calls that only
// the child answers (local-only tools, get_drawer found locally, all of
// pass-through) are relayed as bytes both ways; the rest are routed as
// the SDK path routes them (e.route) and encoded once. Everything else
// (initialize, tools/list, logging, unknown tools, calls before
// initialization) stays with the SDK.
//
// notifications/cancelled for a call in the lane cancels it: the child or
// the primary is told, and the agent gets no answer, as MCP specifies.
type fastLane struct {
	e   *Edge
	out io.Writer
	ctx context.Context

	mu       sync.Mutex
	inflight map[string]func() // agent id -> cancel; absent once answered or cancelled
	wg       sync.WaitGroup

	// lastWrite is closed once the last write the agent sent is answered
	// (nil: none yet); only intercept, on the guard's goroutine, reads and
	// sets it. A harness running parallel tool calls pipelines them, and
	// mempalace-mcp answers one call at a time in the order sent: each
	// write here waits for the one before it, and each read for the
	// writes before it (turn), so kg_add then kg_invalidate of one fact
	// ends closed in the local palace and, in the outbox's order, on the
	// primary. A write the local palace alone takes, never replicated
	// (mine, sync, hook_settings: catalogue LocalOnly, Maintenance),
	// waits its turn but holds no call after it: a read after a mine
	// must not wait minutes for it (MCP orders no calls in flight; the
	// order here is for the agent's replicated writes), and the child
	// answers the calls it gets in the order sent anyway.
	lastWrite chan struct{}
	// initSeen: the agent's notifications/initialized has gone by, to the
	// SDK, which handles it before any later line; the calls after it are
	// the lane's, in their turn, once the SDK has (serve).
	initSeen bool
}

func newFastLane(ctx context.Context, e *Edge, out io.Writer) *fastLane {
	return &fastLane{e: e, out: out, ctx: ctx, inflight: map[string]func(){}}
}

// intercept reports whether the lane took the message (a line the guard
// has checked is a JSON object); it never blocks. Fields are picked with
// gjson, without decoding the rest: a stateless client's _meta alone is
// larger than the call.
func (l *fastLane) intercept(line []byte) bool {
	if !bytes.Contains(line, []byte(`"tools/call"`)) && !bytes.Contains(line, []byte(`"notifications/cancelled"`)) && !bytes.Contains(line, []byte(`"notifications/initialized"`)) {
		return false
	}
	f := gjson.GetManyBytes(line, "method", "id", "params")
	switch f[0].String() {
	case "notifications/initialized":
		l.initSeen = true
		return false // the SDK's
	case "tools/call":
		return l.toolCall(f[1], f[2])
	case "notifications/cancelled":
		return l.cancelled(f[2])
	}
	return false
}

// toolCall takes a tools/call the lane can answer (a listed tool, a
// known protocol, the handshake done, an id not in flight): relayed to the
// child at once when nothing is ahead of it, else served in its turn.
func (l *fastLane) toolCall(id, params gjson.Result) bool {
	if id.Type != gjson.Number && id.Type != gjson.String || !params.IsObject() {
		return false
	}
	pf := gjson.GetMany(params.Raw, "name", `_meta.io\.modelcontextprotocol/protocolVersion`, `_meta.io\.modelcontextprotocol/clientCapabilities`)
	name := pf[0].String()
	if pf[0].Type != gjson.String || !l.e.listed(name) && l.e.toolsKnown() {
		return false // the SDK gives its own error
	}
	stateless, ok := protocolOf(pf[1].String(), pf[2].Exists())
	if !ok || !stateless && !l.e.initialized.Load() && !l.initSeen {
		return false // the SDK checks the protocol and the handshake
	}
	key := id.Raw
	l.mu.Lock()
	_, dup := l.inflight[key]
	l.mu.Unlock()
	if dup {
		return false
	}
	body := []byte(params.Raw)
	if stateless {
		body = wire.StripProtocolMeta(body)
	}
	c := laneCall(name, body)
	before := l.lastWrite
	if answered(before) && l.relay(key, json.RawMessage(id.Raw), c, stateless) {
		return true // at the child now, behind every write before it
	}
	var mine chan struct{}
	if c.writes() && c.tool.Route != catalogue.LocalOnly && c.tool.Route != catalogue.Maintenance {
		mine = make(chan struct{})
		l.lastWrite = mine
	}
	ctx, cancel := context.WithCancel(l.ctx)
	l.mu.Lock()
	l.inflight[key] = cancel
	l.mu.Unlock()
	l.wg.Add(1)
	go l.serve(ctx, json.RawMessage(id.Raw), c, stateless, before, mine)
	// Let the call start now, on this P, before this goroutine goes
	// back to a blocking read of stdin; otherwise it waits for another
	// thread to wake up and steal it (measured: merged search +1.06 to
	// +1.41 ms over the slower side without this, +0.92 to +0.98 with).
	runtime.Gosched()
	return true
}

// cancelled cancels the lane's call an agent's notifications/cancelled
// names; false for a call the lane does not hold.
func (l *fastLane) cancelled(params gjson.Result) bool {
	rid := gjson.Get(params.Raw, "requestId").Raw
	cancel := l.take(rid)
	if cancel == nil {
		return false // one of the SDK's calls, or already answered
	}
	l.e.log.Debug("agent cancelled a call", "id", rid)
	cancel()
	return true
}

// take removes a call from the in-flight set: its cancel, nil when it is
// not there (answered or cancelled already).
func (l *fastLane) take(key string) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	cancel := l.inflight[key]
	delete(l.inflight, key)
	return cancel
}

// protocolOf tells a call of the stateless protocol (2026-07-28, SEP-2575:
// no initialize, the client's version and capabilities in each call's
// _meta) from a legacy one; ok is false for a call the SDK must refuse (a
// version it does not support, capabilities missing).
func protocolOf(version string, hasCapabilities bool) (stateless, ok bool) {
	if version < "2026-07-28" {
		return false, true
	}
	return true, slices.Contains(mcp.SupportedProtocolVersions(), version) && hasCapabilities
}

// serve answers a call in its turn (turn: after the write before it,
// before; mine, if it holds the calls after it, is closed once it is
// answered).
func (l *fastLane) serve(ctx context.Context, id json.RawMessage, c *call, stateless bool, before, mine chan struct{}) {
	defer l.wg.Done()
	if mine != nil {
		defer close(mine)
	}
	key := string(id)
	defer func() {
		if cancel := l.take(key); cancel != nil {
			cancel()
		}
	}()
	l.e.waitTools(ctx) // as the SDK path does
	if !stateless && !l.e.waitInitialized(ctx) {
		if ctx.Err() != nil {
			if l.ctx.Err() != nil {
				l.notMade(key, id, stateless) // the edge stopped
			}
			return // cancelled by the agent before it was made: no answer
		}
		l.take(key)
		l.respond(id, nil, errors.New(`method "tools/call" is invalid during session initialization`), stateless) // the SDK's words
		return
	}
	switch l.e.turn(ctx, before, c.writes()) {
	case cancelledInLine:
		return // cancelled by the agent before it was sent: no answer
	case haltedInLine:
		l.notMade(key, id, stateless) // never sent, so never out of order
		return
	}
	if !l.e.listed(c.name) {
		// Taken before the tools were known, to keep its place: the
		// SDK's own answer to a tool it does not list.
		l.take(key)
		l.respond(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", c.name)}, stateless)
		return
	}
	result, err := l.e.callTool(ctx, c)
	if ctx.Err() != nil {
		if l.ctx.Err() == nil || l.take(key) == nil {
			return // cancelled by the agent: no answer
		}
		if !notApplied(err) {
			result, err = nil, l.e.errStopping(c.writes()) // the edge is stopping: the agent is told
		}
	}
	if err == nil {
		result = l.e.withNote(ctx, result)
	}
	l.respond(id, result, err, stateless)
}

// writes reports a call the lane orders as a write (toolWrites).
func (c *call) writes() bool { return writes(c.tool, c.name) }

// notMade answers a call the edge stopped before making it: NOT applied
// (unless the agent cancelled it meanwhile: no answer).
func (l *fastLane) notMade(key string, id json.RawMessage, stateless bool) {
	if l.take(key) != nil {
		l.respond(id, nil, l.e.errNotApplied(), stateless)
	}
}

// waitInitialized waits, at most ToolsWait, for the SDK to have handled
// the agent's notifications/initialized, which the guard saw go by.
func (e *Edge) waitInitialized(ctx context.Context) bool {
	if e.initialized.Load() {
		return true
	}
	t := time.NewTimer(e.cfg.ToolsWait)
	defer t.Stop()
	select {
	case <-e.initDone:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// inLine is how a call's wait for its turn ended.
type inLine int

const (
	itsTurn         inLine = iota // the writes before it are answered: make it
	cancelledInLine               // the agent cancelled it
	haltedInLine                  // a write, still waiting when the edge began to stop
)

// turn waits for the write before a call (before) to be answered. A
// write waits whatever its context says, so that the writes after it keep
// their place behind the one before, until the edge begins to stop
// (halt): a write still waiting then is never made, so that none runs out
// of its order. A read stops waiting when its context ends or the edge
// stops, and goes on as a call in flight at a stop does.
func (e *Edge) turn(ctx context.Context, before chan struct{}, write bool) inLine {
	var halted <-chan struct{}
	if e.halt != nil {
		halted = e.halt.Done()
	}
	var cancelled <-chan struct{}
	if !write {
		cancelled = ctx.Done()
	}
	if !answered(before) {
		select {
		case <-before:
		case <-halted:
		case <-cancelled:
		}
	}
	if write && halted != nil && answered(halted) {
		return haltedInLine // (the write before it may have ended at the same stop)
	}
	if ctx.Err() != nil && !e.stopping.Load() {
		return cancelledInLine
	}
	return itsTurn
}

// answered reports that ch is closed: the write it marks answered (nil:
// none), the edge halted, the tools known.
func answered(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// respond writes the answer to the agent's call id (a stateless call's
// result marked as the SDK marks it).
func (l *fastLane) respond(id, result json.RawMessage, err error, stateless bool) {
	if err == nil && stateless {
		result = l.e.statelessResult(result)
	}
	msg := make([]byte, 0, len(result)+len(id)+40)
	msg = append(msg, `{"jsonrpc":"2.0","id":`...)
	msg = append(msg, id...)
	if err != nil {
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) {
			rpcErr = &jsonrpc.Error{Code: -32603, Message: err.Error()}
		}
		b, _ := json.Marshal(rpcErr) // a code, a message, raw data: it encodes
		msg = append(append(msg, `,"error":`...), b...)
	} else {
		msg = append(append(msg, `,"result":`...), result...)
	}
	l.out.Write(append(msg, "}\n"...)) // an agent that stopped reading: its session ends with its input
}

// relay answers a call only the child answers (pass-through, local-only
// tools), or get_drawer(s) while the child is at no other call, with no
// goroutine of its own: the request is written from the guard's goroutine
// and the answer from the child reader's, so the edge adds two pipe
// writes and no hand-offs. It declines (false) when that is not possible
// now (another kind of call, the tools not known yet, the child
// restarting, a get_drawer while the edge's first take of dropped
// edits' texts runs (awaitFirstTheirs), or at a call a get_drawer would wait behind: byID bounds
// that wait); serve then takes the call.
func (l *fastLane) relay(key string, id json.RawMessage, c *call, stateless bool) bool {
	e := l.e
	byID := !e.cfg.PassThrough() && c.tool.Route == catalogue.ByID && !e.primaryOnlyTool(c.name)
	if !e.childAnswers(c) && !byID || e.notePending(l.ctx) || e.readsReconnect(c) || byID && !answered(e.theirsFirst) {
		return false // (a note goes on serve's answer; reconnect's is read there, and a read waits there for the first take of dropped edits' texts: route)
	}
	if byID {
		if _, err := c.decoded(); err != nil || c.refusal() != nil || e.asksMarked(c) {
			return false // serve (route) answers it
		}
	}
	select {
	case <-e.toolsReady:
	default:
		return false
	}
	conn := e.child.live()
	if conn == nil {
		return false
	}
	cid := conn.newID()
	l.mu.Lock()
	l.inflight[key] = func() { conn.abandon(cid, "cancelled by the agent") }
	l.mu.Unlock()
	sent, err := conn.send(cid, "tools/call", c.body, func(line []byte, err error) {
		l.relayed(key, id, c, stateless, line, err)
	}, byID)
	if err != nil || !sent {
		l.take(key)
		return false
	}
	return true
}

// relayed finishes a relayed call with the child's answer (on the child
// reader's goroutine).
func (l *fastLane) relayed(key string, id json.RawMessage, c *call, stateless bool, line []byte, err error) {
	if l.take(key) == nil {
		return // cancelled: no answer
	}
	var result json.RawMessage
	var rpcErr *jsonrpc.Error
	if err == nil {
		result, rpcErr, err = childAnswer(line)
	}
	switch {
	case rpcErr != nil:
		l.respond(id, nil, rpcErr, stateless)
	case err != nil && l.ctx.Err() != nil:
		l.respond(id, nil, l.e.errStopping(c.writes()), stateless) // the edge stopped the child
	case errors.Is(err, errAnswerTooLarge) && c.tool.Route == catalogue.ByID && !l.e.cfg.PassThrough():
		// Read again in parts (get_drawers), off the reader's goroutine.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			res, err := l.e.byIDFrom(l.ctx, c, nil, err)
			var out json.RawMessage
			if err == nil {
				out, err = wire.EncodeResult(res)
			}
			l.respond(id, out, err, stateless)
		}()
	case err != nil:
		// The child died with the call in flight: the answer serve gives.
		result, err = wire.EncodeResult(localDown(err))
		l.respond(id, result, err, stateless)
	case l.e.missingLocally(c, result):
		// Ask the primary, off the reader's goroutine.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			out, err := l.e.fromPrimaryByID(l.ctx, c, result)
			l.respond(id, out, err, stateless)
		}()
	default:
		l.respond(id, result, nil, stateless)
	}
}

// childAnswers reports a call only the child answers: all of pass-through,
// and local-only tools but deletes (deleteCall).
func (e *Edge) childAnswers(c *call) bool {
	route := c.tool.Route
	return e.cfg.PassThrough() || route.Local() && route != catalogue.Destructive && !e.primaryOnlyTool(c.name)
}

// missingLocally reports a get_drawer(s) the local palace may lack: it
// answered "not found", or an error (an empty palace's), which
// byIDMissing reads to decide whether to ask the primary.
func (e *Edge) missingLocally(c *call, result json.RawMessage) bool {
	return !e.cfg.PassThrough() && c.tool.Route == catalogue.ByID &&
		(bytes.Contains(result, []byte("Drawer not found")) || bytes.Contains(result, []byte(`\"error\"`))) // byIDMissing reads it
}

// fromPrimaryByID answers a get_drawer missing locally (byIDMissing); the
// local answer stands if either cannot be read.
func (e *Edge) fromPrimaryByID(ctx context.Context, c *call, local json.RawMessage) (json.RawMessage, error) {
	res, err := wire.DecodeResult(local)
	if _, perr := c.decoded(); err != nil || perr != nil {
		return local, nil
	}
	return wire.EncodeResult(e.byIDMissing(ctx, c, res, nil))
}

// callTool answers one tool call in the lane: the result bytes, or the
// JSON-RPC error to send.
func (e *Edge) callTool(ctx context.Context, c *call) (json.RawMessage, error) {
	if e.childAnswers(c) && !e.readsReconnect(c) {
		raw, rpcErr, err := e.localServer.Relay(ctx, c.body)
		switch {
		case rpcErr != nil:
			return nil, rpcErr
		case err != nil:
			return wire.EncodeResult(localDown(err))
		}
		return raw, nil
	}
	if _, err := c.decoded(); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	res, err := e.route(ctx, c)
	if err != nil {
		return nil, err
	}
	return wire.EncodeResult(res)
}

// statelessResult marks a result as the SDK does for the stateless
// protocol: resultType "complete" and the server's identity in _meta,
// unless the result already says otherwise. Spliced with sjson (the result
// is plain JSON), not decoded and encoded again.
func (e *Edge) statelessResult(raw json.RawMessage) json.RawMessage {
	const infoPath = `_meta.io\.modelcontextprotocol/serverInfo`
	f := gjson.GetManyBytes(raw, "resultType", infoPath)
	out := []byte(raw)
	var err error
	if !f[1].Exists() {
		if out, err = sjson.SetRawBytes(out, infoPath, e.implJSON); err != nil {
			return raw
		}
	}
	if !f[0].Exists() {
		if out, err = sjson.SetRawBytes(out, "resultType", []byte(`"complete"`)); err != nil {
			return raw
		}
	}
	return out
}
