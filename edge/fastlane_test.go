package edge

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/testbed"
)

// traced is one message the child received (FAKEPALACE_TRACE=1).
type traced struct {
	Method    string          `json:"method"`
	Name      string          `json:"name"`
	ID        json.RawMessage `json:"id"`
	RequestID json.RawMessage `json:"requestId"`
	Meta      []string        `json:"meta"`
}

func (h *harness) childReceived() []traced { return received(h.childLog.String()) }

// received parses a test double's trace lines.
func received(log string) []traced {
	var out []traced
	for _, l := range strings.Split(log, "\n") {
		if _, j, ok := strings.Cut(l, "fakepalace: received "); ok {
			var t traced
			if json.Unmarshal([]byte(j), &t) == nil {
				out = append(out, t)
			}
		}
	}
	return out
}

func toolCall(id any, name string, args map[string]any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}}
}

func cancelled(id any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": id, "reason": "the user pressed escape"}}
}

// ready waits until the edge lists the palace's tools (raw harness).
func (h *harness) ready() {
	h.t.Helper()
	h.send(map[string]any{"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
	if a := h.await("list", 20*time.Second); a["result"] == nil {
		h.t.Fatalf("tools/list: %v", a)
	}
}

// checkCancelForwarded: the palace (its trace in log) got the tool call
// and then a cancellation naming the id the edge gave it.
func checkCancelForwarded(t *testing.T, log interface{ String() string }, tool string) {
	t.Helper()
	var childID string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range received(log.String()) {
			if m.Method == "tools/call" && m.Name == tool {
				childID = string(m.ID)
			}
			if childID != "" && m.Method == "notifications/cancelled" && string(m.RequestID) == childID {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the palace never got a cancellation for its %s call (id %s); it received:\n%s", tool, childID, log.String())
}

// cancelOnceIn sends a call and cancels it once the palace whose trace
// is log has it (a child runs with FAKEPALACE_TRACE=1; the primary always
// traces), and fails the test if the edge answers it anyway (the palaces
// answer it after 600 ms). A cancel after a fixed wait can come before
// the edge has sent the call on, on a loaded machine: CI 35 (a delete's
// read of what it deletes took longer than the wait, so the local palace
// never got the delete), and TestCancellationReachesThePrimary with two
// cores busy (the primary never got kg_stats, so no cancellation either).
func (h *harness) cancelOnceIn(log *testbed.SyncBuffer, id any, tool string, args map[string]any) {
	h.t.Helper()
	h.send(toolCall(id, tool, args))
	waitFor(h.t, 10*time.Second, tool+" at the palace", func() bool {
		return slices.ContainsFunc(received(log.String()), func(m traced) bool { return m.Name == tool })
	})
	h.send(cancelled(id))
	if a := h.await(fmt.Sprint(id), 900*time.Millisecond); a != nil { // past the palace's answer
		h.t.Fatalf("a cancelled %s call was answered: %v", tool, a)
	}
}

// An agent that cancels a call (notifications/cancelled) gets no answer to
// it, the local palace server is told with the id it knows the call by,
// and the session goes on.
func TestCancellationIsForwardedToTheChild(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{passThrough: true, raw: true, childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_status=600"}})
	h.handshake()
	h.ready()
	h.send(toolCall(41, "mempalace_status", map[string]any{}))
	time.Sleep(100 * time.Millisecond)
	h.send(cancelled(41))
	h.send(toolCall(42, "mempalace_kg_stats", map[string]any{}))
	// The palace answers in order: 42's answer comes after 41's.
	if a := h.await("42", 10*time.Second); a["result"] == nil {
		t.Fatalf("the call after a cancellation: %v", a)
	}
	if a := h.await("41", 200*time.Millisecond); a != nil {
		t.Fatalf("a cancelled call was answered: %v", a)
	}
	checkCancelForwarded(t, h.childLog, "mempalace_status")
}

// The same for a call the edge routes itself (a merged search): the local
// half is cancelled at the child; the agent gets nothing.
func TestCancellationOfAMergedRead(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_search=600"}})
	h.handshake()
	h.ready()
	h.cancelOnceIn(h.childLog, "s1", "mempalace_search", map[string]any{"query": "anything"})
	checkCancelForwarded(t, h.childLog, "mempalace_search")
}

// A read the primary answers (primary first): cancelling it cancels it on
// the primary too.
func TestCancellationReachesThePrimary(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true})
	h.primary.SetLatency("mempalace_kg_stats", 600*time.Millisecond)
	h.handshake()
	h.ready()
	h.cancelOnceIn(h.primaryLog, "k1", "mempalace_kg_stats", map[string]any{})
	checkCancelForwarded(t, h.primaryLog, "mempalace_kg_stats")
}

// Tool calls before the initialize handshake are refused as the SDK
// refuses them: the edge's own path does not skip the handshake.
func TestNoToolCallsBeforeInitialize(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{passThrough: true, raw: true, childEnv: []string{"FAKEPALACE_TRACE=1"}})
	time.Sleep(500 * time.Millisecond) // the child is up and listed
	h.send(toolCall(1, "mempalace_status", map[string]any{}))
	a := h.await("1", 5*time.Second)
	if a == nil || a["error"] == nil || !strings.Contains(fmt.Sprint(a["error"]), "initializ") {
		t.Fatalf("tools/call before initialize: %v", a)
	}
	for _, m := range h.childReceived() {
		if m.Method == "tools/call" {
			t.Fatalf("the child got a call before the agent initialized: %+v", m)
		}
	}
}

// A legacy (initialize) call is answered as before; a stateless one
// (2026-07-28: the protocol in each call's _meta) is answered as the SDK
// answers it (resultType, the server's identity), and its per-call
// protocol fields are not passed on to the child; other _meta (a progress
// token) is. A version the edge does not speak is refused.
func TestStatelessAndLegacyCalls(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{passThrough: true, raw: true, childEnv: []string{"FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	h.send(toolCall(7, "mempalace_kg_stats", map[string]any{}))
	legacy := h.await("7", 10*time.Second)
	res, _ := legacy["result"].(map[string]any)
	if res == nil || res["resultType"] != nil {
		t.Fatalf("legacy answer: %v", legacy)
	}
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "stateless", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"progressToken": "p-8",
	}
	msg := toolCall(8, "mempalace_kg_stats", map[string]any{})
	msg["params"].(map[string]any)["_meta"] = meta
	h.send(msg)
	stateless := h.await("8", 10*time.Second)
	res, _ = stateless["result"].(map[string]any)
	info, _ := res["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if res["resultType"] != "complete" || info["name"] != "mempalace-edge" || len(res["content"].([]any)) != 1 {
		t.Fatalf("stateless answer: %v", stateless)
	}
	// The child's trace (stderr) may trail its answer (stdout): poll.
	var calls []traced
	for deadline := time.Now().Add(5 * time.Second); len(calls) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		calls = calls[:0]
		for _, m := range h.childReceived() {
			if m.Method == "tools/call" && m.Name == "mempalace_kg_stats" {
				calls = append(calls, m)
			}
		}
	}
	if len(calls) != 2 {
		t.Fatalf("child got %d kg_stats calls, want 2:\n%s", len(calls), h.childLog.String())
	}
	if got := strings.Join(calls[1].Meta, ","); got != "progressToken" {
		t.Fatalf("the child got _meta keys %q, want only progressToken", got)
	}
	meta["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
	h.send(msg)
	msg["id"] = 9
	h.send(msg)
	if a := h.await("9", 10*time.Second); a["error"] == nil {
		t.Fatalf("an unknown protocol version was not refused: %v", a)
	}
}

// A child that writes a line that is not JSON-RPC: the line is skipped and
// logged, the call still gets its answer, and the child is not restarted.
func TestChildGarbageLineIsSkipped(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{passThrough: true, childEnv: []string{"FAKEPALACE_GARBAGE_ON=mempalace_status"}})
	r, res := h.call("status", nil)
	if res.IsError || r["total_drawers"] == nil {
		t.Fatalf("status through a child that wrote garbage first: %v", r)
	}
	if !strings.Contains(h.logs.String(), "not JSON-RPC") {
		t.Fatalf("the garbage line was not logged:\n%s", h.logs.String())
	}
	if n := h.edge.child.Spawns(); n != 1 {
		t.Fatalf("child started %d times, want 1", n)
	}
}

// The stateless protocol's per-call fields describe the agent's hop: they
// are dropped on the way on, on both paths (bytes in the lane, the SDK's
// Meta map otherwise); other _meta (a progress token) goes on.
func TestProtocolMetaIsNotForwarded(t *testing.T) {
	t.Parallel()
	in := `{"name":"mempalace_status","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x"},"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug","progressToken":7}}`
	var got map[string]any
	json.Unmarshal(wire.StripProtocolMeta([]byte(in)), &got)
	if m := got["_meta"].(map[string]any); len(m) != 1 || m["progressToken"] != 7.0 || got["name"] != "mempalace_status" {
		t.Fatalf("stripped params: %v", got)
	}
	only := `{"name":"mempalace_status","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	if out := string(wire.StripProtocolMeta([]byte(only))); strings.Contains(out, "_meta") {
		t.Fatalf("an emptied _meta was kept: %s", out)
	}
	var meta map[string]any
	json.Unmarshal([]byte(gjson.Get(in, "_meta").Raw), &meta)
	if fm := wire.ForwardMeta(meta); len(fm) != 1 || fm["progressToken"] != 7.0 {
		t.Fatalf("forwardMeta: %v", fm)
	}
	if fm := wire.ForwardMeta(map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}); fm != nil {
		t.Fatalf("forwardMeta of protocol fields only: %v", fm)
	}
}
