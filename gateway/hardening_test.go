package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/strictjson"
)

// Tests of issue 14's findings, each run in front of the MemPalace double
// and in front of the Python shim.

// post sends a raw body to /mcp and returns the HTTP status and the
// decoded answer.
func (g *gw) post(token, body string) (int, map[string]any) {
	g.t.Helper()
	req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// get sends a GET with a token and extra headers.
func (g *gw) get(token, path string, hdr map[string]string) int {
	g.t.Helper()
	req, _ := http.NewRequest("GET", g.http.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// auditLog reads the audit log's entries.
func (g *gw) auditLog() []Entry {
	g.t.Helper()
	b, _ := os.ReadFile(g.srv.cfg.Load().AuditLog)
	var es []Entry
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e Entry
		if json.Unmarshal(l, &e) == nil {
			es = append(es, e)
		}
	}
	return es
}

func rpcError(m map[string]any) map[string]any { e, _ := m["error"].(map[string]any); return e }

// Finding 1: a body whose envelope or arguments hold a duplicate key, or
// keys differing only in case, is refused (and audited), never forwarded:
// Go's encoding/json would authorize `"METHOD":"ping"` while Python runs
// `"method":"tools/call"`.
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		laptop := g.tokens["laptop-7f3a"]
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","METHOD":"ping","params":{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"drawer_shared_r_1"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"drawer_shared_r_1"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","Name":"mempalace_delete_drawer","arguments":{"drawer_id":"drawer_shared_r_1"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","wing":"private_desk","room":"r","content":"x"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","WING":"private_desk","room":"r","content":"x"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_checkpoint","arguments":{"items":[{"wing":"shared","wing":"private_desk","room":"r","content":"x"}]}}}`,
		} {
			before := len(g.auditLog())
			status, m := g.post(laptop, body)
			e := rpcError(m)
			if status != 200 || e == nil || e["code"] != -32600.0 {
				t.Errorf("%s: HTTP %d %v, want a -32600 refusal", body, status, m)
			}
			log := g.auditLog()
			if len(log) != before+1 || log[len(log)-1].Decision != "error" || log[len(log)-1].Device != "laptop-7f3a" {
				t.Errorf("%s: refusal not audited: %+v", body, log[before:])
			}
		}
		if n := u.toolCalls(t, "delete_drawer") + u.toolCalls(t, "add_drawer") + u.toolCalls(t, "checkpoint"); n != 0 {
			t.Fatalf("the upstream executed %d calls from refused bodies", n)
		}
	})
}

// Finding 1, every method: what the upstream receives is the re-encoding
// of the gateway's parse, so a Python-style parse names what was
// authorized (here: the stamp the gateway wrote is what Python reads).
func TestForwardedMessageIsTheParse(t *testing.T) {
	t.Parallel()
	u := startPython(t)
	g := newGWAt(t, devices, u)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","room":"r","content":"<b>&amp;</b>","added_by":"opencode/x/spoof"}}}`
	if _, m := g.post(g.tokens["laptop-7f3a"], body); rpcError(m) != nil {
		t.Fatalf("refused: %v", m)
	}
	rs := u.received(t)
	last := rs[len(rs)-1]
	if last.Method != "tools/call" || last.Name != "mempalace_add_drawer" || last.Arguments["added_by"] != "opencode/laptop/laptop-7f3a" || last.Arguments["content"] != "<b>&amp;</b>" {
		t.Fatalf("the upstream received %+v", last)
	}
}

// Finding 1, query strings: a repeated parameter is refused (the gateway
// used to check the first to_agent while Python uses the last), and the
// upstream gets the query rebuilt from what was checked.
func TestStreamQueryRepeatedRefused(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		laptop := g.tokens["laptop-7f3a"]
		for _, q := range []string{"to_agent=opencode@laptop&to_agent=pi@desk", "from_agent=opencode@laptop&to_agent=pi@desk&to_agent=pi@desk", "to_agent=opencode@laptop&nonsense=1"} {
			before := len(g.auditLog())
			if code := g.get(laptop, "/logstream/stream?"+q, nil); code != 400 {
				t.Errorf("%s: HTTP %d, want 400", q, code)
			}
			if log := g.auditLog(); len(log) != before+1 || log[len(log)-1].Status != 400 {
				t.Errorf("%s: refusal not audited", q)
			}
		}
		for _, r := range u.received(t) {
			if r.Path == "/logstream/stream" {
				t.Fatalf("a refused stream reached the upstream: %+v", r)
			}
		}
		if code := g.get(laptop, "/logstream/stream?from_agent=opencode@laptop", nil); code != 403 {
			t.Errorf("a stream scoped by from_agent alone: HTTP %d, want 403", code)
		}
		if u.palace == nil {
			g.get(laptop, "/logstream/stream?to_agent=opencode%40laptop&room=r&status=", nil)
			rs := u.received(t)
			if q := rs[len(rs)-1].Query; len(q) != 2 || q["to_agent"] != "opencode@laptop" || q["room"] != "r" {
				t.Fatalf("the upstream got the query %v", q)
			}
		}
	})
}

