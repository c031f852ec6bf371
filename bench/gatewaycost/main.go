// Command gatewaycost measures what `devbox-config gateway` adds to a call
// in front of real MemPalace serve, as processes: the pinned release from
// testbed/realpalace (serve, with its embedder), the gateway binary, and
// this program as the client. Every call is made twice, directly to serve
// and through the gateway, in an order drawn anew each round, and the median
// of the per-pair differences is what the gateway adds; reads as a device
// with an exact wing grant (the issue's case), writes as the same device.
// Every client is on the edge's transport (warmconn). -relay measures, in
// the same rounds, a relay process that forwards and does nothing else:
// the floor under the gateway's cost on this machine. "gateway's own" is
// read from the gateway's audit log: each call's time inside the gateway
// less the time it had a call to serve in flight (latency_ms -
// upstream_ms), what the gateway adds without the hop between processes;
// the baseline's own is read from its log, in the same rounds.
//
//	scripts/build /tmp/devbox-config
//	go run ./bench/gatewaycost -gateway /tmp/devbox-config -relay -n 300
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
	"github.com/joakimp/devbox-config/warmconn"
)

var (
	gatewayBin = flag.String("gateway", "", "devbox-config binary (scripts/build)")
	baseline   = flag.String("baseline", "", "another devbox-config binary, measured in the same run (e.g. the commit before a change)")
	n          = flag.Int("n", 200, "rounds of calls per measurement")
	perWing    = flag.Int("drawers", 60, "drawers seeded in each of three wings")
	relay      = flag.Bool("relay", false, "also measure a relay process that forwards each call to serve over the gateway's transport and does nothing else: the floor under any second process")
	only       = flag.String("only", "", "measure only the calls whose label contains this")
)

const upstreamToken = "gatewaycost-upstream-token"

func main() {
	if spec := os.Getenv(relayEnv); spec != "" {
		runRelay(spec)
		return
	}
	flag.Parse()
	// A failure panics (log.Panic) rather than exits, so that the deferred
	// stops below take serve, the gateways and the relay down with this
	// program; this is the last of them to run.
	defer func() {
		if recover() != nil {
			os.Exit(1)
		}
	}()
	if *gatewayBin == "" {
		log.Panic("need -gateway (scripts/build /tmp/devbox-config)")
	}
	sc, err := realpalace.NewScratch("gatewaycost")
	if err != nil {
		log.Panic(err)
	}
	defer sc.Close()
	palace, err := sc.Open("serve")
	if err != nil {
		log.Panic(err)
	}
	serve, err := palace.StartServe(upstreamToken)
	if err != nil {
		log.Panic(err)
	}
	defer serve.Stop()
	seed(serve.Client)

	clients := []client{newClient(serve.URL, upstreamToken)}
	var audits []string // each gateway's audit log, the first's first
	for i, bin := range []string{*gatewayBin, *baseline} {
		if bin == "" {
			continue
		}
		dir := filepath.Join(sc.Dir, strconv.Itoa(i))
		gw, token := startGateway(dir, bin, serve.URL)
		defer gw.Process.Signal(os.Interrupt)
		clients = append(clients, newClient(gw.url, token))
		audits = append(audits, filepath.Join(dir, "audit.jsonl"))
	}
	if *relay {
		r := startRelay(serve.URL)
		defer r.Process.Signal(os.Interrupt)
		clients = append(clients, newClient(r.url, upstreamToken))
	}

	fmt.Printf("MemPalace %s serve, %d drawers in each of 3 wings of about 500 characters; a device that reads one wing (exact grant); %d rounds, in an order drawn anew each round.\n\n", realpalace.Version, *perWing, *n)
	head := "| call | direct median | gateway median | added (median of rounds) | added p90 | gateway's own (median) |"
	rule := "| --- | --- | --- | --- | --- | --- |"
	if *baseline != "" {
		head += " baseline added (median) | baseline's own (median) |"
		rule += " --- | --- |"
	}
	if *relay {
		head += " relay added (median) |"
		rule += " --- |"
	}
	fmt.Println(head)
	fmt.Println(rule)
	for _, c := range []struct {
		label, tool string
		args        func(i int) map[string]any
	}{
		{"read: search, wing named", "mempalace_search", fixed(map[string]any{"query": "release note edge", "wing": "shared"})},
		{"read: search, palace-wide", "mempalace_search", fixed(map[string]any{"query": "release note edge"})},
		{"read: list_drawers, wing named", "mempalace_list_drawers", fixed(map[string]any{"wing": "shared"})},
		{"read: list_drawers, palace-wide", "mempalace_list_drawers", fixed(map[string]any{})},
		{"read: kg_stats", "mempalace_kg_stats", fixed(map[string]any{})},
		{"read: diary_read", "mempalace_diary_read", fixed(map[string]any{"agent_name": "opencode", "wing": "shared"})},
		{"write: add_drawer", "mempalace_add_drawer", func(i int) map[string]any {
			return map[string]any{"wing": "shared", "room": "bench", "content": fmt.Sprintf("write %d of the gateway cost run %d", i, time.Now().UnixNano())}
		}},
		{"write: kg_add (closed fact)", "mempalace_kg_add", func(i int) map[string]any {
			return map[string]any{"subject": "bench", "predicate": "measured", "object": "run " + strconv.Itoa(i), "valid_from": "2026-01-01", "valid_to": "2026-01-02"}
		}},
	} {
		if !strings.Contains(c.label, *only) {
			continue
		}
		measure(c.label, c.tool, c.args, clients, audits)
	}
}

