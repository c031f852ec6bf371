package edge

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// A container stop (SIGTERM, then SIGKILL: docker's 10 s) kills the edge
// while its local palace is still at a write (a slow embedder); the local
// palace goes with it (child_linux.go), the write applied or not. The next
// edge on the same palace must send it to the primary, once. Before, the edge queued a write only once
// the local palace answered, so the kill lost it to the fleet: "local has
// it: 1, outbox queued 0, primary has it: 0" (outside tester,
// 06b-sigterm-then-docker-kill).
func TestKilledMidWriteTheNextEdgeSendsIt(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)
	primary, srv := startPrimary(t)
	palace := filepath.Join(t.TempDir(), "palace")
	p := startHeld(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace,
		"MEMPALACE_REMOTE_URL=" + srv.URL(), "MEMPALACE_REMOTE_TOKEN=" + testToken, "MEMPALACE_EDGE_TIMEOUT=30s",
		"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=1500", "FAKEPALACE_TRACE=1"})
	p.send(t, pipedInitialize)
	if a := p.await("1", 20*time.Second); a["result"] == nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", a, p.errOut)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+signalWrite)
	p.atTheLocalPalace(t, "mempalace_add_drawer")
	local := p.localPalace(t)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.exited <- <-p.exited
	p.ended(t, local)
	h := start(t, harnessOpts{raw: true, palace: palace, primaryURL: srv.URL()})
	h.handshake()
	content := "written, then a signal"
	h.eventually("the write on the primary after the kill", func() bool { return primary.Dump().CountContent(content) == 1 })
	h.drained()
	if n := primary.Dump().CountContent(content); n != 1 {
		t.Errorf("the primary holds the write %d times, want once", n)
	}
}

// A write the local palace refuses is never sent, and leaves nothing in
// the outbox: the intent written before it was sent is dropped, not
// queued, and a later edge on the same palace sends nothing either.
func TestRefusedLocalWriteIsNeverSent(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	m, res := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "   "})
	if !res.IsError && m["success"] != false && m["error"] == nil {
		t.Fatalf("the local palace took a blank drawer: %v", m)
	}
	ob, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ops, err := ob.List(context.Background(), 100, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead, outbox.InDoubt, outbox.Held)
	if err != nil || len(ops) != 0 {
		t.Errorf("the outbox after a refused write: %+v %v", ops, err)
	}
	if n, _, err := ob.Pending(context.Background()); err != nil || n != 0 {
		t.Errorf("pending after a refused write: %d %v", n, err)
	}
	if strings.Contains(h.primaryLog.String(), "add_drawer") {
		t.Errorf("the refused write reached the primary:\n%s", h.primaryLog)
	}
}

// Another agent session's edge on this palace is killed while its local
// palace is at a write: this edge, running on, sends that write within
// its Lease, resolved as its start resolves one (resolveLeft), with no
// restart or `edge flush` (attack84 F1: it stayed an intent for good).
func TestARunningEdgeSendsAKilledEdgesWrite(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{lease: 200 * time.Millisecond})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "this edge's own"})
	h.eventually("this edge's own write on the primary", func() bool { return h.primary.Dump().CountContent("this edge's own") == 1 })
	other, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "") // the other session's edge
	if err != nil {
		t.Fatal(err)
	}
	content := "the killed session's last write"
	args := fmt.Sprintf(`{"wing":"w","room":"r","content":%q}`, content)
	if _, err := other.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(args), Wing: "w", Intent: true}); err != nil {
		t.Fatal(err)
	}
	other.Close() // killed: its lock is free
	h.eventually("the killed edge's write on the primary", func() bool { return h.primary.Dump().CountContent(content) == 1 })
}
