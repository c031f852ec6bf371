// Command edgebench measures `devbox-config edge` as a process, side by
// side with what it replaces, on this machine:
//
//   - initialize latency after process start with the primary unreachable;
//
//   - added latency on a local read (edge -> child vs the child directly);
//
//   - merged search vs the slower of the two sides asked directly;
//
//   - reads with the primary down, once the breaker is open, vs local;
//
//   - resident memory of the edge, and of the npm mcp-remote bridge doing
//     plain remote pass-through against the same primary, with its latency.
//
//     go run ./bench/edgebench -edge /tmp/devbox-config -child /tmp/mempalace-mcp -mcp-remote ~/.cache/devbox-config/realclients/node_modules/.bin/mcp-remote
//
// Calls alternate between the compared paths so noise hits both alike.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/fakepalace"
)

const token = "bench-token"

var (
	edgeBin   = flag.String("edge", "", "devbox-config binary")
	childBin  = flag.String("child", "", "local palace server (the fakepalace binary)")
	remoteBin = flag.String("mcp-remote", "", "mcp-remote (npm) for the side-by-side; empty skips it")
	n         = flag.Int("n", 500, "calls per measurement")
	floorBin  = flag.String("floor", "", "floorrelay binary: the least a stdio-to-HTTP proxy does, beside the merged search; empty skips it")
	primLat   = flag.Duration("primary-latency", 20*time.Millisecond, "latency added to the primary's search")
)

