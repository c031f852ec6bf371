package fakepalace_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	. "github.com/joakimp/devbox-config/fakepalace"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

const listReq = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

func TestHTTPWireAsMempalaceServe(t *testing.T) {
	_, srv := testbed.Primary(t, Options{}, HTTPOptions{Token: "s3cret"})
	u := srv.URL()
	base := strings.TrimSuffix(u, "/mcp")
	auth := map[string]string{"Authorization": "Bearer s3cret"}

	if r, b := testbed.Request(t, "GET", base+"/healthz", "", nil); r.StatusCode != 200 || b != "ok\n" {
		t.Errorf("healthz: %d %q", r.StatusCode, b)
	}
	if r, _ := testbed.Request(t, "GET", u, "", auth); r.StatusCode != 404 {
		t.Errorf("GET /mcp: %d, want 404 (no server stream)", r.StatusCode)
	}
	for _, m := range []string{"PUT", "DELETE", "OPTIONS"} {
		if r, _ := testbed.Request(t, m, u, "", auth); r.StatusCode != 501 {
			t.Errorf("%s /mcp: %d, want 501", m, r.StatusCode)
		}
	}
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Authorization": "bearer s3cret"}, {"Authorization": "Bearer  s3cret"}} {
		r, _ := testbed.Request(t, "POST", u, listReq, h)
		if r.StatusCode != 401 || r.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("auth %v: %d %q", h, r.StatusCode, r.Header.Get("WWW-Authenticate"))
		}
	}
	if r, _ := testbed.Request(t, "GET", base+"/statusz", "", nil); r.StatusCode != 401 {
		t.Errorf("statusz without token: %d", r.StatusCode)
	}
	if r, b := testbed.Request(t, "GET", base+"/statusz", "", auth); r.StatusCode != 200 || !strings.Contains(b, `"name":"mempalace"`) || strings.Contains(b, "s3cret") {
		t.Errorf("statusz: %d %s", r.StatusCode, b)
	}
	if r, _ := testbed.Request(t, "POST", u, listReq, map[string]string{"Authorization": "Bearer s3cret", "Host": "palace.example.org"}); r.StatusCode != 403 {
		t.Errorf("foreign Host on a loopback bind: %d", r.StatusCode)
	}
	if r, _ := testbed.Request(t, "POST", u, listReq, map[string]string{"Authorization": "Bearer s3cret", "Origin": "https://evil.example"}); r.StatusCode != 403 {
		t.Errorf("foreign Origin: %d", r.StatusCode)
	}
	if r, _ := testbed.Request(t, "POST", u, listReq, map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://localhost:5173"}); r.StatusCode != 200 {
		t.Errorf("loopback Origin: %d", r.StatusCode)
	}
	if r, b := testbed.Request(t, "POST", u, "{not json", auth); r.StatusCode != 400 || !strings.Contains(b, "-32700") {
		t.Errorf("bad JSON: %d %s", r.StatusCode, b)
	}
	if r, b := testbed.Request(t, "POST", u, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, auth); r.StatusCode != 202 || b != "" {
		t.Errorf("notification: %d %q", r.StatusCode, b)
	}
	if r, _ := testbed.Request(t, "GET", base+"/nope", "", nil); r.StatusCode != 404 {
		t.Errorf("unknown path: %d", r.StatusCode)
	}
	// Over 16 MiB declared: 413 before the body is read.
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nContent-Length: 16777217\r\n\r\n{")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.Contains(line, "413") {
		t.Errorf("oversize: %q", line)
	}
}

