package edge

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// A write that is past its turn and its intent when the agent's closed
// input stops the edge (the race tier's w1: its intent failed "context
// canceled", and it went to the local palace after the stop had stopped
// waiting for writes) is still answered, once, before Serve returns: held
// until the stop, it is never sent and is answered NOT applied; held past
// the stop's grace too, the edge answers it itself, as stopped, and its
// own late answer is not written a second time.
func TestAWriteHeldAtTheStopIsAnsweredOnce(t *testing.T) {
	const stopGrace = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		hold    func(context.Context)
		applied string // the answer's data: NOT applied, or nothing said
	}{
		{"until the stop", func(ctx context.Context) { <-ctx.Done() }, "map[applied:false]"},
		{"past the stop's grace", func(ctx context.Context) { <-ctx.Done(); time.Sleep(3 * stopGrace) }, "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // it waits out graces, not the CPU
			// The local palace takes 1.5 s for a write, longer than the
			// stop's grace: a write sent after the stop is not answered
			// in time.
			h := start(t, harnessOpts{raw: true, timeout: 300 * time.Millisecond, writeGrace: 2 * time.Second, stopGrace: stopGrace,
				childEnv:    []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=1500"},
				beforeServe: func(e *Edge) { e.beforeSend = tc.hold }})
			h.handshake()
			h.ready()
			h.send(map[string]any{"jsonrpc": "2.0", "id": "w", "method": "tools/call", "params": map[string]any{"name": "mempalace_add_drawer",
				"arguments": map[string]any{"wing": "w", "room": "r", "content": "held at the stop"}}})
			h.in.(io.Closer).Close()
			var answers []map[string]any
			for m := range h.lines { // closed when Serve returned
				if m["id"] == "w" {
					answers = append(answers, m)
				}
			}
			if len(answers) != 1 {
				t.Fatalf("the write is answered %d times before the edge exited, want once: %v\nedge log:\n%s", len(answers), answers, h.logs.String())
			}
			e, _ := answers[0]["error"].(map[string]any)
			if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "closed its input") || fmt.Sprint(e["data"]) != tc.applied {
				t.Errorf("the write is answered %v, want the closed input's stop with data %s", answers[0], tc.applied)
			}
		})
	}
}