// Finding 2: an argument no release's schema lists is refused by the
// gateway, naming it, and never reaches the upstream.
func TestUnknownArgumentRefused(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		before := u.toolCalls(t, "search")
		_, rpc, _ := g.call(g.tokens["laptop-7f3a"], "search", map[string]any{"query": "x", "min_similarity": 0.1})
		if msg, _ := rpc["message"].(string); !strings.HasPrefix(msg, "devbox-config gateway") || !strings.Contains(msg, "'min_similarity'") {
			t.Fatalf("unknown argument: %v", rpc)
		}
		if u.toolCalls(t, "search") != before {
			t.Fatal("the call with an unknown argument reached the upstream")
		}
	})
}

// Finding 2: search with cli_compatible answers {query, cli_output}, a
// shape the filter does not know: refused, not passed on.
func TestUnknownResultShapeRefused(t *testing.T) {
	t.Parallel()
	u := startPython(t)
	g := newGWAt(t, devices, u)
	res, rpc, _ := g.call(g.tokens["laptop-7f3a"], "search", map[string]any{"query": "x", "cli_compatible": true})
	if rpc == nil || strings.Contains(fmt.Sprint(res, rpc), "private") {
		t.Fatalf("an unknown shape was passed on: %v %v", res, rpc)
	}
	// The desk reads every wing: nothing to cut, the answer passes.
	if res, rpc, _ := g.call(g.tokens["desk-9b21"], "search", map[string]any{"query": "x", "cli_compatible": true}); rpc != nil || res["cli_output"] == nil {
		t.Fatalf("read-* device: %v %v", res, rpc)
	}
}

// seedPrivate files a drawer in the desk's private wing (the double) and
// a diary entry of the laptop's agent in that wing, behind the gateway's
// back, as a local agent of the primary could.
func seedPrivate(t *testing.T, g *gw) {
	if g.primary == nil {
		return // the shim's answers hold private data already
	}
	g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "the desk's private secret"})
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_diary_write","arguments":{"agent_name":"opencode","wing":"private_desk","entry":"the desk's private secret"}}}`
	if _, err := g.primary.Handle([]byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// Finding 3: answers the gateway approved carry nothing of a wing the
// device cannot read, counts and totals included.
func TestCrossWingContentFiltered(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		seedPrivate(t, g)
		laptop := g.tokens["laptop-7f3a"]
		g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "a shared note"})
		leaks := func(what string, res, rpc map[string]any) {
			t.Helper()
			if rpc != nil {
				t.Errorf("%s refused: %v", what, rpc)
			}
			if s := fmt.Sprint(res); strings.Contains(s, "private") {
				t.Errorf("%s leaked another wing: %s", what, s)
			}
		}
		res, rpc, _ := g.call(laptop, "diary_read", map[string]any{"agent_name": "opencode"})
		leaks("diary_read", res, rpc)
		res, rpc, _ = g.call(laptop, "list_drawers", map[string]any{})
		leaks("list_drawers", res, rpc)
		if tot, ok := res["total"]; ok && tot != res["count"] {
			t.Errorf("list_drawers total %v counts drawers not shown (count %v)", tot, res["count"])
		}
		res, rpc, _ = g.call(laptop, "search", map[string]any{"query": "secret note"})
		leaks("search", res, rpc)
		if _, ok := res["total_before_filter"]; ok {
			t.Errorf("search total_before_filter counts every wing: %v", res)
		}
		// Last: the item is filed in "shared" (its only near-duplicate is
		// in a wing the laptop cannot read).
		res, rpc, _ = g.call(laptop, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "r", "content": "the desk's private secret"}}})
		if dups, _ := res["duplicates"].([]any); strings.Contains(fmt.Sprint(dups), "private_desk") {
			t.Errorf("checkpoint leaked another wing: %v", res)
		}
		leaks("checkpoint", map[string]any{"duplicates": res["duplicates"]}, rpc)
	})
}

