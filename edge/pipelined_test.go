package edge

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A harness running the model's parallel tool calls pipelines them:
// kg_add then kg_invalidate of one fact, the second sent before the first
// is answered. mempalace-mcp answers one call at a time, in the order
// sent, so the fact ends closed; through the edge it must too, in the
// local palace and on the primary (the outbox's order). Before, the edge
// ran them concurrently: either could reach the local palace first, and
// local and primary disagreed with every queue saying done (an outside
// tester, attack13: 4 of 12 facts).
func TestPipelinedWritesKeepTheirOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		opts harnessOpts
	}{{"edge", harnessOpts{raw: true}}, {"pass-through", harnessOpts{raw: true, passThrough: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			h := start(t, mode.opts)
			h.handshake() // no tools/list first: calls may come before the edge knows its tools
			const n = 12
			pipelineFacts(t, h, n, 20*time.Second)
			open := 0
			for _, tr := range h.localState().Triples {
				if tr.ValidTo == nil {
					open++
				}
			}
			if open > 0 {
				t.Errorf("%d of %d facts the agent added then closed are open in the local palace: the close ran first", open, n)
			}
			if mode.opts.passThrough {
				return
			}
			h.drained()
			open = 0
			for i := range n {
				m := h.onPrimary("kg_query", map[string]any{"entity": fmt.Sprintf("service-%d", i)})
				facts, _ := m["facts"].([]any)
				for _, f := range facts {
					if f, _ := f.(map[string]any); f["valid_to"] == nil {
						open++
					}
				}
			}
			if open > 0 {
				t.Errorf("%d of %d facts the agent added then closed are open on the primary: the outbox sent the close first", open, n)
			}
		})
	}
}

// pipelineFacts sends h kg_add then kg_invalidate of n facts, service-0
// to service-<n-1>, without waiting for answers, then waits for every
// answer.
func pipelineFacts(t *testing.T, h *harness, n int, wait time.Duration) {
	t.Helper()
	for i := range n {
		s := fmt.Sprintf("service-%d", i)
		h.send(toolCall(fmt.Sprintf("add%d", i), "mempalace_kg_add", map[string]any{"subject": s, "predicate": "runs_on", "object": "node-a"}))
		h.send(toolCall(fmt.Sprintf("inv%d", i), "mempalace_kg_invalidate", map[string]any{"subject": s, "predicate": "runs_on", "object": "node-a"}))
	}
	for i := range n {
		for _, id := range []string{fmt.Sprintf("add%d", i), fmt.Sprintf("inv%d", i)} {
			if a := h.await(id, wait); a["result"] == nil {
				t.Fatalf("%s: %v", id, a)
			}
		}
	}
}

// A read pipelined behind a write sees it, as mempalace-mcp's answers in
// order give: add_drawer then get_drawer of the drawer it files.
func TestAReadPipelinedBehindAWriteSeesIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true})
	h.handshake()
	h.ready()
	const n = 8
	for i := range n {
		content := fmt.Sprintf("runbook step %d: restart the gateway", i)
		h.send(toolCall(fmt.Sprintf("add%d", i), "mempalace_add_drawer", map[string]any{"wing": "ops", "room": "runbook", "content": content}))
		h.send(toolCall(fmt.Sprintf("get%d", i), "mempalace_get_drawer", map[string]any{"drawer_id": DrawerIDFor("ops", "runbook", content)}))
	}
	for i := range n {
		a := h.await(fmt.Sprintf("get%d", i), 20*time.Second)
		if text := fmt.Sprint(a["result"]); a["result"] == nil || !contains(text, fmt.Sprintf("runbook step %d", i)) {
			t.Errorf("get_drawer pipelined behind the add_drawer that files it: %v", a)
		}
	}
}

// The same against real MemPalace 3.11.0: a real mempalace-mcp child and
// a real serve primary. kg_add then kg_invalidate of each fact, pipelined,
// end closed in both palaces.
func TestRealPipelinedWritesKeepTheirOrder(t *testing.T) {
	r := startRealEdge(t, harnessOpts{raw: true}, "")
	r.handshake()
	const n = 6
	pipelineFacts(t, r.harness, n, 60*time.Second)
	r.drained()
	open := func(call func(tool string, args map[string]any) map[string]any) (opened int) {
		for i := range n {
			facts, _ := call("mempalace_kg_query", map[string]any{"entity": fmt.Sprintf("service-%d", i)})["facts"].([]any)
			for _, f := range facts {
				if f, _ := f.(map[string]any); f["valid_to"] == nil {
					opened++
				}
			}
			if len(facts) == 0 {
				opened++ // not there at all: as wrong as open
			}
		}
		return opened
	}
	if o := open(func(tool string, args map[string]any) map[string]any { return r.srv.MustCall(t, tool, args) }); o > 0 {
		t.Errorf("%d of %d facts the agent added then closed are open on the primary", o, n)
	}
	r.stop()
	<-r.done
	local := r.local.Stdio(t, r.local.MCPCommand()...)
	if o := open(func(tool string, args map[string]any) map[string]any { return local.MustCall(t, tool, args) }); o > 0 {
		t.Errorf("%d of %d facts the agent added then closed are open in the local palace", o, n)
	}
}

// A call cancelled while the edge still waits for the SDK to finish the
// handshake (the client sent initialize, initialized and its calls
// without waiting for answers) gets no answer, as MCP says of a cancelled
// request. Before, it was answered -32603 "method tools/call is invalid
// during session initialization" (an outside tester, attack14 04).
func TestACallCancelledDuringTheHandshakeIsNotAnswered(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true})
	h.send(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "0"}}})
	h.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	for i := range 6 {
		h.send(toolCall(fmt.Sprintf("c%d", i), "mempalace_kg_add", map[string]any{"subject": fmt.Sprintf("s%d", i), "predicate": "p", "object": "o"}))
		h.send(cancelled(fmt.Sprintf("c%d", i)))
	}
	h.send(toolCall("last", "mempalace_kg_stats", map[string]any{}))
	if a := h.await("last", 20*time.Second); a["result"] == nil {
		t.Fatalf("kg_stats: %v", a)
	}
	for i := range 6 {
		if a, ok := h.seen[fmt.Sprintf("c%d", i)]; ok && a["result"] == nil && strings.Contains(fmt.Sprint(a), "initialization") {
			t.Errorf("a cancelled call is answered %v", a)
		}
	}
}
