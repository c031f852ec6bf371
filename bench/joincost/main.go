// Command joincost measures `devbox-config join` against real MemPalace
// serve, as processes: a local palace real MemPalace wrote (drawers, a
// quarter of them longer than its chunk size, diaries, open and closed
// facts, filed through its own stdio server), joined without --verify
// into a fresh `mempalace serve`, side by side with the same records
// added to another fresh serve by a plain MCP client making the same
// calls one after another over HTTP (the primary's own cost: the floor).
// The two alternate which goes first, round by round; each is timed on the
// wall clock and in CPU time (serve's processes, the embedding server, the
// client or the join and its local server), which other work on a shared
// machine disturbs far less. Verification is timed apart: a second join
// with --verify all, which sends nothing and compares every drawer and
// diary by content.
//
//	scripts/build /tmp/devbox-config
//	go run ./bench/joincost -bin /tmp/devbox-config -rounds 5
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

var (
	bin       = flag.String("bin", "", "devbox-config binary (scripts/build)")
	rounds    = flag.Int("rounds", 3, "rounds of (direct, join), the order alternating")
	nDrawers  = flag.Int("drawers", 2000, "drawers in the local palace")
	nDiaries  = flag.Int("diaries", 200, "diary entries in the local palace")
	nFacts    = flag.Int("facts", 100, "facts in the local palace (half of them closed)")
	showCalls = flag.Bool("calls", false, "print the join's calls by tool (stderr)")
)

const token = "joincost-primary-token"

