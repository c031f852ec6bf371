// Command idlecpu measures what an idle `devbox-config edge` costs, and how
// soon it sends a write another process queued, for two builds side by
// side (A and B alternate, so the machine's drift hits both):
//
//   - CPU over a quiet window (utime+stime from /proc, ms per second) and
//     voluntary context switches per second (the wake-ups) of the edge
//     with a connected, silent agent, an empty outbox and the primary up;
//   - enqueue-to-flush: a write queued in the outbox by another process
//     (this one) until the primary has it.
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
	fmt.Printf("window %v, %d rounds, %d cross-process writes each\n", *window, *rounds, *writes)
	for r := 1; r <= *rounds; r++ {
		for _, b := range []struct{ name, bin string }{{"A", *binA}, {"B", *binB}} {
			cpu, wakes, lat := measure(b.bin, srv.URL(), pl)
			fmt.Printf("round %d %s  idle CPU %.3f ms/s  wake-ups %.1f /s  enqueue-to-flush median %v p90 %v\n", r, b.name, cpu, wakes, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*9/10].Round(10*time.Microsecond))
		}
	}
}

func measure(bin, url string, pl *fakepalace.Palace) (cpuMsPerS, wakesPerS float64, lat []time.Duration) {
	palace, err := os.MkdirTemp("", "idle") // short: the doorbell is a Unix socket
	must(err)
	defer os.RemoveAll(palace)
	cmd := exec.Command(bin, "edge")
	cmd.Env = append(os.Environ(), "MEMPALACE_REMOTE_URL="+url, "MEMPALACE_REMOTE_TOKEN="+token, "MEMPALACE_EDGE=1",
		"MEMPALACE_EDGE_CHILD="+*child, "MEMPALACE_PALACE_PATH="+palace, "MEMPALACE_EDGE_LOG=error")
	ctx := context.Background()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "idlecpu", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	must(err)
	defer s.Close()
	// One write so the outbox exists and the flusher has run once.
	_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_add_drawer", Arguments: map[string]any{"wing": "w", "room": "r", "content": "first " + palace}})
	must(err)
	time.Sleep(3 * time.Second) // past start-up work
	pid := cmd.Process.Pid
	t0, w0 := cpuTicks(pid), switches(pid)
	start := time.Now()
	time.Sleep(*window)
	el := time.Since(start).Seconds()
	t1, w1 := cpuTicks(pid), switches(pid)
	cpuMsPerS = float64(t1-t0) * 1000 / float64(clockTicks) / el
	wakesPerS = float64(w1-w0) / el

	st, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "bench", "lab")
	must(err)
	defer st.Close()
	for i := 0; i < *writes; i++ {
		time.Sleep(150 * time.Millisecond) // idle again between writes
		content := fmt.Sprintf("cross-process %s %d", palace, i)
		before := pl.Calls("mempalace_add_drawer")
		t := time.Now()
		_, err := st.Enqueue(ctx, "mempalace_add_drawer", []byte(`{"wing":"w","room":"r","content":"`+content+`"}`), "w")
		must(err)
		for pl.Calls("mempalace_add_drawer") == before {
			if time.Since(t) > 10*time.Second {
				log.Fatalf("%s: the write was never sent", bin)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return cpuMsPerS, wakesPerS, lat
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