func TestSessionMode(t *testing.T) {
	_, srv := testbed.Primary(t, Options{}, HTTPOptions{SessionMode: true})
	r, _ := testbed.Request(t, "POST", srv.URL(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no Mcp-Session-Id issued")
	}
	if r, _ := testbed.Request(t, "POST", srv.URL(), listReq, nil); r.StatusCode != 400 {
		t.Errorf("no session id: %d", r.StatusCode)
	}
	if r, _ := testbed.Request(t, "POST", srv.URL(), listReq, map[string]string{"Mcp-Session-Id": sid}); r.StatusCode != 200 {
		t.Errorf("known session: %d", r.StatusCode)
	}
	srv.ExpireSessions()
	if r, _ := testbed.Request(t, "POST", srv.URL(), listReq, map[string]string{"Mcp-Session-Id": sid}); r.StatusCode != 404 {
		t.Errorf("expired session: %d, want 404", r.StatusCode)
	}
}

func TestFaults(t *testing.T) {
	pl, srv := testbed.Primary(t, Options{}, HTTPOptions{})
	add := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"landed"}}}`

	srv.FailNext(2, Fail5xx)
	for i := 0; i < 2; i++ {
		if r, _ := testbed.Request(t, "POST", srv.URL(), add, nil); r.StatusCode != 503 {
			t.Fatalf("fail 5xx #%d: %d", i, r.StatusCode)
		}
	}
	if len(pl.Dump().Drawers) != 0 {
		t.Fatal("a 5xx applied the write")
	}
	srv.FailNext(1, FailReset)
	if _, err := http.Post(srv.URL(), "application/json", strings.NewReader(add)); err == nil {
		t.Fatal("reset: the request got an answer")
	}
	if len(pl.Dump().Drawers) != 0 {
		t.Fatal("a reset applied the write")
	}
	// Apply, then drop: the client sees a failure for a write that landed.
	srv.DropAfterApply(1)
	if _, err := http.Post(srv.URL(), "application/json", strings.NewReader(add)); err == nil {
		t.Fatal("drop-after-apply: the request got an answer")
	}
	if len(pl.Dump().Drawers) != 1 {
		t.Fatal("drop-after-apply: the write did not land")
	}
	// Read-only: writes refused with -32003 and hidden from tools/list.
	pl.SetReadOnly(true)
	_, b := testbed.Request(t, "POST", srv.URL(), add, nil)
	if !strings.Contains(b, `"code":-32003`) {
		t.Fatalf("read-only write: %s", b)
	}
	_, b = testbed.Request(t, "POST", srv.URL(), listReq, nil)
	if strings.Contains(b, "mempalace_add_drawer") || strings.Contains(b, "mempalace_hook_settings") || !strings.Contains(b, "mempalace_search") {
		t.Fatal("read-only tools/list")
	}
	pl.SetReadOnly(false)
	// Latency per tool.
	pl.SetLatency("mempalace_status", 150*time.Millisecond)
	start := time.Now()
	testbed.Request(t, "POST", srv.URL(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status"}}`, nil)
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("latency not applied")
	}
	// The control endpoint does the same for an out-of-process primary.
	if r, _ := testbed.Request(t, "POST", strings.TrimSuffix(srv.URL(), "/mcp")+"/_fake/control", `{"fail_next":1,"fail_kind":"5xx"}`, nil); r.StatusCode != 200 {
		t.Fatal("control")
	}
	if r, _ := testbed.Request(t, "POST", srv.URL(), listReq, nil); r.StatusCode != 503 {
		t.Fatalf("control fail_next: %d", r.StatusCode)
	}
}

func TestStopStartSamePortKeepsThePalace(t *testing.T) {
	dir := t.TempDir()
	pl, srv := testbed.Primary(t, Options{Dir: dir}, HTTPOptions{})
	c := &httpConn{url: srv.URL()}
	call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "survives"})
	url := srv.URL()
	srv.Stop()
	srv.Stop() // again, as testbed.Primary's Cleanup will: harmless
	if _, err := http.Post(url, "application/json", strings.NewReader(listReq)); err == nil {
		t.Fatal("a stopped primary answered")
	}
	_ = pl
	// A new process on the same state directory and port.
	pl2, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := pl2.NewHTTP(HTTPOptions{})
	if err := srv2.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	defer srv2.Stop()
	if srv2.URL() != url {
		t.Fatalf("port changed: %s vs %s", srv2.URL(), url)
	}
	if l := call(t, &httpConn{url: url}, "mempalace_list_drawers", nil); l["total"] != 1.0 {
		t.Fatalf("state lost across restart: %v", l)
	}
	// In-process restart keeps the port too.
	srv2.Stop()
	if err := srv2.Start(""); err != nil || srv2.URL() != url {
		t.Fatalf("restart: %v %s", err, srv2.URL())
	}
}

