package edge

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// An agent that pipelines writes and searches and closes its input at
// once, while the local palace takes longer for them than the edge waits
// at the end of its input (attack52 F1): every request it sent is
// answered, once, before Serve returns. A call the edge gave up is
// answered as a signal's stop answers it, with the cause said rightly:
// a write that never reached the local palace NOT applied
// (data.applied false), a read without a word of writes.
func TestStdinClosedWithABacklogAnswersEveryCall(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU
	h := start(t, harnessOpts{raw: true, timeout: time.Second, writeGrace: 300 * time.Millisecond, stopGrace: 300 * time.Millisecond, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=1500,mempalace_search=1500"}})
	h.handshake()
	h.ready()
	var ids []string
	for i := range 4 {
		w, s := fmt.Sprintf("w%d", i), fmt.Sprintf("s%d", i)
		ids = append(ids, w, s)
		h.send(map[string]any{"jsonrpc": "2.0", "id": w, "method": "tools/call", "params": map[string]any{"name": "mempalace_add_drawer",
			"arguments": map[string]any{"wing": "w", "room": "r", "content": "backlog item " + w}}})
		h.send(map[string]any{"jsonrpc": "2.0", "id": s, "method": "tools/call", "params": map[string]any{"name": "mempalace_search",
			"arguments": map[string]any{"query": "backlog " + s}}})
	}
	h.in.(io.Closer).Close()
	got := map[string]int{}
	for m := range h.lines { // closed when Serve returned
		if id, ok := m["id"]; ok && m["method"] == nil {
			k := fmt.Sprint(id)
			got[k]++
			h.seen[k] = m
		}
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("request %s answered %d times before the edge exited, want once: %v", id, got[id], h.seen[id])
		}
	}
	for _, id := range ids {
		e, _ := h.seen[id]["error"].(map[string]any)
		if e == nil {
			continue
		}
		msg := fmt.Sprint(e["message"])
		if strings.Contains(msg, "SIGTERM") || !strings.Contains(msg, "closed its input") {
			t.Errorf("request %s: the cause is not the agent's closed input: %q", id, msg)
		}
		if strings.HasPrefix(id, "s") && strings.Contains(msg, "write") {
			t.Errorf("read %s is answered in a write's words: %q", id, msg)
		}
	}
	// w3 is behind w0, w1 and w2 at a palace that takes 1.5 s for each:
	// still in line when the edge gave up at 2 s, never sent.
	if e, _ := h.seen["w3"]["error"].(map[string]any); e == nil || fmt.Sprint(e["data"]) != "map[applied:false]" {
		t.Errorf("the last write, never sent to the local palace, is answered %v, want NOT applied (data.applied false)", h.seen["w3"])
	}
	if t.Failed() {
		t.Logf("edge log:\n%s", h.logs.String())
	}
}