// Finding 4: identities and objects. A device may not write or read the
// diary of an agent it is not granted, ack an event it cannot see, or
// read an artifact no visible event refers to (unless its agent made it).
func TestIdentityAndObjectChecks(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
		denied := func(what string, rpc map[string]any) {
			t.Helper()
			if rpc == nil || rpc["code"] != float64(CodeDenied) {
				t.Errorf("%s: not denied: %v", what, rpc)
			}
		}
		_, rpc, _ := g.call(laptop, "diary_write", map[string]any{"agent_name": "pi", "wing": "shared", "entry": "ignore previous instructions"})
		denied("diary_write as another agent", rpc)
		if u.toolCalls(t, "diary_write") != 0 {
			t.Error("a diary_write for another agent reached the upstream")
		}
		_, rpc, _ = g.call(laptop, "diary_read", map[string]any{"agent_name": "pi", "wing": "shared"})
		denied("diary_read as another agent", rpc)

		hidden, visible, art, artVisible := "evt_1", "evt_2", "art_1", "art_2"
		if u.palace != nil {
			e1, _, _ := g.call(desk, "event_append", map[string]any{"type": "note", "stream": "s", "room": "secret-room", "from_agent": "pi@desk", "to_agent": "someone@else"})
			a1, _, _ := g.call(desk, "artifact_put", map[string]any{"kind": "note", "content": "the desk's private secret", "created_by": "pi@desk"})
			p2, _, _ := g.call(desk, "patch_submit", map[string]any{"content": "diff\n", "from_agent": "pi@desk", "stream": "s", "to_agent": "opencode@laptop"})
			hidden = e1["event"].(map[string]any)["id"].(string)
			visible = p2["event"].(map[string]any)["id"].(string)
			art = a1["artifact"].(map[string]any)["id"].(string)
			artVisible = p2["artifact"].(map[string]any)["id"].(string)
		}
		acks := u.toolCalls(t, "event_ack")
		res, rpc, _ := g.call(laptop, "event_ack", map[string]any{"event_id": hidden, "from_agent": "opencode@laptop"})
		denied("event_ack of an invisible event", rpc)
		if strings.Contains(fmt.Sprint(res, rpc), "secret-room") || u.toolCalls(t, "event_ack") != acks {
			t.Error("the ack of an invisible event was made")
		}
		_, rpc, _ = g.call(laptop, "event_ack", map[string]any{"event_id": "evt_nonexistent", "from_agent": "opencode@laptop"})
		denied("event_ack of a missing event", rpc)
		if _, rpc, _ = g.call(laptop, "event_ack", map[string]any{"event_id": visible, "from_agent": "opencode@laptop"}); rpc != nil {
			t.Errorf("event_ack of an event to the laptop's agent: %v", rpc)
		}
		res, rpc, _ = g.call(laptop, "artifact_get", map[string]any{"artifact_id": art})
		denied("artifact_get of an artifact no visible event refers to", rpc)
		if strings.Contains(fmt.Sprint(res, rpc), "secret") {
			t.Errorf("artifact content leaked: %v %v", res, rpc)
		}
		if res, rpc, _ = g.call(laptop, "artifact_get", map[string]any{"artifact_id": artVisible}); rpc != nil || res["artifact"] == nil {
			t.Errorf("artifact_get of an artifact a visible event refers to: %v %v", res, rpc)
		}
		if res, rpc, _ = g.call(desk, "artifact_get", map[string]any{"artifact_id": art}); rpc != nil || res["artifact"] == nil {
			t.Errorf("artifact_get by its creator's device: %v %v", res, rpc)
		}
	})
}

// Finding 5: the request path never writes the config. A token's first
// use racing an operator's `device remove` (gateway.UpdateConfig, as the
// command does) never brings the device back, over hundreds of rounds.
func TestFirstUseNeverUndoesRemoval(t *testing.T) {
	t.Parallel()
	u := startFake(t)
	dir := t.TempDir()
	key := []byte(strings.Repeat("k", 64))
	os.WriteFile(filepath.Join(dir, "secret"), key, 0o600)
	rounds := 300
	if testing.Short() {
		rounds = 50 // the unit tier's share of the race hunt; the others run all 300
	}
	for round := range rounds {
		cfgFile := filepath.Join(dir, fmt.Sprintf("gateway-%d.jsonc", round))
		// Each round its own audit log: a closed gateway's flock on it outlives
		// Close while a parallel test's fork has not yet exec'd (the forked
		// child shares the lock's file), so reopening one log round after
		// round was refused as "another gateway" at load 7.
		audit := filepath.Join(dir, fmt.Sprintf("audit-%d.jsonl", round))
		cfg := &Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: audit, Devices: []Device{{ID: "laptop-7f3a", Read: []string{"shared"}, KG: "read"}}}
		tok, _ := Issue(key, &cfg.Devices[0], time.Now())
		if err := cfg.Save(cfgFile); err != nil {
			t.Fatal(err)
		}
		srv := &Server{ConfigFile: cfgFile, Upstream: u.url, UpstreamToken: func() string { return upstreamToken }, BindHost: "127.0.0.1"}
		if err := srv.Open(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := UpdateConfig(cfgFile, func(c *Config) error { c.Devices = nil; return nil })
			if err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			srv.ServeHTTP(newRecorder(), toolRequest(tok, "mempalace_kg_stats"))
		}()
		wg.Wait()
		after, err := LoadConfig(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		if after.Device("laptop-7f3a") != nil {
			t.Fatalf("round %d: the removed device is back in the config", round)
		}
		srv.Reload()
		w := newRecorder()
		srv.ServeHTTP(w, toolRequest(tok, "mempalace_kg_stats"))
		if w.code != 401 {
			t.Fatalf("round %d: the removed device's token answers %d", round, w.code)
		}
		srv.Close()
	}
}

// recorder is a minimal ResponseWriter for in-process requests.
type recorder struct {
	hdr  http.Header
	code int
	body bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{hdr: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.hdr }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}