func main() {
	flag.Parse()
	if *bin == "" {
		log.Fatal("need -bin (scripts/build /tmp/devbox-config)")
	}
	sc, err := realpalace.NewScratch("joincost")
	if err != nil {
		log.Fatal(err)
	}
	defer sc.Close()
	open := func(name string) *realpalace.Palace {
		p, err := sc.Open(name)
		if err != nil {
			log.Fatal(err)
		}
		return p
	}

	local := open("local")
	calls := records()
	start := time.Now()
	seedLocal(local, calls)
	fmt.Printf("MemPalace %s; a local palace of %d drawers (%d longer than the 800-character chunk), %d diary entries and %d facts (%d closed), filed through mempalace-mcp in %s.\n\n",
		realpalace.Version, *nDrawers, chunked(calls), *nDiaries, *nFacts, *nFacts/2, time.Since(start).Round(time.Second))

	fmt.Println("| round | first | direct: wall | join --verify 0: wall | join / direct, wall | direct: CPU = serve + client and embedder | join: CPU = serve + embedder + join and its local server | join / direct, CPU | join: read + queue + send | verify all (second join) |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	var wallRatio, cpuRatio []float64
	var verifies []time.Duration
	for r := range *rounds {
		var d, j, v time.Duration
		var dc, jc cpu
		var phases string
		first := "direct"
		if r%2 == 1 {
			first = "join"
		}
		for k := range 2 {
			if (k == 0) == (first == "direct") {
				d, dc = direct(open(fmt.Sprintf("r%d-direct", r)), calls)
			} else {
				j, jc, v, phases = joinOnce(local, open(fmt.Sprintf("r%d-join", r)))
			}
		}
		wr, cr := j.Seconds()/d.Seconds(), jc.total().Seconds()/dc.total().Seconds()
		wallRatio, cpuRatio, verifies = append(wallRatio, wr), append(cpuRatio, cr), append(verifies, v)
		fmt.Printf("| %d | %s | %s | %s | %.3f | %s | %s | %.3f | %s | %s |\n", r+1, first, secs(d), secs(j), wr, dc, jc, cr, phases, secs(v))
	}
	fmt.Printf("\nmedian of the rounds: join / direct %.3f wall, %.3f CPU; verification %s\n", medianF(wallRatio), medianF(cpuRatio), secs(median(verifies)))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// cpu is where one side's CPU time went: serve's processes, this process
// (the plain client and the embedding server, or the embedding server
// alone), the join process with its local server.
type cpu struct{ serve, self, join time.Duration }

func (c cpu) total() time.Duration { return c.serve + c.self + c.join }

func (c cpu) String() string {
	s := fmt.Sprintf("%s = %.1f + %.1f", secs(c.total()), c.serve.Seconds(), c.self.Seconds())
	if c.join > 0 {
		s += fmt.Sprintf(" + %.1f", c.join.Seconds())
	}
	return s
}

func median(x []time.Duration) time.Duration {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// records are the calls that make the local palace, and that the plain
// client makes again: add_drawer, diary_write, kg_add (open and closed).
func records() []realpalace.Call {
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 600)
	for i := range words {
		words[i] = fmt.Sprintf("%c%c%c%c%d", 'a'+rng.IntN(26), 'a'+rng.IntN(26), 'a'+rng.IntN(26), 'a'+rng.IntN(26), i)
	}
	text := func(n int, tag string) string {
		var b strings.Builder
		b.WriteString(tag)
		for b.Len() < n {
			b.WriteByte(' ')
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	var out []realpalace.Call
	wings := []string{"project", "shared", "research", "ops"}
	for i := range *nDrawers {
		n := 200 + rng.IntN(600) // 200-800
		if i%4 == 0 {
			n = 900 + rng.IntN(1200) // chunked: 900-2100
		}
		out = append(out, realpalace.Drawer(wings[i%len(wings)], fmt.Sprintf("room%d", i%7), text(n, fmt.Sprintf("drawer %d:", i))))
	}
	for i := range *nDiaries {
		out = append(out, realpalace.DiaryEntry([]string{"opencode", "pi"}[i%2], text(100+rng.IntN(500), fmt.Sprintf("diary %d:", i))))
	}
	for i := range *nFacts {
		if i%2 == 0 {
			out = append(out, realpalace.Fact(fmt.Sprintf("service%d", i), "runs_on", fmt.Sprintf("host%d", i%9), "2026-01-01", ""))
		} else {
			out = append(out, realpalace.Fact(fmt.Sprintf("service%d", i), "ran_on", fmt.Sprintf("host%d", i%9), "2025-01-01", "2025-12-31"))
		}
	}
	return out
}

func chunked(calls []realpalace.Call) int {
	n := 0
	for _, c := range calls {
		if s, _ := c.Args["content"].(string); len(s) > 800 {
			n++
		}
	}
	return n
}

func seedLocal(p *realpalace.Palace, calls []realpalace.Call) {
	s, err := p.StartStdio()
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			log.Fatal(err)
		}
	}()
	mustAll(s.Client, calls)
}

func mustAll(c *realpalace.Client, calls []realpalace.Call) {
	for _, x := range calls {
		r, err := c.Call(x.Tool, x.Args)
		if err != nil || r["success"] == false || r["error"] != nil {
			log.Fatalf("%s %v: %v %v", x.Tool, x.Args, r, err)
		}
	}
}

// direct is the plain client on a fresh serve: every call, one after
// another, over HTTP. It returns the wall time and the CPU time serve,
// and this client with the embedder, used meanwhile.
func direct(p *realpalace.Palace, calls []realpalace.Call) (time.Duration, cpu) {
	srv, err := p.StartServe(token)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	c := realpalace.HTTPClient(srv.URL, token)
	g0, s0, start := groupCPU(srv.Pid()), selfCPU(), time.Now()
	mustAll(c, calls)
	wall := time.Since(start)
	return wall, cpu{serve: groupCPU(srv.Pid()) - g0, self: selfCPU() - s0}
}

// report is what joincost reads of join --json.
type report struct {
	Sent     map[string]int     `json:"sent"`
	Skipped  map[string]int     `json:"skipped"`
	Verified int                `json:"verified"`
	Seconds  map[string]float64 `json:"seconds"`
	Calls    map[string]int     `json:"calls"`
	Failed   []any              `json:"failed"`
	Mismatch []any              `json:"mismatches"`
}

// joinOnce joins local into a fresh serve on p without verification
// (timed: wall, and the CPU time of serve, the embedder, the join and its
// local server), then again with --verify all (timed apart), and checks
// both.
func joinOnce(local, p *realpalace.Palace) (took time.Duration, used cpu, verify time.Duration, phases string) {
	srv, err := p.StartServe(token)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	// A fresh join: the local palace keeps no trace of another round's.
	for _, pat := range []string{"join-outbox-*", "bootstrap.json*"} {
		old, _ := filepath.Glob(filepath.Join(local.Dir, "edge", pat))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				log.Fatal(err)
			}
		}
	}
	env := append(local.Env(),
		"MEMPALACE_REMOTE_URL="+srv.URL, "MEMPALACE_REMOTE_TOKEN="+token,
		"MEMPALACE_EDGE_CHILD="+strings.Join(local.MCPCommand(), " "), "MEMPALACE_PALACE_PATH="+local.Dir,
		"MEMPALACE_AGENT_NAME=opencode", "MEMPALACE_ORIGIN_LABEL=bench", "MEMPALACE_EDGE_TIMEOUT=60s")
	run := func(verify string) (report, time.Duration, cpu) {
		cmd := exec.Command(*bin, "join", "--json", "--verify", verify)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		g0, s0, start := groupCPU(srv.Pid()), selfCPU(), time.Now()
		err := cmd.Run()
		took := time.Since(start)
		used := cpu{serve: groupCPU(srv.Pid()) - g0, self: selfCPU() - s0}
		if cmd.ProcessState != nil { // the join and its local server (waited for)
			used.join = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		var r report
		if jerr := json.Unmarshal(out.Bytes(), &r); err != nil || jerr != nil || len(r.Failed) > 0 || len(r.Mismatch) > 0 {
			log.Fatalf("join --verify %s: %v %v\n%s\n%s", verify, err, jerr, out.String(), errb.String())
		}
		return r, took, used
	}
	r, took, used := run("0")
	want := map[string]int{"drawers": *nDrawers, "diaries": *nDiaries, "facts": *nFacts}
	for k, n := range want {
		if r.Sent[k] != n {
			log.Fatalf("join sent %v, want %v", r.Sent, want)
		}
	}
	phases = fmt.Sprintf("%.1f + %.1f + %.1f s", r.Seconds["read"], r.Seconds["queue"], r.Seconds["send"])
	if *showCalls {
		fmt.Fprintf(os.Stderr, "join calls: %v\n", r.Calls)
	}
	v, vtook, _ := run("all")
	if v.Verified != *nDrawers+*nDiaries || v.Sent["drawers"]+v.Sent["diaries"]+v.Sent["facts"] != 0 {
		log.Fatalf("the verifying join: verified %d, sent %v", v.Verified, v.Sent)
	}
	return took, used, vtook, phases
}
