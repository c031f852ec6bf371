package edge

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// An edge killed with SIGKILL (an OOM kill) takes its local palace server
// with it, also one busy at a call (here a write whose embedder never
// answers: MemPalace waits 120 s for it). Before, the orphaned
// mempalace-mcp went on holding the palace until its call ended, while the
// harness started a second edge, and a second server, on it.
func TestRealKilledEdgeTakesItsLocalPalaceWithIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's (child_linux.go)")
	}
	palace := realpalace.New(t)
	embedder := stalled(t)
	p := startHeld(t, append(palace.Env(), "MEMPALACE_EDGE_CHILD="+palace.Bin("mempalace-mcp"), "MEMPALACE_PALACE_PATH="+palace.Dir,
		"MEMPALACE_EDGE_TIMEOUT=300s", "MEMPALACE_EMBEDDING_API_URL="+embedder.url))
	p.send(t, pipedInitialize)
	if a := p.await("1", 60*time.Second); a["result"] == nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", a, p.errOut)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+pipedStatus)
	if a := p.await("3", 60*time.Second); a["result"] == nil {
		t.Fatalf("status: %v\nstderr:\n%s", a, p.errOut)
	}
	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"held at the embedder"}}}`+"\n")
	select {
	case <-embedder.asked:
	case <-time.After(60 * time.Second):
		t.Fatalf("the write never reached the embedder\nstderr:\n%s", p.errOut)
	}
	local := p.localPalace(t)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not waiting for p.exited: Wait also waits for the edge's stderr,
	// which its local palace server inherited.
	p.ended(t, local)
}

// localPalace is the pid of the edge's local palace server, its one child.
// The test kills it at cleanup if it is still there.
func (p *heldEdge) localPalace(t *testing.T) int {
	t.Helper()
	kids := children(t, p.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("the edge runs %d processes, want its one local palace server: %v", len(kids), kids)
	}
	t.Cleanup(func() { syscall.Kill(kids[0], syscall.SIGKILL) }) // one a failed test left running
	return kids[0]
}

// ended waits for the local palace server pid to end, with its edge
// killed (child_linux.go). 30 s is a hang bound, not a timing target: it
// goes at once.
func (p *heldEdge) ended(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); running(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the local palace server (pid %d) still runs 30s after its edge was killed\nstderr:\n%s", pid, p.errOut)
		}
	}
}

// children are the processes whose parent is pid (Linux's /proc).
func children(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range stats {
		if fields := statFields(f); len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, n)
		}
	}
	return out
}

// running: pid is a live process (not gone, not a zombie nobody reaped).
func running(pid int) bool {
	fields := statFields("/proc/" + strconv.Itoa(pid) + "/stat")
	return len(fields) > 0 && fields[0] != "Z"
}

// statFields are a /proc/PID/stat's fields after the command: state,
// parent, ...; nil when the process is gone.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// stalledEmbedder takes connections and never answers on them.
type stalledEmbedder struct {
	url   string
	asked chan struct{} // closed at the first connection
}

func stalled(t *testing.T) *stalledEmbedder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &stalledEmbedder{url: "http://" + ln.Addr().String(), asked: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			if conns = append(conns, c); len(conns) == 1 {
				close(e.asked)
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return e
}