func main() {
	flag.Parse()
	if *edgeBin == "" || *childBin == "" {
		log.Fatal("need -edge and -child")
	}
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "edgebench")
	defer os.RemoveAll(tmp)

	// The primary is a process of its own, as over a network: a client in
	// the same process as the server would skip the cross-process wake-ups
	// the edge pays, and flatter the direct side of every comparison.
	primary := startPrimary(*childBin, filepath.Join(tmp, "primary"))
	defer primary.stop()
	palace := filepath.Join(tmp, "palace")

	fmt.Println("| measurement | median | p90 | compared with | median | p90 |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")

	// 1. initialize with the primary unreachable, from process start.
	dead := "http://127.0.0.1:" + strconv.Itoa(closedPort()) + "/mcp"
	var inits []time.Duration
	for i := 0; i < 30; i++ {
		start := time.Now()
		s := connect(ctx, edgeEnv(dead, palace), *edgeBin, "edge")
		inits = append(inits, time.Since(start))
		s.Close()
	}
	row("initialize after process start, primary unreachable", inits, "", nil)

	// Seed: one drawer in both palaces.
	edge := connect(ctx, edgeEnv(primary.url, palace), *edgeBin, "edge")
	defer edge.Close()
	call(ctx, edge, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the edge benchmark drawer about outbox latency"})
	waitFor(func() bool { return len(primary.drawers()) == 1 })
	for i := 0; i < 50; i++ {
		call(ctx, edge, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": fmt.Sprintf("filler drawer number %d about nothing much", i)})
	}
	// Replication delay: from a write's answer to its arrival on the
	// primary (the flusher is woken by the enqueue, not a polling interval).
	var delays []time.Duration
	for i := 0; i < 100; i++ {
		content := fmt.Sprintf("replication probe %d", i)
		call(ctx, edge, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "probe", "content": content})
		start := time.Now()
		id := fakepalace.DrawerID("w", "probe", content)
		for !primary.has(id) {
			time.Sleep(200 * time.Microsecond)
		}
		delays = append(delays, time.Since(start))
	}
	row("replication delay: write answered -> on the primary", delays, "", nil)
	child := connect(ctx, append(os.Environ(), "MEMPALACE_PALACE_PATH="+palace), *childBin)
	defer child.Close()
	id := fakepalace.DrawerID("w", "r", "the edge benchmark drawer about outbox latency")

	// 2. local read: edge -> child vs child directly. The edge's own CPU
	// time per call is the figure noise cannot move much.
	idle0 := cpuTime(edge)
	time.Sleep(5 * time.Second)
	fmt.Printf("|   edge CPU while idle, per second | %s | | | | |\n", ms((cpuTime(edge)-idle0)/5))
	cpu0 := cpuTime(edge)
	a, b := alternate(*n, func() { call(ctx, edge, "mempalace_get_drawer", map[string]any{"drawer_id": id}) },
		func() { call(ctx, child, "mempalace_get_drawer", map[string]any{"drawer_id": id}) })
	cpuPer := (cpuTime(edge) - cpu0) / time.Duration(*n+20)
	row("local read (get_drawer) through the edge", a, "the child directly", b)
	fmt.Printf("|   added by the edge (median) | %s | | | | |\n", ms(median(a)-median(b)))
	fmt.Printf("|   edge CPU time per local read (user+system) | %s | | | | |\n", ms(cpuPer))

	// 3. merged search vs the slower side asked directly (primary has
	// injected latency, as a real primary over a network does).
	primary.setLatency("mempalace_search", *primLat)
	prim := connectHTTP(ctx, primary.url)
	defer prim.Close()
	q := map[string]any{"query": "outbox latency"}
	search := func(s *mcp.ClientSession) func() { return func() { call(ctx, s, "mempalace_search", q) } }
	paths := []func(){search(edge), search(prim)}
	if *floorBin != "" {
		floor := connect(ctx, append(os.Environ(), "FLOOR_URL="+primary.url, "FLOOR_TOKEN="+token), *floorBin)
		defer floor.Close()
		paths = append(paths, search(floor))
	}
	t := alternateN(*n/5, paths...)
	m, p := t[0], t[1]
	row(fmt.Sprintf("merged search (primary +%v)", *primLat), m, "the primary's search directly (the slower side)", p)
	fmt.Printf("|   merged minus slower side (median) | %s | | | | |\n", ms(median(m)-median(p)))
	if len(t) == 3 {
		f := t[2]
		row("the primary's search through floorrelay (one stdio hop, nothing else)", f, "", nil)
		fmt.Printf("|   floorrelay minus the primary directly (median) | %s | | | | |\n", ms(median(f)-median(p)))
		fmt.Printf("|   merged minus floorrelay: the edge's own share (median) | %s | | | | |\n", ms(median(m)-median(f)))
	}
	primary.setLatency("mempalace_search", 0)

	// 5. memory and mcp-remote side by side, while the primary is up.
	edgeRSS := rss(edge)
	if *remoteBin != "" {
		home, _ := os.MkdirTemp(tmp, "home")
		env := append(os.Environ(), "HOME="+home, "AUTH_HEADER=Bearer "+token)
		remote := connect(ctx, env, *remoteBin, primary.url, "--transport", "http-only", "--header", "Authorization:${AUTH_HEADER}")
		defer remote.Close()
		e2, r2 := alternate(*n, func() { call(ctx, edge, "mempalace_kg_stats", nil) }, func() { call(ctx, remote, "mempalace_kg_stats", nil) })
		row("remote read (kg_stats) through the edge", e2, "through mcp-remote", r2)
		fmt.Printf("| resident memory, edge | %.1f MB | | mcp-remote (node) | %.1f MB | |\n", edgeRSS, rss(remote))
	} else {
		fmt.Printf("| resident memory, edge | %.1f MB | | | | |\n", edgeRSS)
	}

	// 4. primary down, breaker open: primary-first read vs local.
	primary.stop()
	call(ctx, edge, "mempalace_kg_stats", nil) // opens the breaker
	d, l := alternate(*n, func() { call(ctx, edge, "mempalace_kg_stats", nil) }, func() { call(ctx, child, "mempalace_kg_stats", nil) })
	row("read (kg_stats) with the primary down, breaker open", d, "the child directly", l)
	fmt.Printf("|   added by the edge (median) | %s | | | | |\n", ms(median(d)-median(l)))
}

func edgeEnv(url, palace string) []string {
	return append(os.Environ(), "MEMPALACE_REMOTE_URL="+url, "MEMPALACE_REMOTE_TOKEN="+token,
		"MEMPALACE_EDGE_CHILD="+*childBin, "MEMPALACE_PALACE_PATH="+palace, "MEMPALACE_EDGE_LOG=error")
}

// sessions keeps each client's process for rss().
var procs = map[*mcp.ClientSession]*exec.Cmd{}

