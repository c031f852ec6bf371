package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

const upstreamToken = "upstream-shared-token"

type gw struct {
	t       testing.TB
	srv     *Server
	http    *httptest.Server
	primary *fakepalace.Palace // nil in front of the Python shim
	up      *upstream
	cfgFile string
	now     time.Time
	mu      sync.Mutex
	tokens  map[string]string // device -> token
}

func newGW(t testing.TB, devices []Device) *gw {
	t.Helper()
	return newGWAt(t, devices, startFake(t))
}

// newGWAt is a gateway in front of u, with a token issued for each device.
func newGWAt(t testing.TB, devices []Device, u *upstream) *gw {
	t.Helper()
	dir := t.TempDir()
	g := &gw{t: t, primary: u.palace, up: u, cfgFile: filepath.Join(dir, "gateway.jsonc"), now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), tokens: map[string]string{}}
	own := make([]Device, len(devices)) // a fresh copy: Issue appends tokens
	copy(own, devices)
	for i := range own {
		own[i].Tokens = nil
	}
	cfg := &Config{SecretFile: filepath.Join(dir, "secret"), AuditLog: filepath.Join(dir, "audit.jsonl"), Devices: own}
	key, err := LoadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Devices {
		tok, err := Issue(key, &cfg.Devices[i], g.now)
		if err != nil {
			t.Fatal(err)
		}
		g.tokens[cfg.Devices[i].ID] = tok
	}
	if err := cfg.Save(g.cfgFile); err != nil {
		t.Fatal(err)
	}
	g.srv = &Server{ConfigFile: g.cfgFile, Upstream: u.url, UpstreamToken: func() string { return upstreamToken }, BindHost: "127.0.0.1", Now: g.clock}
	if err := g.srv.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.srv.Close() }) // after the HTTP server's (cleanups run last first)
	g.http = httptest.NewServer(g.srv)
	t.Cleanup(g.http.Close)
	return g
}

func (g *gw) clock() time.Time { g.mu.Lock(); defer g.mu.Unlock(); return g.now }

func (g *gw) advance(d time.Duration) { g.mu.Lock(); g.now = g.now.Add(d); g.mu.Unlock() }

