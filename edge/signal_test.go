package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

const (
	signalWrite  = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"written, then a signal"}}}` + "\n"
	signalHung   = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mempalace_get_drawer","arguments":{"drawer_id":"drawer_w_r_none"}}}` + "\n"
	signalLate   = `{"jsonrpc":"2.0","id":6,"method":"tools/list"}` + "\n"
	stoppingWord = "stopping: new requests are refused"
	// hungExit is the edge's childExitWait where a test stops a local
	// palace still at a call it never answers: it exits only at SIGTERM,
	// so each wait is waited out in full.
	hungExit = 200 * time.Millisecond
)

// A signal (in the binary; here Serve's context ends) stops the edge with
// the agent's input still open: it stops taking requests (one sent after
// the signal is answered with an error), answers the call in flight
// within the grace (here with an error: the child never answers), keeps
// what it queued, and Serve returns. Before, Serve waited for the agent's
// input to end, with the child already stopped, and never answered again.
func TestSignalStopsWithInputOpen(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	// The grace is what a request sent after the signal has to be read
	// in: generous, so a loaded machine still reads it within it.
	const grace = 2 * time.Second
	h := start(t, harnessOpts{raw: true, stopGrace: grace, timeout: 30 * time.Second, childExitWait: hungExit,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_get_drawer=120000", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	if _, err := h.in.Write([]byte(signalWrite)); err != nil {
		t.Fatal(err)
	}
	if a := h.await("4", 10*time.Second); a["result"] == nil {
		t.Fatalf("add_drawer: %v", a)
	}
	if _, err := h.in.Write([]byte(signalHung)); err != nil {
		t.Fatal(err)
	}
	// The signal comes once the call is at the local palace: in flight,
	// it holds the stop for the whole grace. Write returning says only
	// that the edge read its bytes: under load the signal came first, the
	// call was answered "stopping" at once, the grace ended with it, and
	// the request after the signal found the edge gone.
	waitFor(t, 10*time.Second, "the held call at the local palace", func() bool {
		return slices.ContainsFunc(h.childReceived(), func(m traced) bool { return m.Name == "mempalace_get_drawer" })
	})
	began := time.Now()
	h.stop()
	waitFor(t, 5*time.Second, "word of stopping in the log", func() bool { return strings.Contains(h.logs.String(), stoppingWord) })
	sent := make(chan error, 1)
	go func() { _, err := h.in.Write([]byte(signalLate)); sent <- err }() // nobody may read it once the edge is gone
	select {
	case <-h.done:
	case <-time.After(grace + 20*time.Second):
		t.Fatalf("Serve did not return %s after its context ended, the input still open\n%s", grace+20*time.Second, h.logs)
	}
	took := time.Since(began)
	if a := h.await("5", 5*time.Second); a["error"] == nil {
		t.Errorf("the call in flight past the grace was not answered with an error: %v", a)
	}
	if a := h.await("6", time.Second); a["error"] == nil {
		t.Errorf("a request after the signal, in the grace, was not refused: %v", a)
	}
	if took > grace+15*time.Second {
		t.Errorf("stopping took %s (grace %s)", took, grace)
	}
	wantWriteKept(t, h.palace)
	h.in.(interface{ Close() error }).Close()
	<-sent
}

// slowAnswer is an agent's output on which the answer to one id takes a
// while to be written (an agent reading slowly, a loaded machine).
type slowAnswer struct {
	io.WriteCloser
	id    string // as it follows "id": in the answer
	delay time.Duration
}

func (s slowAnswer) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"id":`+s.id+`,`)) && !bytes.Contains(p, []byte(`"method"`)) {
		time.Sleep(s.delay)
	}
	return s.WriteCloser.Write(p)
}

// The call held at a signal is answered (with an error) before Serve
// returns, however late its answer is written: a call relayed to the
// local palace is answered from the local palace's reader once it is
// stopped, which Serve did not wait for, so under load the process could
// exit first and the agent got no answer at all (CI, race tier:
// TestSignalStopsWithInputOpen's "5" unanswered). Its answer here takes
// longer to write than the second Serve then waited for answers owed.
func TestSignalAnswersTheHeldCallBeforeServeReturns(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, stopGrace: 300 * time.Millisecond, timeout: 30 * time.Second, childExitWait: hungExit,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_get_drawer=120000", "FAKEPALACE_TRACE=1"},
		out:      func(w io.WriteCloser) io.WriteCloser { return slowAnswer{w, "5", 1500 * time.Millisecond} }})
	h.handshake()
	h.ready()
	if _, err := h.in.Write([]byte(signalHung)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the held call at the local palace", func() bool {
		return slices.ContainsFunc(h.childReceived(), func(m traced) bool { return m.Name == "mempalace_get_drawer" })
	})
	h.stop()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve did not return 20s after its context ended\n%s", h.logs)
	}
	if a := h.await("5", 10*time.Second); a["error"] == nil {
		t.Errorf("the call held at the signal got no error answer before Serve returned: %v\n%s", a, h.logs)
	}
}

// heldEdge is `devbox-config edge` as a harness runs it: stdin a pipe the
// test holds open, stdout and stderr collected.
type heldEdge struct {
	cmd         *exec.Cmd
	in          interface{ Write([]byte) (int, error) }
	out, errOut *testbed.SyncBuffer
	exited      chan error
}

func startHeld(t *testing.T, env []string) *heldEdge {
	t.Helper()
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	cmd := exec.Command(bin, "edge")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMPALACE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	p := &heldEdge{cmd: cmd, out: &testbed.SyncBuffer{}, errOut: &testbed.SyncBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.errOut
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.in = in
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }() // received below or in the cleanup
	t.Cleanup(func() {
		in.Close()
		select {
		case err := <-p.exited:
			p.exited <- err
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *heldEdge) send(t *testing.T, lines string) {
	t.Helper()
	if _, err := p.in.Write([]byte(lines)); err != nil {
		t.Fatal(err)
	}
}

// await returns the answer to id on stdout, nil if none came within d.
func (p *heldEdge) await(id string, d time.Duration) map[string]any {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(p.out.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["method"] == nil && fmt.Sprint(m["id"]) == id {
				return m
			}
		}
		if time.Now().After(end) {
			return nil
		}
	}
}

// SIGTERM or SIGINT to `devbox-config edge` whose stdin is still open
// (the harness sends the signal and waits for the exit): it exits 0 within
// a few seconds and the write it took is in its outbox. Before, it stopped
// its local palace and kept running, answering nothing (outside tester).
func TestSignalStopsEdgeProcess(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			_, srv := startPrimary(t)
			palace := filepath.Join(t.TempDir(), "palace")
			p := startHeld(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace,
				"MEMPALACE_REMOTE_URL=" + srv.URL(), "MEMPALACE_REMOTE_TOKEN=" + testToken, "MEMPALACE_EDGE_TIMEOUT=30s",
				"FAKEPALACE_LATENCY_MS=mempalace_get_drawer=120000"})
			p.send(t, pipedInitialize)
			if a := p.await("1", 20*time.Second); a["result"] == nil {
				t.Fatalf("initialize: %v\nstderr:\n%s", a, p.errOut)
			}
			p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+signalWrite)
			if a := p.await("4", 20*time.Second); a["result"] == nil {
				t.Fatalf("add_drawer: %v\nstderr:\n%s", a, p.errOut)
			}
			p.send(t, signalHung) // the child never answers it
			time.Sleep(200 * time.Millisecond)
			began := time.Now()
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.exited:
				p.exited <- err
				if err != nil {
					t.Errorf("the edge exited with %v after %s", err, sig)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("the edge still runs 15s after %s with its stdin open\nstderr:\n%s", sig, p.errOut)
			}
			if took := time.Since(began); took > 10*time.Second {
				t.Errorf("the edge took %s to exit after %s", took, sig)
			}
			if a := p.await("5", 0); a == nil {
				t.Errorf("the call in flight at %s was not answered\nstdout:\n%s", sig, p.out)
			}
			answers(t, p.out.String()) // stdout carries only MCP
			wantWriteKept(t, palace)
			if t.Failed() {
				t.Logf("stderr:\n%s", p.errOut)
			}
		})
	}
}

// A write the local palace took goes in the outbox even when its call is
// cancelled just then (the agent's notifications/cancelled, or the edge
// stopping after the grace): otherwise it would never reach the primary.
func TestWriteQueuedWhenItsCallIsCancelled(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true})
	h.handshake() // Serve has opened the outbox
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := laneCall("mempalace_add_drawer", json.RawMessage(`{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"taken locally, then cancelled"}}`))
	if _, err := c.decoded(); err != nil {
		t.Fatal(err)
	}
	if got := h.edge.queue(ctx, c, "", "", 0); got["replication"] != "queued" {
		t.Errorf("a cancelled call's write, taken locally: %v", got)
	}
}

// The agent cancels an add_drawer while the local palace is still at it
// (a slow embedder): the local palace applies it anyway, as MemPalace
// does, so it must still reach the primary. Before, the edge gave up on
// the local answer at the cancel and never queued the write (outside
// tester, 16-cancelled-write-applied-not-queued).
func TestCancelledWriteTheLocalPalaceAppliesReachesThePrimary(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=800", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	h.cancelOnceIn(h.childLog, "w1", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "cancelled while the embedder ran"})
	h.eventually("the cancelled write on the primary", func() bool {
		return h.primary.Dump().CountContent("cancelled while the embedder ran") == 1
	})
}

// SIGTERM while a write is at a slow local palace (an embedder at work):
// the edge exits within its stop grace, plus the local palace's time to
// exit once its input closes (childExitWait), well before a container
// stop's SIGKILL (10 s), and the write is not lost: it was in the outbox
// before it was sent, and the next edge sends it to the primary, once.
// Before, the edge waited for the local answer up to the write grace
// (30 s), past the SIGKILL.
func TestSignalMidWriteKeepsTheWrite(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	const grace = 300 * time.Millisecond
	h := start(t, harnessOpts{raw: true, stopGrace: grace, primaryDown: true, childExitWait: hungExit,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=8000", "FAKEPALACE_TRACE=1"}})
	writeAtTheLocalPalace(t, h)
	began := time.Now()
	h.stop()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve did not return 20s after its context ended\n%s", h.logs)
	}
	if took, bound := time.Since(began), grace+2*hungExit+time.Second; took > bound {
		t.Errorf("stopping with a write at the local palace took %s, want at most %s (the stop grace and the local palace's exit)", took, bound)
	}
	if a := h.await("4", time.Second); a == nil {
		t.Errorf("the write held at the signal was not answered")
	}
	primary, srv := startPrimary(t)
	next := start(t, harnessOpts{raw: true, palace: h.palace, primaryURL: srv.URL()})
	next.handshake()
	next.eventually("the write on the primary, sent by the next edge", func() bool {
		return primary.Dump().CountContent("written, then a signal") == 1
	})
	next.drained()
	if n := primary.Dump().CountContent("written, then a signal"); n != 1 {
		t.Errorf("the primary holds the write %d times, want once", n)
	}
}

// A local palace that never answers a cancelled write is not waited for
// past the write grace: the edge gives it up, says so in its log, and
// queues it all the same (the local palace may still apply it).
func TestCancelledWriteGivenUpAfterTheWriteGrace(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, writeGrace: 300 * time.Millisecond, childExitWait: hungExit, childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=3000", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	h.cancelOnceIn(h.childLog, "w1", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "never answered"})
	h.eventually("word of the write given up", func() bool {
		return strings.Contains(h.logs.String(), "did not answer a write within the write grace")
	})
	h.eventually("the given-up write on the primary", func() bool { return h.primary.Dump().CountContent("never answered") == 1 })
}

// SIGTERM with a write at a local palace that does not answer within the
// stop grace (the write grace is not waited at a signal): the edge stops
// it and queues the write for the primary (it may or may not be applied
// locally; queued, it is not lost), and Serve returns.
func TestSignalMidWriteUnansweredPastTheWriteGrace(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, stopGrace: 100 * time.Millisecond, writeGrace: 300 * time.Millisecond, primaryDown: true, childExitWait: hungExit,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=20000", "FAKEPALACE_TRACE=1"}})
	writeAtTheLocalPalace(t, h)
	h.stop()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return 10s after its context ended\n%s", h.logs)
	}
	ob, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatalf("outbox: %v", err)
	}
	defer ob.Close()
	ops, err := ob.List(context.Background(), 100, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead)
	if err != nil || len(ops) != 1 || ops[0].Tool != "mempalace_add_drawer" {
		t.Errorf("outbox after a stop mid-write: %+v %v\n%s", ops, err, h.logs)
	}
}

// A stop gives up a write still at a slow local palace (its grace is
// over) just before it cancels the calls still running: the write, given
// up, is queued for the primary, and its answer must not tell the agent
// it was not written ("local palace unavailable: context canceled", an
// error result), which the agent got when the write answered before the
// calls were cancelled. It is the stop's answer: the request was not
// finished, and a write may or may not have been applied.
func TestAWriteGivenUpAtAStopIsAnsweredAsStopping(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, primaryDown: true, childExitWait: hungExit,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=20000", "FAKEPALACE_TRACE=1"}})
	writeAtTheLocalPalace(t, h)
	h.edge.writes.givenUp()
	h.edge.writes.giveUpAll() // the stop's grace is over; its calls are not cancelled yet
	a := h.await("4", 5*time.Second)
	e, _ := a["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32000) || !strings.Contains(fmt.Sprint(e["message"]), "may or may not have been applied") {
		t.Errorf("a write given up at a stop (queued for the primary) is answered %v, want the stop's -32000 \"may or may not have been applied\"", a)
	}
}

// writeAtTheLocalPalace sends signalWrite after the handshake and waits
// until the (slow) local palace has it.
func writeAtTheLocalPalace(t *testing.T, h *harness) {
	t.Helper()
	h.handshake()
	h.ready()
	if _, err := h.in.Write([]byte(signalWrite)); err != nil {
		t.Fatal(err)
	}
	h.atTheLocalPalace("mempalace_add_drawer")
}

// atTheLocalPalace waits until the edge process's local palace received
// a call of tool (the child runs with FAKEPALACE_TRACE=1; its stderr is
// the edge's).
func (p *heldEdge) atTheLocalPalace(t *testing.T, tool string) {
	t.Helper()
	waitFor(t, 10*time.Second, tool+" at the local palace", func() bool {
		return slices.ContainsFunc(received(p.errOut.String()), func(m traced) bool { return m.Name == tool })
	})
}

// atTheLocalPalace waits until the local palace received a call of tool
// (its child runs with FAKEPALACE_TRACE=1): a fixed sleep instead let a
// loaded machine stop the edge before the call was sent.
func (h *harness) atTheLocalPalace(tool string) {
	h.t.Helper()
	waitFor(h.t, 10*time.Second, tool+" at the local palace", func() bool {
		return slices.ContainsFunc(h.childReceived(), func(m traced) bool { return m.Name == tool })
	})
}