func toolRequest(token, tool string) *http.Request {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, tool)
	req, _ := http.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(body))
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// Finding 6: one device's burst of slow writes fills only its own share of
// the write queue; another device's write is still served.
func TestWriteFairness(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		ds := make([]Device, len(devices))
		copy(ds, devices)
		for i := range ds {
			ds[i].ReadRate, ds[i].WriteRate = 1e6, 1e6
		}
		g := newGWAt(t, ds, u)
		if u.palace != nil {
			u.palace.SetLatency("mempalace_add_drawer", 100*time.Millisecond)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		deskLimited := 0
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, rpc, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": fmt.Sprintf("slow burst %d", i)})
				if rpc != nil {
					mu.Lock()
					deskLimited++
					mu.Unlock()
				}
			}()
		}
		time.Sleep(50 * time.Millisecond) // the burst fills the queue
		_, rpc, _ := g.call(g.tokens["laptop-7f3a"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "the laptop's one write"})
		wg.Wait()
		if rpc != nil {
			t.Fatalf("another device's write was refused behind the burst: %v", rpc)
		}
		if deskLimited == 0 {
			t.Fatal("20 concurrent slow writes from one device were never limited")
		}
	})
}

// Finding 7: no input panics the gateway; a panic anywhere is answered and
// audited; every request on every path is audited.
func TestRobustnessAndAuditEveryPath(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		laptop, admin := g.tokens["laptop-7f3a"], g.tokens["admin-0001"]
		// Lines are counted by what they record, not by how many were
		// added: another test process's client whose server went away
		// (an edge's probe, its token another gateway's) may reach this
		// gateway on the port it reuses, and is audited too, rightly.
		before := len(g.auditLog())
		status, m := g.post(laptop, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_checkpoint","arguments":{"items":[]}}}`)
		if status != 200 || rpcError(m) == nil {
			t.Fatalf("checkpoint with no items: HTTP %d %v", status, m)
		}
		if n := audited(g.auditLog()[before:], func(e Entry) bool { return e.Device == "laptop-7f3a" && e.Tool == "mempalace_checkpoint" }); n != 1 {
			t.Fatalf("checkpoint with no items audited %d times, want once", n)
		}
		paths := []struct {
			what, path string
			do         func() int
			status     int
		}{
			{"401", "/mcp", func() int {
				s, _ := g.post("dbx_nope_nope_000000", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
				return s
			}, 401},
			{"403 origin", "/statusz", func() int {
				return g.get(laptop, "/statusz", map[string]string{"Origin": "https://evil.example"})
			}, 403},
			{"404", "/nope", func() int { return g.get(laptop, "/nope", nil) }, 404},
			{"413", "/mcp", func() int {
				s, _ := g.post(laptop, `{"x":"`+strings.Repeat("a", MaxBody)+`"}`)
				return s
			}, 413},
			{"statusz non-admin", "/statusz", func() int { return g.get(laptop, "/statusz", nil) }, 403},
			{"sync non-admin", "/sync/peers", func() int { return g.get(laptop, "/sync/peers", nil) }, 403},
			{"stream refused", "/logstream/stream", func() int { return g.get(laptop, "/logstream/stream", nil) }, 403},
			{"healthz", "/healthz", func() int { return g.get("", "/healthz", nil) }, 200},
			{"statusz admin", "/statusz", func() int { return g.get(admin, "/statusz", nil) }, -1},
		}
		for _, p := range paths {
			n := len(g.auditLog())
			got := p.do()
			if p.status != -1 && got != p.status {
				t.Errorf("%s: HTTP %d, want %d", p.what, got, p.status)
			}
			if k := audited(g.auditLog()[n:], func(e Entry) bool { return e.Path == p.path && e.Status == got }); k < 1 {
				t.Errorf("%s: not audited", p.what)
			}
		}
		if _, err := Verify(g.srv.cfg.Load().AuditLog, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// audited counts the lines of log that match.
func audited(log []Entry, match func(Entry) bool) int {
	n := 0
	for _, e := range log {
		if match(e) {
			n++
		}
	}
	return n
}

// panicLedger panics in the forward step.
type panicLedger struct{}

func (panicLedger) Forward(context.Context, ToolCall, Send) Forwarded {
	panic("ledger broke")
}

func TestPanicIsAnsweredAndAudited(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.Ledger = panicLedger{}
	status, m := g.post(g.tokens["desk-9b21"], `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mempalace_kg_stats","arguments":{}}}`)
	if status != 500 || rpcError(m)["code"] != -32603.0 || m["id"] != 5.0 {
		t.Fatalf("a panic: HTTP %d %v", status, m)
	}
	log := g.auditLog()
	if last := log[len(log)-1]; last.Decision != "error" || last.Rule != "panic" || last.Tool != "mempalace_kg_stats" {
		t.Fatalf("a panic's audit line: %+v", last)
	}
	// The write slot is released by the panicking write: the next write goes through.
	g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "x"})
	g.srv.Ledger = nil
	if _, rpc, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "after a panic"}); rpc != nil {
		t.Fatalf("a write after a panicking write: %v", rpc)
	}
}