// call sends a tools/call as a device; it returns the decoded result text
// or the JSON-RPC error.
func (g *gw) call(token, tool string, args map[string]any) (map[string]any, map[string]any, int) {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
	req, _ := http.NewRequest("POST", g.http.URL+"/mcp", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Result struct{ Content []struct{ Text string } } `json:"result"`
		Error  map[string]any                            `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&r)
	var m map[string]any
	if len(r.Result.Content) > 0 {
		json.Unmarshal([]byte(r.Result.Content[0].Text), &m)
	}
	return m, r.Error, resp.StatusCode
}

var devices = []Device{
	{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared", "wing_opencode"}, Write: []string{"shared", "wing_opencode"}, KG: "read", Agents: []string{"opencode@laptop"}},
	{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared", "private_desk", "wing_*"}, KG: "write", Agents: []string{"pi@desk"}},
	{ID: "admin-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true},
}

func TestAuthorizationTable(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	rows := []struct {
		name  string
		token string
		tool  string
		args  map[string]any
		allow bool
	}{
		{"write to an allowed wing", laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "shared note"}, true},
		{"write to a forbidden wing", laptop, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "x"}, false},
		{"desk writes its private wing", desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "desk secret about hostnames"}, true},
		{"diary to the agent's own wing", laptop, "diary_write", map[string]any{"agent_name": "opencode", "entry": "laptop diary"}, true},
		{"diary to another agent's wing", laptop, "diary_write", map[string]any{"agent_name": "pi", "entry": "x"}, false},
		{"checkpoint with one forbidden item", laptop, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "r", "content": "a"}, map[string]any{"wing": "ops", "room": "r", "content": "b"}}}, false},
		{"read with a readable wing", laptop, "list_rooms", map[string]any{"wing": "shared"}, true},
		{"read with an unreadable wing", laptop, "list_drawers", map[string]any{"wing": "private_desk"}, false},
		{"kg read with a read grant", laptop, "kg_query", map[string]any{"entity": "x"}, true},
		{"kg write without a write grant", laptop, "kg_add", map[string]any{"subject": "a", "predicate": "b", "object": "c"}, false},
		{"kg write with a write grant", desk, "kg_add", map[string]any{"subject": "a", "predicate": "b", "object": "c"}, true},
		{"event from the device's agent", laptop, "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@laptop", "to_agent": "pi@desk"}, true},
		{"event from someone else's agent (spoof)", laptop, "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk"}, false},
		{"sync by a non-admin", desk, "sync", map[string]any{}, false},
		{"mine by a non-admin", laptop, "mine", map[string]any{"source": "/w"}, false},
		{"delete by a non-admin", desk, "delete_drawer", map[string]any{"drawer_id": "x"}, false},
		{"sync by the admin", admin, "sync", map[string]any{}, false},
		{"an unknown tool by a non-admin", laptop, "traverse", map[string]any{"start_room": "r"}, false},
	}
	for _, r := range rows {
		res, rpc, status := g.call(r.token, r.tool, r.args)
		if status != 200 {
			t.Errorf("%s: HTTP %d (a denial must be a 200)", r.name, status)
		}
		if got := rpc == nil; got != r.allow {
			t.Errorf("%s: allowed=%v (result %v, error %v)", r.name, got, res, rpc)
		}
		if rpc != nil {
			data, _ := rpc["data"].(map[string]any)
			if rpc["code"] != float64(CodeDenied) || data["device"] == nil || data["rule"] == nil || data["tool"] != "mempalace_"+r.tool {
				t.Errorf("%s: denial lacks code or data: %v", r.name, rpc)
			}
		}
	}
	// get_drawer of a drawer in a forbidden wing (looked up, never parsed)
	id := fakepalace.DrawerID("private_desk", "r", "desk secret about hostnames")
	if _, rpc, _ := g.call(laptop, "get_drawer", map[string]any{"drawer_id": id}); rpc == nil {
		t.Error("laptop read the desk's private drawer by id")
	}
	if res, rpc, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": id}); rpc != nil || res["content"] == nil {
		t.Errorf("desk could not read its own drawer: %v %v", res, rpc)
	}
	// update_drawer: the drawer's wing is looked up too
	if _, rpc, _ := g.call(laptop, "update_drawer", map[string]any{"drawer_id": id, "content": "overwritten by the laptop"}); rpc == nil {
		t.Error("laptop updated the desk's private drawer by id")
	}
	// without a token: 401, as upstream (no WWW-Authenticate)
	if _, _, status := g.call("dbx_nope_nope_000000", "status", nil); status != 401 {
		t.Errorf("bad token: HTTP %d", status)
	}
}

func TestResultFilteringAndProvenance(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	g.call(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "r", "content": "the desk's private outbox notes"})
	g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "shared outbox notes", "added_by": "opencode/evil-host/spoofed-device"})
	res, _, _ := g.call(laptop, "search", map[string]any{"query": "outbox notes", "limit": 10})
	for _, x := range res["results"].([]any) {
		if x.(map[string]any)["wing"] != "shared" {
			t.Fatalf("search leaked a forbidden wing: %v", res)
		}
	}
	if res["filtered"] != true {
		t.Fatalf("filtered results not marked: %v", res)
	}
	if res, _, _ := g.call(desk, "search", map[string]any{"query": "outbox notes", "limit": 10}); len(res["results"].([]any)) != 2 {
		t.Fatalf("desk (read *) should see both: %v", res)
	}
	for tool, key := range map[string]string{"list_drawers": "drawers", "list_wings": "wings", "status": "wings"} {
		res, _, _ := g.call(laptop, tool, nil)
		if strings.Contains(fmt.Sprint(res[key]), "private_desk") || res["filtered"] != true {
			t.Errorf("%s leaked or was not marked: %v", tool, res)
		}
	}
	if res, _, _ := g.call(laptop, "status", nil); res["total_drawers"] != 1.0 || fmt.Sprint(res["rooms"]) != "map[r:1]" {
		t.Errorf("status not recomputed for readable wings: %v %v", res["total_drawers"], res["rooms"])
	}
	g.call(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "secret_room", "content": "x"})
	if res, _, _ := g.call(laptop, "list_rooms", nil); fmt.Sprint(res["rooms"]) != "map[r:1]" || res["filtered"] != true {
		t.Errorf("list_rooms over readable wings: %v", res)
	}
	// added_by is the credential's, whatever the client sent
	for _, d := range g.primary.Dump().Drawers {
		want := map[string]string{"shared": "opencode/laptop/laptop-7f3a", "private_desk": "mcp/desk/desk-9b21"}[d.Wing]
		if d.AddedBy != want {
			t.Errorf("drawer in %s stamped %q, want %q", d.Wing, d.AddedBy, want)
		}
	}
	// events: a device sees only its agents' events (and broadcasts)
	g.call(desk, "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "someone@else"})
	g.call(desk, "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@laptop"})
	if res, _, _ := g.call(laptop, "event_list", map[string]any{"stream": "s"}); res["count"] != 1.0 {
		t.Errorf("laptop saw events not addressed to its agents: %v", res)
	}
}

func TestRotationAndRevocation(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	old := g.tokens["laptop-7f3a"]
	cfg, _ := LoadConfig(g.cfgFile)
	key, _ := LoadSecret(cfg)
	g.advance(time.Hour)
	newTok, err := Issue(key, cfg.Device("laptop-7f3a"), g.clock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Issue(key, cfg.Device("laptop-7f3a"), g.clock()); err == nil {
		t.Fatal("a third live token was issued")
	}
	cfg.Save(g.cfgFile)
	g.srv.Reload()
	ok := func(tok string) bool {
		_, rpc, status := g.call(tok, "kg_stats", nil)
		return status == 200 && rpc == nil
	}
	if !ok(old) || !ok(newTok) {
		t.Fatal("both tokens must work during rotation")
	}
	g.advance(6 * 24 * time.Hour)
	if !ok(old) {
		t.Fatal("the old token stopped before the grace period ended")
	}
	g.advance(2 * 24 * time.Hour)
	if ok(old) || !ok(newTok) {
		t.Fatal("after the grace period only the new token may work")
	}
	// Revocation takes effect within a second, without a restart.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.srv.Watch(ctx)
	cfg, _ = LoadConfig(g.cfgFile)
	Revoke(cfg.Device("laptop-7f3a"), "")
	time.Sleep(20 * time.Millisecond) // a distinct mtime
	cfg.Save(g.cfgFile)
	deadline := time.Now().Add(time.Second)
	for ok(newTok) {
		if time.Now().After(deadline) {
			t.Fatal("revocation not effective within a second")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAuditChain(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	for i := 0; i < 5; i++ {
		g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": fmt.Sprintf("audited %d", i)})
	}
	g.call(g.tokens["laptop-7f3a"], "sync", nil) // a denial is audited too
	file := g.srv.cfg.Load().AuditLog
	if n, err := Verify(file, nil); err != nil || n < 6 {
		t.Fatalf("clean log: %d lines, %v", n, err)
	}
	b, _ := os.ReadFile(file)
	if bytes.Contains(b, []byte("audited 1")) {
		t.Fatal("the audit log holds content, not a digest")
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	tamper := map[string][]string{
		"edited":    append(append([]string{}, lines[:2]...), append([]string{strings.Replace(lines[2], `"device":"`, `"device":"x`, 1)}, lines[3:]...)...),
		"dropped":   append(append([]string{}, lines[:2]...), lines[3:]...),
		"reordered": append(append(append([]string{}, lines[:2]...), lines[3], lines[2]), lines[4:]...),
	}
	for kind, ls := range tamper {
		f := filepath.Join(t.TempDir(), "audit.jsonl")
		os.WriteFile(f, []byte(strings.Join(ls, "\n")+"\n"), 0o600)
		if _, err := Verify(f, nil); err == nil {
			t.Errorf("%s line not detected", kind)
		}
	}
	// An unwritable log: writes are refused, reads continue.
	os.Remove(file)
	os.Mkdir(file, 0o700) // a directory where the log should be
	if _, rpc, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "unaudited"}); rpc == nil {
		t.Fatal("a write went through without an audit line")
	}
	if _, rpc, _ := g.call(g.tokens["desk-9b21"], "kg_stats", nil); rpc != nil {
		t.Fatalf("a read was refused with the log unwritable: %v", rpc)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	d := devices[0]
	d.WriteRate = 1
	g := newGW(t, []Device{d})
	limited := 0
	for i := 0; i < 40; i++ {
		_, rpc, status := g.call(g.tokens[d.ID], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": fmt.Sprintf("burst %d", i)})
		if status != 200 {
			t.Fatalf("a rate limit must not be an HTTP error (got %d)", status)
		}
		if rpc != nil && rpc["code"] == float64(CodeRateLimited) {
			limited++
			want := map[string]any{"device": d.ID, "tool": "mempalace_add_drawer", "wing": "shared", "rule": "rate:write"}
			if data, _ := rpc["data"].(map[string]any); !reflect.DeepEqual(data, want) {
				t.Fatalf("rate limit data %v, want %v", rpc["data"], want)
			}
		}
	}
	if limited == 0 {
		t.Fatal("40 writes at once with a 1/s rate were never limited")
	}
}

func TestConfigValidationNamesFields(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"bad id"}]}`:                 "devices[0].id",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","write":[""]}]}`:         "devices[0].write[0]: device d: an empty glob can never match",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","kg":"all"}]}`:           "devices[0].kg",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","agents":["pi desk"]}]}`: "devices[0].agents[0]",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d"},{"id":"d"}]}`:           "devices[1].id",
		`{"secret_file":"s","audit_log":"a","devices":[], "extra": 1}`:                    "extra",
		`{"audit_log":"a"}`: "secret_file",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"unknown"}]}`:                                                             "devices[0].id: \"unknown\" is what answers call",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","trusts":[]}]}`:                                                       "devices[0].trusts: an empty list",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","trusts":["ops"]}]}`:                                                  "devices[0].trusts[0]: \"ops\" is no device",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","trusts":["unknown"]}]}`:                                              "devices[0].trusts[0]",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","trusts":["d"],"untrusted":"hide"}]}`:                                 "devices[0].untrusted: \"hide\" must be mark or withhold",
		`{"secret_file":"s","audit_log":"a","devices":[{"id":"d","untrusted":"withhold"}]}`:                                            "devices[0].untrusted: without trusts",
		`{"secret_file":"s","audit_log":"a","instruction_wing":"wing_*","devices":[]}`:                                                 "instruction_wing",
		"{\n  // comment\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [{\"id\": \"d\", \"read\": [\"[\"]}],\n}": "devices[0].read[0]",
	} {
		f := filepath.Join(dir, "g.jsonc")
		os.WriteFile(f, []byte(body), 0o600)
		_, err := LoadConfig(f)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %v, want one naming %q and the file", body, err, want)
		}
	}
}

// The same front-door rules as mempalace serve.
func TestFrontDoor(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	tok := g.tokens["laptop-7f3a"]
	do := func(method, path, body string, hdr map[string]string) (int, string) {
		resp, b := testbed.Request(t, method, g.http.URL+path, body, hdr)
		return resp.StatusCode, b
	}
	auth := map[string]string{"Authorization": "Bearer " + tok}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if code, body := do("GET", "/healthz", "", nil); code != 200 || body != "ok\n" {
		t.Errorf("healthz passes through without a token: %d %q", code, body)
	}
	if code, _ := do("POST", "/mcp", ping, map[string]string{"Authorization": "Bearer " + tok, "Host": "palace.example.org"}); code != 403 {
		t.Errorf("foreign Host on a loopback bind: %d", code)
	}
	if code, _ := do("POST", "/mcp", ping, map[string]string{"Authorization": "Bearer " + tok, "Origin": "https://evil.example"}); code != 403 {
		t.Errorf("foreign Origin: %d", code)
	}
	if code, body := do("POST", "/mcp", "{not json", auth); code != 400 || !strings.Contains(body, "-32700") {
		t.Errorf("bad JSON: %d %s", code, body)
	}
	if code, body := do("POST", "/mcp", ping, auth); code != 200 || !strings.Contains(body, `"result":{}`) {
		t.Errorf("ping through the gateway: %d %s", code, body)
	}
	if code, _ := do("GET", "/statusz", "", auth); code != 403 {
		t.Errorf("statusz for a non-admin: %d", code)
	}
	if code, body := do("GET", "/statusz", "", map[string]string{"Authorization": "Bearer " + g.tokens["admin-0001"]}); code != 200 || !strings.Contains(body, `"mempalace"`) || strings.Contains(body, upstreamToken) {
		t.Errorf("statusz for the admin: %d %s", code, body)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", MaxBody) + `"}}`
	if code, _ := do("POST", "/mcp", big, auth); code != 413 {
		t.Errorf("over 16 MiB: %d", code)
	}
	// No server stream: a GET /mcp is the MCP spec's 405, which clients
	// take as "none"; a 404 is "session gone" (the Inspector then listed
	// no tools).
	if resp, _ := testbed.Request(t, "GET", g.http.URL+"/mcp", "", auth); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /mcp: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, _ := do("POST", "/mcp", ping, nil); code != 401 {
		t.Errorf("no token: %d", code)
	}
	// /logstream/stream: only a stream filtered to the device's own agents
	// (the double has no stream: a forwarded request answers its 404).
	if code, _ := do("GET", "/logstream/stream", "", auth); code != 403 {
		t.Errorf("unfiltered stream for a non-coordinator: %d", code)
	}
	if code, _ := do("GET", "/logstream/stream?to_agent=pi@desk", "", auth); code != 403 {
		t.Errorf("another device's agent: %d", code)
	}
	if code, _ := do("GET", "/logstream/stream?to_agent=opencode@laptop", "", auth); code != 404 {
		t.Errorf("own agent's stream not forwarded: %d", code)
	}
	if code, _ := do("GET", "/logstream/stream", "", map[string]string{"Authorization": "Bearer " + g.tokens["admin-0001"]}); code != 404 {
		t.Errorf("coordinator's stream not forwarded: %d", code)
	}
}