func connect(ctx context.Context, env []string, name string, args ...string) *mcp.ClientSession {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	s, err := mcp.NewClient(&mcp.Implementation{Name: "edgebench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	must(err)
	procs[s] = cmd
	return s
}

func connectHTTP(ctx context.Context, url string) *mcp.ClientSession {
	hc := &bearerClient{}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "edgebench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc.client(), DisableStandaloneSSE: true}, nil)
	must(err)
	return s
}

func call(ctx context.Context, s *mcp.ClientSession, name string, args map[string]any) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res)
		log.Fatalf("%s: %s", name, b)
	}
}

// alternate runs two paths call by call (after 20 warm-up rounds), so
// noise hits both alike.
func alternate(n int, a, b func()) (ta, tb []time.Duration) {
	t := alternateN(n, a, b)
	return t[0], t[1]
}

// alternateN is alternate for any number of paths.
func alternateN(n int, fs ...func()) [][]time.Duration {
	t := make([][]time.Duration, len(fs))
	for i := 0; i < 20; i++ {
		for _, f := range fs {
			f()
		}
	}
	for i := 0; i < n; i++ {
		for j, f := range fs {
			s := time.Now()
			f()
			t[j] = append(t[j], time.Since(s))
		}
	}
	return t
}

func row(what string, a []time.Duration, vs string, b []time.Duration) {
	if b == nil {
		fmt.Printf("| %s | %s | %s | | | |\n", what, ms(median(a)), ms(pct(a, .9)))
		return
	}
	fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", what, ms(median(a)), ms(pct(a, .9)), vs, ms(median(b)), ms(pct(b, .9)))
}

func median(d []time.Duration) time.Duration { return pct(d, .5) }

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

// rss is the resident set of a client's server process and its children
// (mcp-remote's npx/node wrapper included), in MB.
func rss(s *mcp.ClientSession) float64 {
	cmd := procs[s]
	total := 0.0
	var walk func(pid int)
	walk = func(pid int) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "VmRSS:") {
					kb, _ := strconv.Atoi(strings.Fields(l)[1])
					total += float64(kb) / 1024
				}
			}
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		for _, k := range strings.Fields(string(kids)) {
			if c, err := strconv.Atoi(k); err == nil {
				walk(c)
			}
		}
	}
	walk(cmd.Process.Pid)
	return total
}

// cpuTime is the user+system CPU time a client's server process has used
// (/proc/<pid>/stat, clock ticks of 10 ms: read it over many calls).
func cpuTime(s *mcp.ClientSession) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", procs[s].Process.Pid))
	must(err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func closedPort() int {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

func waitFor(cond func() bool) {
	for i := 0; i < 500 && !cond(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// primaryProc is the test double serving HTTP in its own process.
type primaryProc struct {
	cmd *exec.Cmd
	url string
}

func startPrimary(bin, dir string) *primaryProc {
	addr := fmt.Sprintf("127.0.0.1:%d", closedPort())
	cmd := exec.Command(bin, "--http", addr, "--state", dir)
	cmd.Env = append(os.Environ(), "MEMPALACE_MCP_HTTP_TOKEN="+token)
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	p := &primaryProc{cmd: cmd, url: "http://" + addr + "/mcp"}
	waitFor(func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return p
}

func (p *primaryProc) fake(method, path string, body any) *http.Response {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, strings.TrimSuffix(p.url, "/mcp")+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	must(err)
	return resp
}

// drawers is the set of drawer ids the primary holds.
func (p *primaryProc) drawers() map[string]bool {
	resp := p.fake("GET", "/_fake/dump", nil)
	defer resp.Body.Close()
	var st fakepalace.State
	must(json.NewDecoder(resp.Body).Decode(&st))
	ids := map[string]bool{}
	for id := range st.Drawers {
		ids[id] = true
	}
	return ids
}

// has asks the primary for one drawer (a cheap probe, unlike a dump).
func (p *primaryProc) has(id string) bool {
	body := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_get_drawer", "arguments": map[string]any{"drawer_id": id}}}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", p.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == 200 && !bytes.Contains(out, []byte("not found"))
}

func (p *primaryProc) setLatency(tool string, d time.Duration) {
	p.fake("POST", "/_fake/control", map[string]any{"latency_ms": map[string]int{tool: int(d.Milliseconds())}}).Body.Close()
}

func (p *primaryProc) stop() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

type bearerClient struct{}

func (bearerClient) client() *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