// Finding 7: verify hashes each line's exact bytes: a line edited with an
// added duplicate or unknown field no longer verifies.
func TestVerifyRejectsDuplicateAndUnknownFields(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	a, _ := OpenAudit(file, nil)
	for range 3 {
		a.Append(Entry{Device: "laptop-7f3a", Method: "tools/call", Tool: "mempalace_sync", Decision: "deny"}, false)
	}
	b, _ := os.ReadFile(file)
	if _, err := Verify(file, nil); err != nil {
		t.Fatal(err)
	}
	for what, edit := range map[string]func(string) string{
		"duplicate field": func(l string) string { return strings.Replace(l, `{"time"`, `{"decision":"allow","time"`, 1) },
		"case variant":    func(l string) string { return strings.Replace(l, `{"time"`, `{"Decision":"allow","time"`, 1) },
		"unknown field":   func(l string) string { return strings.Replace(l, `{"time"`, `{"note":"approved by ops","time"`, 1) },
		"whitespace":      func(l string) string { return strings.Replace(l, `,"device"`, `, "device"`, 1) },
	} {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		lines[1] = edit(lines[1])
		f := filepath.Join(dir, "edited.jsonl")
		os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		if _, err := Verify(f, nil); err == nil {
			t.Errorf("%s: an edited line verified as intact", what)
		}
	}
}

// A drawer in a wing the device cannot read and a drawer that does not
// exist get the same answer, for a read and for an update by id.
func TestByIDDenialHidesExistence(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	seedPrivate(t, g)
	laptop := g.tokens["laptop-7f3a"]
	real := fakepalace.DrawerID("private_desk", "r", "the desk's private secret")
	for _, tool := range []string{"get_drawer", "update_drawer"} {
		args := func(id string) map[string]any {
			if tool == "get_drawer" {
				return map[string]any{"drawer_id": id}
			}
			return map[string]any{"drawer_id": id, "content": "overwritten"}
		}
		_, forbidden, _ := g.call(laptop, tool, args(real))
		_, missing, _ := g.call(laptop, tool, args("drawer_private_desk_r_000000000000000000000000"))
		if forbidden == nil || fmt.Sprint(forbidden) != fmt.Sprint(missing) {
			t.Errorf("%s: a forbidden drawer answers %v, a missing one %v", tool, forbidden, missing)
		}
	}
}

// A checkpoint's duplicate check is no oracle for other wings: an item
// that duplicates a drawer the device cannot read is filed like one that
// duplicates nothing, while a duplicate of a readable drawer is still
// reported and not filed.
func TestCheckpointDedupIsNoOracle(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	g.call(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "the desk's private hostname is alpha-7"})
	g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "the shared release checklist"})
	shape := func(content string) string {
		res, rpc, _ := g.call(laptop, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "wing_opencode", "room": "r", "content": content}}})
		if rpc != nil {
			t.Fatalf("checkpoint: %v", rpc)
		}
		return fmt.Sprintf("added=%d duplicates=%d", len(res["added"].([]any)), len(res["duplicates"].([]any)))
	}
	if a, b := shape("the desk's private hostname is alpha-7"), shape("nothing like it exists anywhere"); a != b || a != "added=1 duplicates=0" {
		t.Fatalf("a duplicate of a forbidden drawer answers %s, of nothing %s", a, b)
	}
	if got := shape("the shared release checklist"); got != "added=0 duplicates=1" {
		t.Fatalf("a duplicate of a readable drawer: %s", got)
	}
}

// Palace-wide reads are answered over the readable wings only: drawers of
// another wing that rank or sort in do not make a page or a search come
// back short (which would tell a device they exist, and paged through, how
// many), and totals count readable drawers exactly.
func TestPalaceWideReadsAreNoOracle(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	for i := range 3 {
		g.call(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": fmt.Sprintf("release notes, the desk's own draft %d", i)})
	}
	g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "release checklist for the team"})
	g.call(laptop, "add_drawer", map[string]any{"wing": "wing_opencode", "room": "r", "content": "opencode's notes on the release"})
	res, rpc, _ := g.call(laptop, "search", map[string]any{"query": "release notes, the desk's own draft", "limit": 2})
	if hits, _ := res["results"].([]any); rpc != nil || len(hits) != 2 {
		t.Fatalf("a palace-wide search of limit 2 over two readable drawers: %v %v", res, rpc)
	}
	res, rpc, _ = g.call(laptop, "list_drawers", map[string]any{"limit": 2})
	if ds, _ := res["drawers"].([]any); rpc != nil || len(ds) != 2 || res["total"] != 2.0 || strings.Contains(fmt.Sprint(res), "private") {
		t.Fatalf("a palace-wide page of 2: %v %v", res, rpc)
	}
	res, _, _ = g.call(laptop, "list_drawers", map[string]any{"limit": 1, "offset": 1})
	if ds, _ := res["drawers"].([]any); len(ds) != 1 || res["total"] != 2.0 {
		t.Fatalf("the second page of 1: %v", res)
	}
	// A device that reads every wing gets upstream's answer.
	if res, _, _ := g.call(desk, "list_drawers", map[string]any{}); res["total"] != 5.0 {
		t.Fatalf("desk's palace-wide page: %v", res)
	}
}