// newGWB is the fixture for benchmarks: no rate limits in the way.
func newGWB(b *testing.B) *gw {
	ds := make([]Device, len(devices))
	copy(ds, devices)
	for i := range ds {
		ds[i].ReadRate, ds[i].WriteRate = 1e9, 1e9
	}
	return newGW(b, ds)
}

// A log rewritten from the start with recomputed hashes passes the chain
// check but not the signed checkpoints.
func TestSignedCheckpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := SigningKey(filepath.Join(dir, "audit.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := PublicKey(filepath.Join(dir, "audit.key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "audit.jsonl")
	a, _ := OpenAudit(file, nil)
	a.key = key
	for i := 0; i < 2*CheckpointEvery+5; i++ {
		if err := a.Append(Entry{Device: "d", Method: "tools/call", Tool: "mempalace_search", Decision: "allow"}, false); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(file)
	if n := strings.Count(string(b), `"method":"checkpoint"`); n != 2 {
		t.Fatalf("%d checkpoints, want 2", n)
	}
	if _, err := Verify(file, pub); err != nil {
		t.Fatalf("clean log: %v", err)
	}
	// Rewrite: change a decision in line 10 and recompute every hash after.
	var out []string
	prev := "genesis"
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e Entry
		json.Unmarshal([]byte(line), &e)
		if i == 10 {
			e.Decision = "deny"
		}
		e.Prev = prev
		line, hash := sealLine(e)
		e.Hash = hash
		if nb, _ := json.Marshal(e); string(nb)+"\n" != string(line) {
			t.Fatalf("a sealed line is not what json.Marshal writes for its entry:\n%s\n%s", line, nb)
		}
		prev = hash
		out = append(out, strings.TrimSuffix(string(line), "\n"))
	}
	os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o600)
	if _, err := Verify(file, nil); err != nil {
		t.Fatalf("the rewritten chain should look intact without the key: %v", err)
	}
	if _, err := Verify(file, pub); err == nil || !strings.Contains(err.Error(), "checkpoint signature") {
		t.Fatalf("a rewritten log passed the signed checkpoints: %v", err)
	}
}

