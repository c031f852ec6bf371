package edge

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// An agent closes its input while the flusher is sending a queued update
// to a slow primary: the edge waits (within its stop grace) for that
// send's answer, so the update ends sent, not in flight in doubt. Before,
// the send was cut at once and the op left in flight: a delete made after
// could not take it back (it may have landed), and the next run sent it
// (outside tester, 11c: a secret the user deleted reached the primary).
func TestACleanStopWaitsForTheSendUnderWay(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, stopGrace: 30 * time.Second, timeout: 15 * time.Second})
	h.handshake()
	h.ready()
	const note = "deploy notes"
	id := DrawerIDFor("notes", "slow", note)
	h.send(toolCall(1, "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "slow", "content": note}))
	if a := h.await("1", 10*time.Second); a["result"] == nil {
		t.Fatalf("add_drawer: %v", a)
	}
	h.eventually("the note on the primary", func() bool { return h.primary.Dump().Drawers[id] != nil })
	// Longer than the stop takes when it does not wait for the send.
	h.primary.SetLatency("mempalace_update_drawer", time.Second)
	h.send(toolCall(2, "mempalace_update_drawer", map[string]any{"drawer_id": id, "content": note + " (fixed)"}))
	if a := h.await("2", 10*time.Second); a["result"] == nil {
		t.Fatalf("update_drawer: %v", a)
	}
	h.eventually("the update at the primary", func() bool {
		return slices.ContainsFunc(received(h.primaryLog.String()), func(m traced) bool { return m.Name == "mempalace_update_drawer" })
	})
	h.in.(io.Closer).Close()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("Serve did not return 60s after the agent closed its input\n%s", h.logs)
	}
	ob, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ops, err := ob.List(context.Background(), 100, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead, outbox.InDoubt)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Tool == "mempalace_update_drawer" && op.State != outbox.Done {
			t.Errorf("the update under way when the agent closed its input is %s (maybe applied %v), want done: the primary answered it within the grace\n%s", op.State, op.MaybeApplied, h.logs)
		}
	}
	if d := h.primary.Dump().Drawers[id]; d == nil || !strings.Contains(d.Content, "(fixed)") {
		t.Errorf("the primary holds %+v, want the update", d)
	}
}