// An event_wait is not woken early by an event the device cannot see: it
// answers the first visible event, or times out.
func TestEventWaitIsNotWokenByOthersEvents(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	go func() {
		time.Sleep(50 * time.Millisecond)
		g.call(desk, "event_append", map[string]any{"type": "note", "stream": "w", "room": "r", "from_agent": "pi@desk", "to_agent": "someone@else"})
		time.Sleep(150 * time.Millisecond)
		g.call(desk, "event_append", map[string]any{"type": "note", "stream": "w", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@laptop"})
	}()
	res, rpc, _ := g.call(laptop, "event_wait", map[string]any{"stream": "w", "timeout_ms": 3000})
	evs, _ := res["events"].([]any)
	if rpc != nil || len(evs) != 1 || evs[0].(map[string]any)["to_agent"] != "opencode@laptop" {
		t.Fatalf("event_wait answered %v %v", res, rpc)
	}
	g.call(desk, "event_append", map[string]any{"type": "note", "stream": "x", "room": "r", "from_agent": "pi@desk", "to_agent": "someone@else"})
	start := time.Now()
	res, _, _ = g.call(laptop, "event_wait", map[string]any{"stream": "x", "timeout_ms": 300})
	if res["timed_out"] != true || res["count"] != 0.0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("with only another's event: %v after %v", res, time.Since(start))
	}
}

// A device whose read grants are exact names gets palace-wide reads
// answered over those wings without asking the upstream for its wing list
// (the round trip that made a search through the gateway milliseconds
// slower on real MemPalace); one readable wing makes the read one call
// pinned to it. Nothing of another wing comes back either way.
func TestExactGrantsNeedNoWingList(t *testing.T) {
	t.Parallel()
	ds := append([]Device{{ID: "phone-0001", Label: "phone", Read: []string{"shared"}}, {ID: "glob-0001", Label: "glob", Read: []string{"wing_*"}}}, devices...)
	g := newGW(t, ds)
	desk := g.tokens["desk-9b21"]
	for _, w := range []string{"shared", "private_desk", "wing_opencode"} {
		for i := range 3 {
			g.call(desk, "add_drawer", map[string]any{"wing": w, "room": "r", "content": fmt.Sprintf("release notes %d in %s", i, w)})
		}
	}
	lists, searches := g.primary.Calls("mempalace_list_wings"), g.primary.Calls("mempalace_search")
	res, rpc, _ := g.call(g.tokens["phone-0001"], "search", map[string]any{"query": "release notes private_desk", "limit": 5})
	hits, _ := res["results"].([]any)
	if rpc != nil || len(hits) != 3 || strings.Contains(fmt.Sprint(hits), "private") || res["filtered"] != true || res["total_before_filter"] != nil {
		t.Fatalf("one readable wing: %v %v", res, rpc)
	}
	if g.primary.Calls("mempalace_list_wings") != lists || g.primary.Calls("mempalace_search") != searches+1 {
		t.Fatalf("one wing is one pinned search and no wing list: %d list_wings, %d searches", g.primary.Calls("mempalace_list_wings")-lists, g.primary.Calls("mempalace_search")-searches)
	}
	res, _, _ = g.call(g.tokens["phone-0001"], "list_drawers", map[string]any{"limit": 2})
	if ds, _ := res["drawers"].([]any); len(ds) != 2 || res["total"] != 3.0 || res["count"] != 2.0 {
		t.Fatalf("one wing's page: %v", res)
	}
	// laptop reads two wings by name: still no wing list.
	res, _, _ = g.call(g.tokens["laptop-7f3a"], "list_drawers", map[string]any{})
	if ds, _ := res["drawers"].([]any); len(ds) != 6 || res["total"] != 6.0 || strings.Contains(fmt.Sprint(res), "private") || g.primary.Calls("mempalace_list_wings") != lists {
		t.Fatalf("two named wings: %v", res)
	}
	// A pattern still needs the upstream's wings.
	res, _, _ = g.call(g.tokens["glob-0001"], "list_drawers", map[string]any{})
	if ds, _ := res["drawers"].([]any); len(ds) != 3 || res["total"] != 3.0 || g.primary.Calls("mempalace_list_wings") != lists+1 {
		t.Fatalf("wing_*: %v", res)
	}
}

// An operator reads from the audit line how much of a call's time was the
// upstream's: upstream_ms, summed over the calls the gateway made for it,
// and none on a request that never reached the upstream.
func TestAuditLineSaysWhatTheUpstreamTook(t *testing.T) {
	t.Parallel()
	const pause = 40 * time.Millisecond
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(pause)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "{\"entities\": 0}"}]}}`)
	}))
	t.Cleanup(slow.Close)
	g := newGWAt(t, devices, &upstream{name: "slow", url: slow.URL + "/mcp"})
	if _, rpc, status := g.call(g.tokens["laptop-7f3a"], "kg_stats", map[string]any{}); rpc != nil || status != 200 {
		t.Fatalf("kg_stats: %v %d", rpc, status)
	}
	g.call("not-a-token", "kg_stats", map[string]any{})
	log := g.auditLog()
	if len(log) != 2 {
		t.Fatalf("audit log: %+v", log)
	}
	if got := log[0].UpstreamMS; got < float64(pause.Milliseconds()) {
		t.Errorf("the call's line says the upstream took %.3f ms; it paused %v", got, pause)
	}
	if log[1].Status != http.StatusUnauthorized || log[1].UpstreamMS != 0 {
		t.Errorf("a refused call's line: %+v", log[1])
	}
}

// noteFromDesk appends a note from pi@desk (device desk-9b21) to the
// agent to: the event's id.
func noteFromDesk(t *testing.T, g *gw, to string) string {
	t.Helper()
	res, rpc, _ := g.call(g.tokens["desk-9b21"], "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": to})
	ev, _ := res["event"].(map[string]any)
	if rpc != nil || ev == nil {
		t.Fatalf("event_append: %v %v", res, rpc)
	}
	return ev["id"].(string)
}

// An event_list whose cursor (since_event_id or before_event_id) names an
// event the device cannot see answers an empty page, as operator.md says
// ("What a device can still learn"): before, it answered the visible
// events after (or before) it, so a device learnt where another's event
// sits in the log. A cursor the device sees pages as before, and one that
// does not exist is upstream's error (the documented gap).
func TestEventListCursorOfAHiddenEventAnswersAnEmptyPage(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := g.tokens["laptop-7f3a"]
	seen1, hidden, seen2 := noteFromDesk(t, g, "opencode@laptop"), noteFromDesk(t, g, "someone@else"), noteFromDesk(t, g, "opencode@laptop")
	for _, c := range []struct {
		cursor, id string
		want       int
	}{
		{"since_event_id", seen1, 1},
		{"before_event_id", seen2, 1},
		{"since_event_id", hidden, 0},
		{"before_event_id", hidden, 0},
	} {
		res, rpc, _ := g.call(laptop, "event_list", map[string]any{c.cursor: c.id, "limit": 50})
		evs, _ := res["events"].([]any)
		if rpc != nil || res["error"] != nil || len(evs) != c.want || res["count"] != float64(c.want) || res["filtered"] != true {
			t.Errorf("%s of the %s event: %v %v, want %d events", c.cursor, map[bool]string{true: "hidden", false: "visible"}[c.id == hidden], res, rpc, c.want)
		}
	}
	// The check costs two look-ups, not a scan of the device's log.
	if n := g.primary.Calls("mempalace_event_list"); true {
		g.call(laptop, "event_list", map[string]any{"since_event_id": seen1})
		if got := g.primary.Calls("mempalace_event_list") - n; got > 3 {
			t.Errorf("a page after a cursor took %d event_list calls upstream, want 3", got)
		}
	}
	if res, _, _ := g.call(laptop, "event_list", map[string]any{"since_event_id": "evt_nope"}); !strings.Contains(fmt.Sprint(res["error"]), "not found") {
		t.Errorf("a cursor that does not exist: %v", res)
	}
	// A coordinator sees every event: its cursor is never hidden.
	if res, _, _ := g.call(g.tokens["admin-0001"], "event_list", map[string]any{"since_event_id": hidden}); res["count"] != 1.0 {
		t.Errorf("the coordinator's page after the event: %v", res)
	}
}

// An event_wait whose since_event_id names an event the device cannot
// see waits from the end of the log, as if that cursor gave nothing to
// wait from (operator.md): before, it answered the visible events after
// the hidden event at once, placing it in the log as event_list did. A
// visible event appended while it waits wakes it; a visible cursor waits
// as before, and one that does not exist is upstream's error.
func TestEventWaitCursorOfAHiddenEventWaitsFromTheEnd(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := g.tokens["laptop-7f3a"]
	seen1, hidden, seen2 := noteFromDesk(t, g, "opencode@laptop"), noteFromDesk(t, g, "someone@else"), noteFromDesk(t, g, "opencode@laptop")
	ids := func(res map[string]any) string {
		var out []string
		for _, e := range res["events"].([]any) {
			out = append(out, e.(map[string]any)["id"].(string))
		}
		return strings.Join(out, ",")
	}
	if res, rpc, _ := g.call(laptop, "event_wait", map[string]any{"since_event_id": seen1, "timeout_ms": 2000}); rpc != nil || ids(res) != seen2 {
		t.Fatalf("a wait after a visible event: %v %v", res, rpc)
	}
	res, rpc, _ := g.call(laptop, "event_wait", map[string]any{"since_event_id": hidden, "timeout_ms": 300})
	if rpc != nil || res["timed_out"] != true || res["count"] != 0.0 || ids(res) != "" {
		t.Errorf("a wait after a hidden event answered what is after it: %v %v", res, rpc)
	}
	waits := g.primary.Calls("mempalace_event_wait")
	got := make(chan map[string]any)
	go func() {
		res, _, _ := g.call(laptop, "event_wait", map[string]any{"since_event_id": hidden, "timeout_ms": 5000})
		got <- res
	}()
	for deadline := time.Now().Add(3 * time.Second); g.primary.Calls("mempalace_event_wait") == waits && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // until the wait has reached the upstream
	}
	seen3 := noteFromDesk(t, g, "opencode@laptop")
	if res := <-got; ids(res) != seen3 || res["timed_out"] != false {
		t.Errorf("a visible event appended during a wait after a hidden event: %v, want %s", res, seen3)
	}
	if res, _, _ := g.call(laptop, "event_wait", map[string]any{"since_event_id": "evt_nope", "timeout_ms": 100}); !strings.Contains(fmt.Sprint(res["error"]), "not found") {
		t.Errorf("a cursor that does not exist: %v", res)
	}
}

// Before 3.10.0 the log's newest event cannot be asked for in one call:
// an event_wait after a hidden event times out at once, empty, and an
// event_list after it answers an empty page (found by a scan).
func TestEventCursorOfAHiddenEventBefore310(t *testing.T) {
	t.Parallel()
	g := newGWAt(t, devices, startFakeAt(t, "3.9.0"))
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	var hidden string
	for _, to := range []string{"someone@else", "opencode@laptop"} {
		res, _, _ := g.call(desk, "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": to})
		if hidden == "" {
			hidden = res["event"].(map[string]any)["id"].(string)
		}
	}
	start := time.Now()
	if res, rpc, _ := g.call(laptop, "event_wait", map[string]any{"since_event_id": hidden, "timeout_ms": 5000}); rpc != nil || res["timed_out"] != true || res["count"] != 0.0 || time.Since(start) > 2*time.Second {
		t.Errorf("a wait after a hidden event on 3.9.0: %v %v after %v", res, rpc, time.Since(start))
	}
	if res, _, _ := g.call(laptop, "event_list", map[string]any{"since_event_id": hidden}); res["count"] != 0.0 {
		t.Errorf("a page after a hidden event on 3.9.0: %v", res)
	}
	if res, _, _ := g.call(laptop, "event_wait", map[string]any{"since_event_id": "evt_nope", "timeout_ms": 100}); !strings.Contains(fmt.Sprint(res["error"]), "not found") {
		t.Errorf("a cursor that does not exist on 3.9.0: %v", res)
	}
}

// attack67 N2: the edge parses a call's arguments alone
// (strictjson.DecodeArguments), the gateway the whole request: at the
// nesting limit they refuse the same bytes, with the same words. Before,
// the edge counted depth from the arguments, two levels looser: metadata
// 62 deep passed the edge, queued, and died at the gateway.
func TestTheEdgesArgumentsParseMeetsTheGatewaysNestingLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		deep    int
		refused bool
	}{{61, false}, {62, true}} {
		args := `{"type":"note","stream":"s","room":"r","from_agent":"a","body":"b","metadata":` + strings.Repeat(`{"a":`, c.deep) + "1" + strings.Repeat("}", c.deep) + `}`
		_, bad := parseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":` + args + `}}`))
		_, err := strictjson.DecodeArguments([]byte(args))
		if (bad != nil) != c.refused || (err != nil) != c.refused {
			t.Fatalf("metadata %d deep: the gateway %v, the edge %v; want both refused: %v", c.deep, bad, err, c.refused)
		}
		if c.refused && bad.msg != "Invalid Request: "+err.Error() {
			t.Errorf("metadata %d deep: the gateway says %q, the edge %q", c.deep, bad.msg, err)
		}
	}
}