func TestUpstreamTokenFileMustBePrivate(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "upstream.token")
	os.WriteFile(f, []byte("tok\n"), 0o644)
	if _, err := ReadSecretFile(f); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable token file was accepted: %v", err)
	}
	os.Chmod(f, 0o600)
	if tok, err := ReadSecretFile(f); err != nil || tok != "tok" {
		t.Fatalf("%q %v", tok, err)
	}
}

// A token file that is a directory, or holds more than the token on one
// line, says so, never the token (attack27 t10: a directory was "readable
// by others (mode 755): chmod 600"; a two-line file started the gateway
// and every device got the upstream's refusal).
func TestUpstreamTokenFileSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "upstream.token")
	os.Mkdir(dir, 0o755)
	if _, err := ReadSecretFile(dir); err == nil || !strings.Contains(err.Error(), dir+" is a directory, not a file") || strings.Contains(err.Error(), "chmod") {
		t.Errorf("a directory: %v", err)
	}
	f := filepath.Join(t.TempDir(), "upstream.token")
	for _, body := range []string{"sEcReT-tok\nsecond\n", "sEcReT-tok more\n", "sEcReT-tok\r\nx"} {
		os.WriteFile(f, []byte(body), 0o600)
		_, err := ReadSecretFile(f)
		if err == nil || !strings.Contains(err.Error(), "the token alone, on one line") || strings.Contains(err.Error(), "sEcReT") {
			t.Errorf("%q: %v", body, err)
		}
	}
	// Blanks and empty lines around the token are not part of it (as
	// operator.md says; attack44 F11 found them taken silently, undocumented).
	for _, body := range []string{"sEcReT-tok\r\n", "  sEcReT-tok  \n", "sEcReT-tok\n\n", "\n\tsEcReT-tok\n \n"} {
		os.WriteFile(f, []byte(body), 0o600)
		if tok, err := ReadSecretFile(f); err != nil || tok != "sEcReT-tok" {
			t.Errorf("%q: %q %v", body, tok, err)
		}
	}
}

