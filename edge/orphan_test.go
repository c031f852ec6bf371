package edge

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// A harness stopped with its process group (timeout(1), a terminal's
// Ctrl-C) while the edge's local palace is stuck at a write it cannot
// interrupt (MemPalace's chromadb on a full disk, deaf to SIGTERM): the
// harness is gone, so the edge's answers go to a pipe nobody reads.
// The edge still stops its local palace (SIGKILL after SIGTERM) and exits
// 0. Before, its first answer after the stop grace killed it with SIGPIPE,
// its local palace was never stopped, and the orphan kept MemPalace's
// writer lock: every later session's write was refused "Peer MCP writer
// active" (attack41 N7).
func TestStoppedEdgeWhoseHarnessIsGoneLeavesNoLocalPalace(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary; waits out its stop grace and its local palace's exit waits (7 s)")
	p := startStuck(t)
	local := p.localPalace(t)
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil { // the group: the edge and its local palace
		t.Fatal(err)
	}
	p.stdin.Close() // the harness is gone: its ends of the edge's pipes close
	p.stdout.Close()
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Errorf("the edge exited with %v, want 0, after a SIGTERM with its harness gone\nstderr:\n%s", err, p.stderr(t))
		}
	case <-time.After(30 * time.Second): // a hang bound: it takes the stop grace and the local palace's exit waits
		t.Fatalf("the edge still runs 30s after SIGTERM\nstderr:\n%s", p.stderr(t))
	}
	if running(local) {
		t.Errorf("the local palace server (pid %d) still runs after its edge exited: an orphan holding the palace's writer lock\nstderr:\n%s", local, p.stderr(t))
	}
	if !strings.Contains(p.stderr(t), "did not exit at the end of its input nor at SIGTERM") {
		t.Errorf("the edge's log does not say it killed its stuck local palace server\nstderr:\n%s", p.stderr(t))
	}
}

// An edge killed outright (SIGKILL, the OOM killer: no stop runs) takes
// its local palace server with it also when that server is stuck deaf to
// SIGTERM. Before, the parent-death signal was SIGTERM and the stuck
// server lived on as an orphan holding the palace's writer lock.
func TestKilledEdgeTakesItsStuckLocalPalaceWithIt(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's (child_linux.go)")
	}
	p := startStuck(t)
	local := p.localPalace(t)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	p.exited <- nil
	for deadline := time.Now().Add(30 * time.Second); running(local); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang bound, not a timing target: it goes at once
			t.Fatalf("the local palace server (pid %d) still runs 30s after its edge was killed\nstderr:\n%s", local, p.stderr(t))
		}
	}
}

// startStuck starts `devbox-config edge` as a harness does, in a process
// group of its own, with a local palace (the double) that never answers
// an add_drawer and ignores SIGTERM, and leaves one add_drawer at it. Its
// stderr is a file: a pipe would be held open by an orphan, and the
// edge's exit not seen.
func startStuck(t *testing.T) *stuckEdge {
	t.Helper()
	child := testbed.Self(t, fakepalace.ProgramName)
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	_, srv := startPrimary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "edge")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMPALACE_") && !strings.HasPrefix(kv, "FAKEPALACE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MEMPALACE_EDGE_CHILD="+child, "MEMPALACE_PALACE_PATH="+filepath.Join(dir, "palace"),
		"MEMPALACE_REMOTE_URL="+srv.URL(), "MEMPALACE_REMOTE_TOKEN="+testToken, "MEMPALACE_EDGE_TIMEOUT=30s",
		"FAKEPALACE_HOLD_ON=mempalace_add_drawer", "FAKEPALACE_IGNORE_SIGTERM=1", "FAKEPALACE_TRACE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errFile, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close() // the edge has its own copy
	cmd.Stderr = errFile
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &stuckEdge{&heldEdge{cmd: cmd, in: in, out: &testbed.SyncBuffer{}, errOut: &testbed.SyncBuffer{}, exited: make(chan error, 1)}, in, out, errFile.Name()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { io.Copy(p.out, bufio.NewReader(out)) }() // ends when the test closes out (the harness gone) or the edge exits
	go func() { p.exited <- cmd.Wait() }()
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
	p.send(t, pipedInitialize)
	if a := p.await("1", 20*time.Second); a["result"] == nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", a, p.stderr(t))
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+signalWrite)
	waitFor(t, 10*time.Second, "the write at the local palace", func() bool {
		return slices.ContainsFunc(received(p.stderr(t)), func(m traced) bool { return m.Name == "mempalace_add_drawer" })
	})
	return p
}

// stuckEdge is a heldEdge whose harness's ends of its pipes the test can
// close, with its stderr in a file.
type stuckEdge struct {
	*heldEdge
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	errPath string
}

func (p *stuckEdge) stderr(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.errPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