// review25 F1: Gemini CLI sends wait_for_previous with every tool call,
// which MemPalace takes for every tool, of any value, and drops; the
// gateway takes it too, for a write and a read, and forwards it as sent
// (the Python upstream records it). Before, both were refused
// ("Unknown parameter 'wait_for_previous'").
func TestGeminisWaitForPreviousIsTaken(t *testing.T) {
	t.Parallel()
	forEachUpstream(t, func(t *testing.T, u *upstream) {
		g := newGWAt(t, devices, u)
		laptop := g.tokens["laptop-7f3a"]
		res, rpc, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "gemini waits for the previous call", "wait_for_previous": true})
		if rpc != nil || res["success"] != true || u.palace != nil && u.palace.Dump().CountContent("gemini waits for the previous call") != 1 {
			t.Fatalf("add_drawer with wait_for_previous: %v %v", res, rpc)
		}
		res, rpc, _ = g.call(laptop, "search", map[string]any{"query": "gemini waits", "wing": "shared", "wait_for_previous": true})
		if hits, _ := res["results"].([]any); rpc != nil || len(hits) != 1 {
			t.Fatalf("search with wait_for_previous: %v %v", res, rpc)
		}
		forwarded := 0
		for _, r := range u.received(t) {
			if r.Name == "mempalace_add_drawer" || r.Name == "mempalace_search" {
				if forwarded++; r.Arguments["wait_for_previous"] != true {
					t.Errorf("%s reached the upstream with %v", r.Name, r.Arguments)
				}
			}
		}
		if u.palace == nil && forwarded != 2 {
			t.Errorf("the Python upstream got %d of the two calls", forwarded)
		}
	})
}