// A token file in .env form (attack28, a27/t10) is refused naming the
// file and the fix, never the value: taken whole, every call got the
// upstream's 401. A token with '=' in it (base64) is a token.
func TestUpstreamTokenFileInEnvFormIsRefused(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "upstream.token")
	for _, body := range []string{"MEMPALACE_MCP_HTTP_TOKEN=sEcReT-tok\n", "MEMPALACE_UPSTREAM_TOKEN=\"sEcReT-tok\"", "TOKEN=sEcReT=="} {
		os.WriteFile(f, []byte(body), 0o600)
		_, err := ReadSecretFile(f)
		if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "the token alone") || strings.Contains(err.Error(), "sEcReT") {
			t.Errorf("%q: %v", body, err)
		}
	}
	for _, tok := range []string{"QUJDRA==", "QUJDRGE=", "sEcReT=tok", "Abc=def", "a1B2c3/+=="} {
		os.WriteFile(f, []byte(tok+"\n"), 0o600)
		if got, err := ReadSecretFile(f); err != nil || got != tok {
			t.Errorf("the token %q: %q %v", tok, got, err)
		}
	}
}

// The primary is single-writer: the gateway lets one write through at a
// time, queues up to eight, and answers the rest with a rate-limit error
// (a JSON-RPC error in a 200, which an edge's outbox retries).
func TestSingleWriteSlot(t *testing.T) {
	t.Parallel()
	ds := make([]Device, len(devices))
	copy(ds, devices)
	for i := range ds {
		ds[i].ReadRate, ds[i].WriteRate = 1e6, 1e6
	}
	g := newGW(t, ds)
	g.primary.SetLatency("mempalace_add_drawer", 80*time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, limited := 0, 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, rpc, _ := g.call(g.tokens["desk-9b21"], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": fmt.Sprintf("concurrent %d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case rpc == nil:
				ok++
			case rpc["code"] == float64(CodeRateLimited):
				limited++
				if data, _ := rpc["data"].(map[string]any); data["wing"] != "shared" || data["rule"] != "write_queue" || data["device"] != "desk-9b21" {
					t.Errorf("write-queue limit data %v: want device, wing and rule", rpc["data"])
				}
			}
		}(i)
	}
	wg.Wait()
	if limited == 0 || ok < 9 || ok+limited != 20 {
		t.Fatalf("20 concurrent writes: %d through, %d limited", ok, limited)
	}
}