func fixed(a map[string]any) func(int) map[string]any { return func(int) map[string]any { return a } }

// measure makes the call directly and through each gateway in turn, in
// an order drawn anew every round, and prints one table row: what the
// first gateway adds, and what the baseline adds and its own time if
// there is one. (A rotating order put the first gateway right after the
// direct call every time, behind serve's accept of the connection that
// call left dialling: about 0.1 ms the baseline's position did not pay.)
func measure(label, tool string, args func(int) map[string]any, clients []client, audits []string) {
	from := make([]int64, len(audits))
	for i, a := range audits {
		from[i] = fileSize(a)
	}
	order := rand.New(rand.NewPCG(1, uint64(len(label))))
	took := make([][]time.Duration, len(clients))
	added := make([][]time.Duration, len(clients))
	for i := range *n {
		round := make([]time.Duration, len(clients))
		for k, j := range order.Perm(len(clients)) {
			round[j] = clients[j].call(tool, args(len(clients)*i+k))
		}
		for j := range clients {
			took[j] = append(took[j], round[j])
			added[j] = append(added[j], round[j]-round[0])
		}
	}
	ms := func(x time.Duration) string { return fmt.Sprintf("%.2f ms", float64(x.Microseconds())/1000) }
	plus := func(x time.Duration) string { return fmt.Sprintf("%+.2f ms", float64(x.Microseconds())/1000) }
	row := fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", label, ms(median(took[0])), ms(median(took[1])), plus(median(added[1])), plus(pct(added[1], 90)), ownMedian(ownTimes(audits[0], from[0], tool)))
	for j := 2; j < len(clients); j++ {
		row += " " + plus(median(added[j])) + " |"
		if j-1 < len(audits) { // a baseline gateway: its own time too
			row += " " + ownMedian(ownTimes(audits[j-1], from[j-1], tool)) + " |"
		}
	}
	fmt.Println(row)
}

func median(x []time.Duration) time.Duration { return pct(x, 50) }

// ownMedian is "n/a" for a gateway whose audit lines do not say upstream_ms.
func ownMedian(own []time.Duration) string {
	if len(own) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f ms", float64(median(own).Microseconds())/1000)
}

// fileSize is 0 for a file not written yet.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	} else if err != nil {
		log.Panic(err)
	}
	return fi.Size()
}

// ownTimes reads the gateway's audit lines for tool from offset on: each
// call's time in the gateway, less the time it had a call to serve in
// flight (latency_ms - upstream_ms), which is the gateway's own time
// without the hop between processes.
func ownTimes(audit string, offset int64, tool string) []time.Duration {
	b, err := os.ReadFile(audit)
	if err != nil {
		log.Panic(err)
	}
	var own []time.Duration
	for line := range bytes.Lines(b[offset:]) {
		var e gateway.Entry
		if json.Unmarshal(line, &e) != nil {
			// the gateway writes a line after its answer, so the last one
			// may be half written when this reads, or split by offset
			continue
		}
		if e.Tool == tool && e.UpstreamMS > 0 {
			own = append(own, time.Duration((e.LatencyMS-e.UpstreamMS)*float64(time.Millisecond)))
		}
	}
	return own // none from a gateway built before upstream_ms
}

