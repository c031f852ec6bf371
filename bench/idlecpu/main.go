// Command idlecpu measures what an idle `devbox-config edge` costs, and how
// soon it sends a write another process queued, for two builds side by
// side (A and B run at the same time, so the machine's drift hits both):
//
//   - CPU over a quiet window (utime+stime from /proc, ms per second) and
//     voluntary context switches per second (the wake-ups) of the edge
//     with a connected agent that has been silent longer than the edge's
//     2-minute "agent at work" period (-settle), an empty outbox and the
//     primary up;
//
//   - enqueue-to-flush: a write queued in the outbox by another process
//     (this one) until the primary has it (A and B alternate).
//
//     go run ./bench/idlecpu -a /tmp/edge-old -b /tmp/edge-new -child /tmp/mempalace-mcp -window 60s -rounds 2
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

const token = "bench-token"

var (
	binA   = flag.String("a", "", "devbox-config build A")
	binB   = flag.String("b", "", "devbox-config build B")
	child  = flag.String("child", "", "local palace server (the fakepalace binary)")
	window = flag.Duration("window", 60*time.Second, "quiet window per measurement")
	rounds = flag.Int("rounds", 2, "A/B rounds")
	settle = flag.Duration("settle", 130*time.Second, "silence after the agent's last call before the window")
	writes = flag.Int("writes", 20, "cross-process writes per enqueue-to-flush measurement")
)

func main() {
	flag.Parse()
	if *binA == "" || *binB == "" || *child == "" {
		log.Fatal("need -a, -b and -child")
	}
	pl, err := fakepalace.New(fakepalace.Options{})
	must(err)
	srv := pl.NewHTTP(fakepalace.HTTPOptions{Token: token})
	must(srv.Start("127.0.0.1:0"))
	defer srv.Stop()
	fmt.Printf("settle %v, window %v, %d rounds, %d cross-process writes each\n", *settle, *window, *rounds, *writes)
	for r := 1; r <= *rounds; r++ {
		a, b := start(*binA, srv.URL()), start(*binB, srv.URL())
		time.Sleep(*settle)
		ta, sa := a.sample()
		tb, sb := b.sample()
		time.Sleep(*window)
		ca, wa := a.since(ta, sa)
		cb, wb := b.since(tb, sb)
		la, lb := a.crossProcess(pl), b.crossProcess(pl)
		for _, x := range []struct {
			name     string
			cpu, wak float64
			lat      []time.Duration
		}{{"A", ca, wa, la}, {"B", cb, wb, lb}} {
			fmt.Printf("round %d %s  idle CPU %.3f ms/s  wake-ups %.2f /s  enqueue-to-flush median %v p90 %v\n", r, x.name, x.cpu, x.wak, x.lat[len(x.lat)/2].Round(10*time.Microsecond), x.lat[len(x.lat)*9/10].Round(10*time.Microsecond))
		}
		a.stop()
		b.stop()
	}
}

type edgeProc struct {
	s      *mcp.ClientSession
	pid    int
	palace string
	t0     time.Time
}

// start runs an edge with a connected agent that makes one write (so the
// outbox exists and the flusher has run) and then stays silent.
func start(bin, url string) *edgeProc {
	palace, err := os.MkdirTemp("", "idle") // short: the doorbell is a Unix socket
	must(err)
	cmd := exec.Command(bin, "edge")
	cmd.Env = append(os.Environ(), "MEMPALACE_REMOTE_URL="+url, "MEMPALACE_REMOTE_TOKEN="+token, "MEMPALACE_EDGE=1",
		"MEMPALACE_EDGE_CHILD="+*child, "MEMPALACE_PALACE_PATH="+palace, "MEMPALACE_EDGE_LOG=error")
	ctx := context.Background()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "idlecpu", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	must(err)
	_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_add_drawer", Arguments: map[string]any{"wing": "w", "room": "r", "content": "first " + palace}})
	must(err)
	return &edgeProc{s: s, pid: cmd.Process.Pid, palace: palace}
}

func (e *edgeProc) sample() (int64, int64) {
	e.t0 = time.Now()
	return cpuTicks(e.pid), switches(e.pid)
}

// since is CPU ms/s and wake-ups/s since sample.
func (e *edgeProc) since(t0, w0 int64) (float64, float64) {
	el := time.Since(e.t0).Seconds()
	t1, w1 := e.sample()
	return float64(t1-t0) * 1000 / float64(clockTicks) / el, float64(w1-w0) / el
}

func (e *edgeProc) stop() {
	e.s.Close()
	os.RemoveAll(e.palace)
}

// crossProcess queues writes in the edge's outbox from this process and
// times each until the primary has it.
func (e *edgeProc) crossProcess(pl *fakepalace.Palace) []time.Duration {
	ctx := context.Background()
	st, err := outbox.Open(filepath.Join(e.palace, "edge", outbox.FileName), "bench", "lab")
	must(err)
	defer st.Close()
	var lat []time.Duration
	for i := 0; i < *writes; i++ {
		time.Sleep(150 * time.Millisecond) // idle again between writes
		content := fmt.Sprintf("cross-process %s %d", e.palace, i)
		before := pl.Calls("mempalace_add_drawer")
		t := time.Now()
		_, err := st.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"` + content + `"}`), Wing: "w"})
		must(err)
		for pl.Calls("mempalace_add_drawer") == before {
			if time.Since(t) > 10*time.Second {
				log.Fatalf("edge %d: the write was never sent", e.pid)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}

const clockTicks = 100 // USER_HZ on Linux

// cpuTicks is utime+stime of a process, in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + stt
}

// switches sums voluntary context switches over a process's threads.
func switches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