// A config change with a typo, seen by the watch, is logged with the
// config's absolute path and that the previous config stays in force (as
// SIGHUP's reload says); the device's token goes on working.
func TestWatchedTypoSaysThePreviousConfigStays(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices[:1])
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.srv.Watch(ctx)
	b, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a distinct mtime
	if err := os.WriteFile(g.cfgFile, bytes.Replace(b, []byte(`"devices"`), []byte(`"devicess"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged.String(), "not applied") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if out := logged.String(); !strings.Contains(out, "the previous config stays") || !strings.Contains(out, "config="+g.cfgFile) {
		t.Errorf("the watch's refusal of the change:\n%s", out)
	}
	if _, rpc, status := g.call(g.tokens["laptop-7f3a"], "kg_stats", nil); status != 200 || rpc != nil {
		t.Errorf("the device's token after the refused change: %d %v", status, rpc)
	}
}

// A diary write for another device's agent is refused naming the wing it
// would write (data.wing; the audit line's too), not "" (a leftover of
// attack36 N5).
func TestAForeignDiaryRefusalNamesItsWing(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	_, rpc, _ := g.call(g.tokens["laptop-7f3a"], "diary_write", map[string]any{"agent_name": "pi", "entry": "x"})
	data, _ := rpc["data"].(map[string]any)
	if rpc["code"] != float64(CodeDenied) || data["wing"] != "wing_pi" {
		t.Fatalf("a foreign agent's diary write: %v", rpc)
	}
}

// A drawer that is not on the primary (deleted, never filed) is, to a
// device that reads every wing, MemPalace's own "not found": it learns
// nothing from it that a wing check hides, and a "not visible to this
// device" sent its operator looking for a scope problem (attack112 F6).
// A device that reads some wings gets the one denial for a drawer that
// does not exist and one it may not see, as before.
func TestAMissingDrawerIsNotFoundToADeviceReadingEveryWing(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	missing := map[string]any{"drawer_id": "drawer_shared_r_0123456789abcdef01234567"}
	for _, id := range []string{"desk-9b21", "admin-0001"} {
		if res, rpc, _ := g.call(g.tokens[id], "get_drawer", missing); rpc != nil || !strings.Contains(strings.ToLower(str(res["error"])), "not found") {
			t.Errorf("%s's get_drawer of a missing drawer: %v %v, want the primary's not found", id, res, rpc)
		}
	}
	if _, rpc, _ := g.call(g.tokens["laptop-7f3a"], "get_drawer", missing); rpc == nil || !strings.Contains(fmt.Sprint(rpc), "not visible to this device") {
		t.Errorf("laptop's get_drawer of a missing drawer: %v, want not visible", rpc)
	}
}