func pct(x []time.Duration, p int) time.Duration {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)*p/100]
}

// client is this program as an MCP client over HTTP, on the transport
// the edge uses for its primary (warmconn): a connection dialled ahead of
// each call to serve, which closes every connection after its answer, and
// one kept alive to the gateway.
type client struct {
	url, token string
	hc         *http.Client
}

func newClient(url, token string) client {
	warm, err := warmconn.New(url, http.DefaultTransport)
	if err != nil {
		log.Panic(err)
	}
	return client{url: url, token: token, hc: &http.Client{Timeout: 60 * time.Second, Transport: warm}}
}

func (c client) call(tool string, args map[string]any) time.Duration {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		log.Panicf("%s: %v", tool, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	var r struct {
		Result struct{ Content []struct{ Text string } } `json:"result"`
		Error  *struct{ Message string }                 `json:"error"`
	}
	if json.Unmarshal(b, &r) != nil || r.Error != nil || len(r.Result.Content) == 0 || strings.Contains(r.Result.Content[0].Text, `"success": false`) {
		log.Panicf("%s via %s: %s", tool, c.url, b)
	}
	return took
}

// seed files three wings of drawers, a diary entry and a fact through
// serve's own MCP tools.
func seed(c *realpalace.Client) {
	para := strings.Repeat("the edge keeps the palace writable while the primary is away. ", 8)
	for _, w := range []string{"shared", "wing_opencode", "private_desk"} {
		for i := range *perWing {
			if _, err := c.Call("mempalace_add_drawer", map[string]any{"wing": w, "room": fmt.Sprintf("room%d", i%4), "content": fmt.Sprintf("release note %d in %s: %s", i, w, para)}); err != nil {
				log.Panic(err)
			}
		}
	}
	for _, call := range []realpalace.Call{
		{Tool: "mempalace_diary_write", Args: map[string]any{"agent_name": "opencode", "entry": "measured the gateway", "wing": "shared"}},
		realpalace.Fact("edge", "uses", "sqlite", "", ""),
	} {
		if _, err := c.Call(call.Tool, call.Args); err != nil {
			log.Panic(err)
		}
	}
}

// proc is a child process serving MCP at url.
type proc struct {
	*exec.Cmd
	url string
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProc starts cmd, which is to listen on addr, and waits (ten
// seconds at most) until it does; stderr says why it did not.
func startProc(what string, cmd *exec.Cmd, addr string, stderr func() string) *proc {
	if err := cmd.Start(); err != nil {
		log.Panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &proc{Cmd: cmd, url: "http://" + addr + "/mcp"}
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Panicf("the %s did not listen: %s", what, stderr())
	return nil
}

// startGateway writes a gateway config with one device that reads and
// writes the shared wing, reads the knowledge graph and acts as
// opencode@laptop, and starts the gateway binary in front of upstream.
func startGateway(dir, bin, upstream string) (*proc, string) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Panic(err)
	}
	cfgFile := filepath.Join(dir, "gateway.jsonc")
	cfg := &gateway.Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"),
		Devices: []gateway.Device{{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write", Agents: []string{"opencode@laptop"}, ReadRate: 1e6, WriteRate: 1e6}}}
	key, err := gateway.LoadSecret(cfg)
	if err != nil {
		log.Panic(err)
	}
	token, err := gateway.Issue(key, &cfg.Devices[0], time.Now())
	if err != nil {
		log.Panic(err)
	}
	if err := cfg.Save(cfgFile); err != nil {
		log.Panic(err)
	}
	addr := freeAddr()
	cmd := exec.Command(bin, "gateway", "--listen", addr, "--upstream", upstream, "--config", cfgFile)
	cmd.Env = append(os.Environ(), "MEMPALACE_UPSTREAM_TOKEN="+upstreamToken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return startProc("gateway", cmd, addr, stderr.String), token
}
