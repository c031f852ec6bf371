package edge

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// An answer settles only the ask it answers, in mempalace_mailbox (every
// stream or one) and at the next session start, whether it reached the
// primary or waits in the outbox: an ack settles the ask it names, a
// reply without ack_of the asks on its stream and correlation id. Here
// pi@laptop asks twice on w-2 and twice on w-3, once on stream mb55 and
// once on mb55b; the agent acks mb55b's w-2 and replies on mb55b's w-3;
// both mb55 asks stay owed. Before, the ack (which copies w-2) and the
// reply settled the mb55 asks too, while mempalace_mailbox with stream
// mb55 still listed them (outside tester, attack55 F2).
func TestAnAnswerSettlesOnlyTheAskItAnswers(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	for _, delivered := range []bool{true, false} {
		t.Run(map[bool]string{true: "answers delivered", false: "answers queued"}[delivered], func(t *testing.T) {
			_, srv := startPrimary(t)
			palace := t.TempDir() + "/palace"
			ask := func(stream, corr string) string {
				r := postTool(t, srv.URL(), testToken, "event_append", map[string]any{"type": "task.request", "stream": stream, "room": "r",
					"from_agent": "pi@laptop", "to_agent": "opencode@edge-test", "correlation_id": corr, "status": "open", "body": "ask " + corr + " on " + stream})
				ev, _ := r["event"].(map[string]any)
				id, _ := ev["id"].(string)
				if id == "" {
					t.Fatalf("event_append: %v", r)
				}
				return id
			}
			a1, a2, a3, a4 := ask("mb55", "w-2"), ask("mb55b", "w-2"), ask("mb55", "w-3"), ask("mb55b", "w-3")
			h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL(), wakeWait: 10 * time.Second})
			if in := instructionsOf(h); !strings.Contains(in, a1) || !strings.Contains(in, a4) {
				t.Fatalf("the asks are not told at the first session start: %q", in)
			}
			for _, args := range []map[string]any{{}, {"stream": "mb55"}} {
				if got := listed(h.call("mailbox", args)); len(got) != map[bool]int{true: 4, false: 2}[args["stream"] == nil] {
					t.Fatalf("mempalace_mailbox %v before any answer: owed %v", args, got)
				}
			}
			if !delivered {
				srv.Stop()
				h.eventually("the edge sees the primary down", func() bool { h.call("kg_stats", nil); return !h.edge.remote.Up() })
			}
			if m, res := h.call("event_ack", map[string]any{"event_id": a2, "from_agent": "opencode@edge-test", "status": "blocked"}); res.IsError || m["success"] != true {
				t.Fatalf("event_ack: %v", m)
			}
			if m, res := h.call("event_append", map[string]any{"type": "task.result", "stream": "mb55b", "room": "r", "from_agent": "opencode@edge-test",
				"to_agent": "pi@laptop", "correlation_id": "w-3", "status": "applied", "body": "done"}); res.IsError || m["success"] != true {
				t.Fatalf("event_append reply: %v", m)
			}
			want := []string{a1, a3}
			for _, args := range []map[string]any{{}, {"stream": "mb55"}} {
				if got := listed(h.call("mailbox", args)); !slices.Equal(got, want) {
					t.Errorf("mempalace_mailbox %v: owed %v, want only the mb55 asks %v (mb55b's %s, %s answered)", args, got, want, a2, a4)
				}
			}
			h.s.Close()
			<-h.done
			next := start(t, harnessOpts{palace: palace, stopGrace: 100 * time.Millisecond, primaryURL: testbed.HungPrimary(t), wakeWait: 50 * time.Millisecond, timeout: 30 * time.Second})
			in := instructionsOf(next)
			if !strings.Contains(in, a1) || !strings.Contains(in, a3) || strings.Contains(in, a2) || strings.Contains(in, a4) {
				t.Errorf("the next session start, from the kept view, is told (want %s and %s, not %s or %s):\n%s", a1, a3, a2, a4, in)
			}
		})
	}
}

// listed is the ids a mempalace_mailbox answer lists as owed.
func listed(m map[string]any, _ any) []string {
	var out []string
	items, _ := m["owed"].([]any)
	for _, it := range items {
		id, _ := it.(map[string]any)["id"].(string)
		out = append(out, id)
	}
	return out
}

// An ack_of answer written on another stream than the ask's settles the
// ask in mempalace_mailbox {"stream": <the ask's>} as in the whole
// mailbox, delivered or still in the outbox: pi@wide asks on mb57x, the
// agent replies on mb57 with metadata.ack_of naming the ask. Before, the
// stream's view read only mb57x's events and still listed the ask ("no
// reply of yours joins it yet") while the whole mailbox did not (outside
// tester, attack57 A1).
func TestAnAckOnAnotherStreamSettlesTheAskInItsStreamsMailbox(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	for _, delivered := range []bool{true, false} {
		t.Run(map[bool]string{true: "answer delivered", false: "answer queued"}[delivered], func(t *testing.T) {
			_, srv := startPrimary(t)
			ask := func(corr string) string {
				r := postTool(t, srv.URL(), testToken, "event_append", map[string]any{"type": "ask", "stream": "mb57x", "room": "r",
					"from_agent": "pi@wide", "to_agent": "opencode@edge-test", "correlation_id": corr, "status": "open", "body": "ask " + corr})
				ev, _ := r["event"].(map[string]any)
				id, _ := ev["id"].(string)
				if id == "" {
					t.Fatalf("event_append: %v", r)
				}
				return id
			}
			b1, b2 := ask("c2"), ask("c3")
			h := start(t, harnessOpts{palace: t.TempDir() + "/palace", primaryURL: srv.URL()})
			for _, args := range []map[string]any{{}, {"stream": "mb57x"}} {
				if got := listed(h.call("mailbox", args)); !slices.Equal(got, []string{b1, b2}) {
					t.Fatalf("mempalace_mailbox %v before the answer: owed %v", args, got)
				}
			}
			if !delivered {
				srv.Stop()
				h.eventually("the edge sees the primary down", func() bool { h.call("kg_stats", nil); return !h.edge.remote.Up() })
			}
			if m, res := h.call("event_append", map[string]any{"type": "reply", "stream": "mb57", "room": "r", "from_agent": "opencode@edge-test",
				"to_agent": "pi@wide", "correlation_id": "c9", "status": "applied", "body": "done", "metadata": map[string]any{"ack_of": b1}}); res.IsError || m["success"] != true {
				t.Fatalf("event_append reply: %v", m)
			}
			for _, args := range []map[string]any{{}, {"stream": "mb57x"}} {
				if got := listed(h.call("mailbox", args)); !slices.Equal(got, []string{b2}) {
					t.Errorf("mempalace_mailbox %v: owed %v, want only %s (%s was answered on mb57)", args, got, b2, b1)
				}
			}
		})
	}
}
