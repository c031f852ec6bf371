package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// TestChaos: two edge processes on one palace make a random mix of writes
// while the primary is stopped and restarted, the process holding the
// flush lease is killed with SIGKILL, and the primary applies writes and
// then drops the connection. At the end the outbox drains and the primary
// must hold every acknowledged write exactly once (by content), every
// unacknowledged one at most once, and facts closed in order. Besides
// those faults, look-ups on the primary fail (JSON-RPC -32000, an "error"
// field, success:false) and writes are refused unapplied with HTTP 200 and
// success:false. CHAOS_SEED=n replays a run; CHAOS_WRITES sets the count
// (default 1000).
func TestChaos(t *testing.T) { chaos(t, false) }

// TestChaosThroughGateway is TestChaos with the edges talking to the
// primary through `devbox-config gateway` and its op-id ledger (in this
// process, as an http.Handler): restarts, drops and refusals happen behind
// it.
func TestChaosThroughGateway(t *testing.T) { chaos(t, true) }

func chaos(t *testing.T, viaGateway bool) {
	testbed.Integration(t, "chaos: builds the binary, a thousand writes through restarts and drops")
	seed := time.Now().UnixNano()
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	writes := 1000
	if s := os.Getenv("CHAOS_WRITES"); s != "" {
		writes, _ = strconv.Atoi(s)
	}
	t.Logf("chaos seed %d (replay: CHAOS_SEED=%d go test ./edge -run '%s$')", seed, seed, t.Name())
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var rngMu sync.Mutex
	rnd := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	primary, srv := startPrimary(t)
	var srvMu sync.Mutex
	palace := filepath.Join(t.TempDir(), "palace")
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	child := testbed.Self(t, fakepalace.ProgramName)
	url, token := srv.URL(), testToken
	if viaGateway {
		url, token = chaosGateway(t, srv.URL())
	}
	env := append(os.Environ(), "MEMPALACE_REMOTE_URL="+url, "MEMPALACE_REMOTE_TOKEN="+token,
		"MEMPALACE_EDGE_CHILD="+child, "MEMPALACE_PALACE_PATH="+palace, "MEMPALACE_EDGE_TIMEOUT=1s",
		"MEMPALACE_EDGE_LEASE=1s", "MEMPALACE_EDGE_LOG=error", "MEMPALACE_ORIGIN_DEVICE=chaos-dev")

	type agent struct {
		mu   sync.Mutex
		cmd  *exec.Cmd
		s    *mcp.ClientSession
		gen  int
		name string
	}
	spawn := func(a *agent) {
		cmd := exec.Command(bin, "edge")
		cmd.Env = env
		s, err := mcp.NewClient(&mcp.Implementation{Name: a.name, Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("spawn %s: %v", a.name, err)
		}
		a.mu.Lock()
		a.cmd, a.s = cmd, s
		a.gen++
		a.mu.Unlock()
	}
	agents := []*agent{{name: "A"}, {name: "B"}}
	for _, a := range agents {
		spawn(a)
	}
	defer func() {
		for _, a := range agents {
			a.mu.Lock()
			a.s.Close()
			a.mu.Unlock()
		}
	}()

	// What the agents did, and what was acknowledged.
	type write struct {
		tool  string
		args  map[string]any
		acked bool
	}
	var logMu sync.Mutex
	var done []write
	openFacts := map[string][]string{} // agent -> open fact objects it may invalidate or supersede
	var eventIDs []string              // acknowledged events on the primary, to ack

	var wg sync.WaitGroup
	per := writes / len(agents)
	var faultMu sync.Mutex
	kills, restarts, drops, lookups, refusals := 0, 0, 0, 0, 0
	enough := func() bool { // every fault at least three times
		faultMu.Lock()
		defer faultMu.Unlock()
		return kills >= 3 && restarts >= 3 && drops >= 3 && lookups >= 3 && refusals >= 3
	}
	for ai, a := range agents {
		wg.Add(1)
		go func(ai int, a *agent) {
			defer wg.Done()
			for i := 0; i < 3*per && (i < per || !enough()); i++ {
				tag := fmt.Sprintf("%s-%d", a.name, i)
				var tool string
				var args map[string]any
				switch k := rnd(14); {
				case k < 3:
					tool, args = "mempalace_add_drawer", map[string]any{"wing": "chaos", "room": "r", "content": "small drawer " + tag}
				case k < 4:
					tool, args = "mempalace_add_drawer", map[string]any{"wing": "chaos", "room": "r", "content": strings.Repeat("chunked drawer "+tag+" ", 90)}
				case k < 6:
					tool, args = "mempalace_diary_write", map[string]any{"agent_name": "opencode", "entry": "diary " + tag}
				case k < 7:
					tool, args = "mempalace_kg_add", map[string]any{"subject": "s" + a.name, "predicate": "had", "object": "closed " + tag, "valid_from": "2026-01-01", "valid_to": "2026-02-01"}
				case k < 9:
					tool, args = "mempalace_kg_add", map[string]any{"subject": "s" + a.name, "predicate": "has", "object": "open " + tag}
				case k < 11:
					logMu.Lock()
					objs := openFacts[a.name]
					logMu.Unlock()
					if len(objs) == 0 {
						i--
						continue
					}
					obj := objs[rnd(len(objs))]
					tool, args = "mempalace_kg_invalidate", map[string]any{"subject": "s" + a.name, "predicate": "has", "object": obj, "ended": "2026-05-01"}
					if k == 10 {
						tool, args = "mempalace_kg_supersede", map[string]any{"subject": "s" + a.name, "predicate": "has", "old_object": obj, "new_object": "superseding " + tag, "at": "2026-05-01"}
					}
				case k < 12:
					logMu.Lock()
					var target string
					if len(eventIDs) > 0 {
						target = eventIDs[rnd(len(eventIDs))]
					}
					logMu.Unlock()
					if target == "" {
						i--
						continue
					}
					tool, args = "mempalace_event_ack", map[string]any{"event_id": target, "from_agent": a.name + "@chaos", "status": "applied", "body": "ack " + tag}
				default:
					tool, args = "mempalace_event_append", map[string]any{"type": "chaos.note", "stream": "chaos", "room": "r", "from_agent": a.name + "@chaos", "body": "event " + tag}
				}
				a.mu.Lock()
				s := a.s
				a.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				cancel()
				acked := err == nil && !res.IsError && okResult(res)
				logMu.Lock()
				if (tool == "mempalace_kg_invalidate" || tool == "mempalace_kg_supersede") && acked {
					old, _ := args["object"].(string)
					if tool == "mempalace_kg_supersede" {
						old = args["old_object"].(string)
						openFacts[a.name] = append(openFacts[a.name], args["new_object"].(string))
					}
					objs := openFacts[a.name]
					for j, o := range objs {
						if o == old {
							openFacts[a.name] = append(objs[:j], objs[j+1:]...)
							break
						}
					}
				}
				if tool == "mempalace_event_append" && acked {
					if id := eventID(res); id != "" {
						eventIDs = append(eventIDs, id)
					}
				}
				done = append(done, write{tool, args, acked})
				if tool == "mempalace_kg_add" && args["valid_to"] == nil && acked {
					openFacts[a.name] = append(openFacts[a.name], args["object"].(string))
				}
				logMu.Unlock()
				if err != nil { // killed under us (or broken): end it and start another
					a.mu.Lock()
					stale := a.s == s
					a.mu.Unlock()
					if stale {
						if !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "EOF") {
							t.Logf("%s: %s: %v (restarting the edge)", a.name, tool, err)
						}
						s.Close()
						spawn(a)
					}
				}
			}
		}(ai, a)
	}

	// The chaos monkey.
	stop := make(chan struct{})
	var monkey sync.WaitGroup
	monkey.Add(1)
	go func() {
		defer monkey.Done()
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(200+rnd(500)) * time.Millisecond):
			}
			switch round % 5 { // every fault, several times, at random moments
			case 0: // primary down for a while
				srvMu.Lock()
				srv.Stop()
				time.Sleep(time.Duration(200+rnd(800)) * time.Millisecond)
				if err := srv.Start(""); err != nil {
					t.Errorf("restart primary: %v", err)
				}
				srvMu.Unlock()
				faultMu.Lock()
				restarts++
				faultMu.Unlock()
			case 3: // a look-up fails, in one of the ways MemPalace's do
				kinds := []fakepalace.FaultKind{fakepalace.FailInternal, fakepalace.FailErrorField, fakepalace.FailSuccessFalse}
				reads := []string{"mempalace_kg_query", "mempalace_event_list", "mempalace_list_drawers"}
				srv.FailTool(reads[rnd(len(reads))], 1+rnd(2), kinds[rnd(len(kinds))])
				faultMu.Lock()
				lookups++
				faultMu.Unlock()
			case 4: // a write refused unapplied: HTTP 200, success:false
				tools := []string{"mempalace_diary_write", "mempalace_event_append", "mempalace_kg_add", "mempalace_add_drawer", "mempalace_event_ack"}
				kinds := []fakepalace.FaultKind{fakepalace.FailSuccessFalse, fakepalace.FailErrorField}
				srv.FailTool(tools[rnd(len(tools))], 1, kinds[rnd(len(kinds))])
				faultMu.Lock()
				refusals++
				faultMu.Unlock()
			case 1: // a write lands and its answer is lost
				tools := []string{"mempalace_diary_write", "mempalace_event_append", "mempalace_kg_add", "mempalace_kg_invalidate", "mempalace_kg_supersede", "mempalace_event_ack", "mempalace_add_drawer"}
				srv.DropAfterApplyTool(tools[rnd(len(tools))], 1)
				faultMu.Lock()
				drops++
				faultMu.Unlock()
			case 2: // SIGKILL the process holding the flush lease
				// (a fresh holder may take a moment to take over from a
				// killed one, whose lease runs out after MEMPALACE_EDGE_LEASE)
				for try, killed := 0, false; try < 40 && !killed; try++ {
					pid := leasePid(palace)
					for _, a := range agents {
						a.mu.Lock()
						if pid != 0 && a.cmd != nil && a.cmd.Process != nil && a.cmd.Process.Pid == pid && a.cmd.ProcessState == nil {
							a.cmd.Process.Kill()
							faultMu.Lock()
							kills++
							faultMu.Unlock()
							killed = true
						}
						a.mu.Unlock()
					}
					if !killed {
						time.Sleep(100 * time.Millisecond)
					}
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	monkey.Wait()
	for _, tool := range []string{"", "mempalace_diary_write", "mempalace_event_append", "mempalace_kg_add", "mempalace_kg_invalidate", "mempalace_kg_supersede", "mempalace_event_ack", "mempalace_add_drawer"} {
		srv.DropAfterApplyTool(tool, 0)
		srv.FailTool(tool, 0, "")
	}
	for _, tool := range []string{"mempalace_kg_query", "mempalace_event_list", "mempalace_list_drawers"} {
		srv.FailTool(tool, 0, "")
	}
	t.Logf("%d writes; primary restarted %d times, %d flushers killed, %d answers dropped, %d look-up failures, %d writes refused with success:false", len(done), restarts, kills, drops, lookups, refusals)
	if restarts < 3 || kills < 3 || drops < 3 || lookups < 3 || refusals < 3 {
		t.Fatalf("too few faults to prove anything (restarts %d, kills %d, drops %d, look-ups %d, refusals %d); raise CHAOS_WRITES", restarts, kills, drops, lookups, refusals)
	}

	// Drain: the surviving edges flush everything. After hundreds of
	// faults some ops wait out a long backoff (up to five minutes), so the
	// operator's `edge flush` is run now and then, as a user would before
	// closing a laptop: it makes every queued op due at once (and sends,
	// when no running edge holds the flush lease).
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	deadline := time.Now().Add(90 * time.Second)
	lastFlush := time.Time{}
	for {
		if time.Since(lastFlush) > 2*time.Second {
			flush := exec.Command(bin, "edge", "flush", "--timeout", "5s")
			flush.Env = env
			flush.Run() // exit 1 while something is left; the loop checks
			lastFlush = time.Now()
		}
		st, _ := ob.Stats(context.Background())
		if st.ByState[outbox.Queued]+st.ByState[outbox.Inflight] == 0 {
			if st.ByState[outbox.Dead] > 0 {
				t.Fatalf("dead ops after chaos: %+v", st.Dead)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox did not drain: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Compare the primary with what the agents did, by content.
	st := primary.Dump()
	drawers := map[string]int{}
	for _, d := range st.Drawers {
		drawers[d.Content]++
		if d.AddedBy != "" && !d.Diary && d.AddedBy != "mcp/-/chaos-dev" && d.AddedBy != "mcp/chaos/chaos-dev" {
			t.Errorf("drawer stamped %q", d.AddedBy)
		}
	}
	events := map[string]int{}
	for _, e := range st.Events {
		events[e.Body]++
	}
	type fk struct{ s, p, o, from, to string }
	facts := map[fk]int{}
	for _, tr := range st.Triples {
		facts[fk{tr.Subject, tr.Predicate, tr.Object, deref(tr.ValidFrom), deref(tr.ValidTo)}]++
	}
	closedOrOpen := func(s, o, from string) int {
		return facts[fk{s, "has", o, from, ""}] + facts[fk{s, "has", o, from, "2026-05-01"}] + facts[fk{s, "has", o, from, "2026-05-01T00:00:00Z"}]
	}
	invalidated := map[string]bool{}
	for _, w := range done {
		if w.tool == "mempalace_kg_invalidate" && w.acked {
			invalidated[fmt.Sprint(w.args["subject"], "|", w.args["object"])] = true
		}
	}
	expectedDrawers := map[string]bool{}
	for _, w := range done {
		var n int
		switch w.tool {
		case "mempalace_add_drawer":
			n = drawers[w.args["content"].(string)]
			expectedDrawers[w.args["content"].(string)] = true
		case "mempalace_diary_write":
			n = drawers[w.args["entry"].(string)]
			expectedDrawers[w.args["entry"].(string)] = true
		case "mempalace_event_append", "mempalace_event_ack":
			n = events[w.args["body"].(string)]
		case "mempalace_kg_supersede":
			// MemPalace opens the successor at the date's midnight UTC;
			// a later close is an invalidate's date or a supersede's instant.
			s, o := w.args["subject"].(string), w.args["new_object"].(string)
			n = closedOrOpen(s, o, "2026-05-01T00:00:00Z")
			old := w.args["old_object"].(string)
			if w.acked && facts[fk{s, "has", old, "", ""}] != 0 {
				t.Errorf("fact %s %s was superseded (acknowledged) but is still open on the primary", s, old)
			}
		case "mempalace_kg_add":
			s, o := w.args["subject"].(string), w.args["object"].(string)
			if w.args["valid_to"] != nil {
				n = facts[fk{s, "had", o, "2026-01-01", "2026-02-01"}]
			} else {
				open := facts[fk{s, "has", o, "", ""}]
				n = closedOrOpen(s, o, "")
				if invalidated[s+"|"+o] && open != 0 {
					t.Errorf("fact %s %s was invalidated (acknowledged) but is still open on the primary", s, o)
				}
			}
		default:
			continue
		}
		switch {
		case w.acked && n != 1:
			t.Errorf("acknowledged %s %v is on the primary %d times", w.tool, short(w.args), n)
		case !w.acked && n > 1:
			t.Errorf("unacknowledged %s %v is on the primary %d times", w.tool, short(w.args), n)
		}
	}
	for c := range drawers {
		if !expectedDrawers[c] {
			t.Errorf("the primary holds a drawer nobody wrote: %.60q", c)
		}
	}
	if t.Failed() {
		t.Logf("replay with CHAOS_SEED=%d", seed)
	}
}

// eventID is the id of the event a coordination write's answer carries.
func eventID(res *mcp.CallToolResult) string {
	var m struct{ Event struct{ ID string } }
	if len(res.Content) > 0 {
		json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &m)
	}
	return m.Event.ID
}

func okResult(res *mcp.CallToolResult) bool {
	if len(res.Content) == 0 {
		return false
	}
	var m map[string]any
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &m)
	return m["success"] != false && m["error"] == nil
}

func short(m map[string]any) string {
	s := fmt.Sprint(m)
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// leasePid reads the pid of the process holding the outbox's flush lease.
func leasePid(palace string) int {
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		return 0
	}
	defer ob.Close()
	st, _ := ob.Stats(context.Background())
	parts := strings.Split(st.FlushOwner, "-")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[1])
	return pid
}

// chaosGateway runs a gateway (with its op-id ledger) in front of the
// primary at upstream and returns its URL and a device token that may do
// everything the chaos agents do.
func chaosGateway(t *testing.T, upstream string) (string, string) {
	t.Helper()
	url, tokens := testGateway(t, upstream, gateway.Device{ID: "chaos-dev", Label: "chaos", Read: []string{"*"}, Write: []string{"*"}, KG: "write",
		Agents: []string{"A@chaos", "B@chaos"}, Coordinator: true, WriteRate: 10000, ReadRate: 10000})
	return url, tokens["chaos-dev"]
}

// testGateway runs a gateway (with its op-id ledger) for devices in front
// of the primary at upstream (bearer testToken); its URL and a token for
// each device by id.
func testGateway(t *testing.T, upstream string, devices ...gateway.Device) (string, map[string]string) {
	t.Helper()
	url, tokens, _ := testGatewayServer(t, upstream, devices...)
	return url, tokens
}

// testGatewayServer is testGateway with its server too (to change its
// config and Reload).
func testGatewayServer(t *testing.T, upstream string, devices ...gateway.Device) (string, map[string]string, *gateway.Server) {
	t.Helper()
	dir := t.TempDir()
	cfg := &gateway.Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"), Devices: devices}
	key, err := gateway.LoadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for i := range cfg.Devices {
		tok, err := gateway.Issue(key, &cfg.Devices[i], time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tokens[cfg.Devices[i].ID] = tok
	}
	file := filepath.Join(dir, "gateway.jsonc")
	if err := cfg.Save(file); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(cfg.LedgerPath(), cfg.LedgerRetention())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	log := slog.New(slog.DiscardHandler)
	s := &gateway.Server{ConfigFile: file, Upstream: upstream, UpstreamToken: func() string { return testToken }, BindHost: "127.0.0.1", Log: log,
		Ledger: gateway.OpLedger{L: l, Log: log}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // after the HTTP server's (cleanups run last first)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// At the end the requests in flight are cancelled and waited for
	// (Shutdown), so none writes the gateway's directory while the test's
	// cleanup removes it (Close alone left a handler running: "directory
	// not empty", TestForeignDiaryAgentRefusalNamesItsWing in CI 103).
	base, cancel := context.WithCancel(context.Background())
	hs := &http.Server{Handler: s, BaseContext: func(net.Listener) context.Context { return base }}
	go hs.Serve(ln)
	t.Cleanup(func() {
		cancel()
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		hs.Shutdown(ctx) // a handler still running after 5 s is cut by Close below
		hs.Close()
	})
	return "http://" + ln.Addr().String() + "/mcp", tokens, s
}
