package edge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// An argument no MemPalace release's schema lists for its tool is refused
// by the edge as the gateway refuses it: -32602, in the gateway's words
// (catalogue.UnknownParams), with the edge's tail, and nothing is queued
// or sent: an event_append with kind (as an agent guessed it) was
// answered with an op_id and died at the gateway, and `edge flush`
// exited 1 until an operator dropped it (attack52 F4). A read (search) is
// refused alike; before, an unknown argument of a number was told as a
// wrong type ("must be a string, not a number"). A local-only tool
// (hook_settings) is left to the local palace, which answers for itself.
// An argument MemPalace takes (topic) is queued as before.
func TestAnUnknownArgumentIsRefusedUpFrontAsTheGatewayRefusesIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, primaryDown: true, childEnv: []string{"FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	long := strings.Repeat("x", 300)
	wantRefusedUpFront(t, h, []refusedCall{
		{"event_append", `{"type":"note","stream":"s","room":"r","from_agent":"opencode@edge-test","body":"b","kind":"note"}`, "Unknown parameter 'kind' for tool mempalace_event_append; refused by the edge"},
		{"add_drawer", `{"wing":"ops","room":"r","content":"x","tags":[],"zz":1,"aa":2}`, "Unknown parameter 'aa', 'tags', 'zz' for tool mempalace_add_drawer; refused by the edge"},
		{"add_drawer", `{"wing":"ops","room":"r","content":"x","` + long + `":1}`, "Unknown parameter for tool mempalace_add_drawer: '" + long[:64] + "…' (300 bytes); refused by the edge"},
		{"search", `{"query":"q","top_k":3}`, "Unknown parameter 'top_k' for tool mempalace_search; refused by the edge"},
	})
	if _, err := h.in.Write([]byte(`{"jsonrpc":"2.0","id":200,"method":"tools/call","params":{"name":"mempalace_hook_settings","arguments":{"bogus":1}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	h.await("200", 10*time.Second) // the local palace's answer, whatever it is
	var local []string
	waitFor(t, 5*time.Second, "the local palace's trace of hook_settings", func() bool {
		local = nil
		for _, m := range h.childReceived() {
			if m.Method == "tools/call" {
				local = append(local, m.Name)
			}
		}
		return len(local) > 0
	})
	if fmt.Sprint(local) != "[mempalace_hook_settings]" {
		t.Errorf("the local palace got %v, want hook_settings alone", local)
	}
	ops, err := h.edge.outbox.List(context.Background(), 10, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead)
	if err != nil || len(ops) != 0 {
		t.Errorf("the outbox holds %d ops (%v)", len(ops), err)
	}
	line := `{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":{"type":"note","stream":"s","room":"r","from_agent":"opencode@edge-test","body":"b","topic":"t"}}}`
	if _, err := h.in.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	if a := h.await("300", 10*time.Second); !strings.Contains(fmt.Sprint(a["result"]), "op_id") {
		t.Errorf("an event_append with the arguments MemPalace takes is answered %.300v, want queued", a)
	}
}

// review25 F1: Gemini CLI sends wait_for_previous with every tool call,
// which MemPalace takes for every tool, of any value, and drops. The edge
// takes it too: a write is filed locally and on the primary, a merged
// read answered from both palaces. Before, both were refused up front
// ("Unknown parameter 'wait_for_previous'").
func TestGeminisWaitForPreviousIsTaken(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	r, res := h.call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "gemini waits for the previous call", "wait_for_previous": true})
	if res.IsError || r["success"] != true {
		t.Fatalf("add_drawer with wait_for_previous: %v", r)
	}
	h.eventually("the write on the primary", func() bool {
		return h.primary.Dump().CountContent("gemini waits for the previous call") == 1
	})
	// and its op settled: until then a merged search leaves out the
	// primary's copy of a drawer written here (attack97 F6), and the hit is
	// "local" (CI 119's unit tier, under load)
	h.drained()
	r, res = h.call("search", map[string]any{"query": "gemini waits", "wait_for_previous": true})
	hits, _ := r["results"].([]any)
	if res.IsError || len(hits) != 1 || palaceOf(hits[0].(map[string]any)) != "both" || r["degraded"] != nil {
		t.Fatalf("search with wait_for_previous: %v", r)
	}
}