func TestSearchAcrossInstancesAndEmbedders(t *testing.T) {
	text := "decided to use sqlite for the outbox"
	dist := func(opts Options) (float64, map[string]any) {
		pl, _ := New(opts)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go pl.ServeStdio(inR, outW, io.Discard)
		defer inW.Close()
		c := &stdioConn{in: inW, out: bufio.NewReader(outR)}
		call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": text})
		h := call(t, c, "mempalace_search", map[string]any{"query": "outbox storage decision"})["results"].([]any)[0].(map[string]any)
		return h["distance"].(float64), h
	}
	a, _ := dist(Options{})
	b, _ := dist(Options{})
	c, _ := dist(Options{Embedder: "embeddinggemma"})
	if a != b {
		t.Fatalf("same drawer, same embedder, different distances: %v %v", a, b)
	}
	if a == c {
		t.Fatalf("a different embedder gave the same distance %v: a mismatch would be invisible", a)
	}
	if _, h := dist(Options{OmitDrawerID: true}); h["drawer_id"] != nil {
		t.Fatal("3.6.0 mode still returns drawer_id")
	}
}

func TestEventWaitWakesOnAppend(t *testing.T) {
	_, srv := testbed.Primary(t, Options{}, HTTPOptions{})
	c := &httpConn{url: srv.URL()}
	var wg sync.WaitGroup
	var got map[string]any
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		got = call(t, c, "mempalace_event_wait", map[string]any{"stream": "s", "timeout_ms": 10000})
	}()
	time.Sleep(100 * time.Millisecond)
	call(t, c, "mempalace_event_append", map[string]any{"type": "ping", "stream": "s", "room": "r", "from_agent": "a"})
	wg.Wait()
	if got["timed_out"] != false || got["count"] != 1.0 || time.Since(start) > 5*time.Second {
		t.Fatalf("wait: %v after %v", got, time.Since(start))
	}
}

// The program: as mempalace-mcp over stdio it persists to the palace path,
// ignores a line that is not JSON, and exits on EOF.
func TestProgramStdio(t *testing.T) {
	testbed.Integration(t, "builds the test double's program")
	bin := filepath.Join(t.TempDir(), "mempalace-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/fakepalace").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	palace := filepath.Join(t.TempDir(), "palace")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "MEMPALACE_PALACE_PATH="+palace)
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`this line is not json`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mempalace_diary_write","arguments":{"agent_name":"opencode","entry":"from stdio"}}}`,
	}, "\n") + "\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v %s", err, errb.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("did not exit on stdin EOF")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 responses (none for the bad line), got %d: %s", len(lines), out.String())
	}
	st, err := ReadDump(palace)
	if err != nil || len(st.Drawers) != 1 {
		t.Fatalf("dump: %v %v", st, err)
	}
	for _, d := range st.Drawers {
		var m map[string]any
		b, _ := json.Marshal(d)
		json.Unmarshal(b, &m)
		if m["wing"] != "wing_opencode" || m["content"] != "from stdio" {
			t.Fatalf("diary stored as %v", m)
		}
	}
}

// Real MemPalace answers initialize without server instructions; the
// double sends them only when asked (Options.Instructions, --instructions),
// for tests of what a client does with them.
func TestInitializeInstructions(t *testing.T) {
	for _, want := range []string{"", "owed: 2 asks"} {
		_, srv := testbed.Primary(t, Options{Instructions: want}, HTTPOptions{})
		_, body := testbed.Request(t, "POST", srv.URL(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, nil)
		var r struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		got, has := r.Result["instructions"]
		if want == "" && has || want != "" && got != want {
			t.Errorf("Instructions %q: initialize answered %s", want, body)
		}
	}
}
