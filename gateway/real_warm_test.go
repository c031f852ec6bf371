package gateway

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// warmRig is a gateway with an op-id ledger in front of real serve, whose
// upstream transport is warmconn, and serve's coordination log opened
// read-only to count what landed.
type warmRig struct {
	t   *testing.T
	srv *realpalace.Server
	g   *gw
	log *sql.DB
	hc  *http.Client // the devices' client
}

func newWarmRig(t *testing.T, devs ...string) *warmRig {
	t.Helper()
	srv := realpalace.New(t).Serve(t, upstreamToken)
	var ds []Device
	for _, d := range devs {
		ds = append(ds, Device{ID: d, Label: d, Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@" + d}, Coordinator: true, ReadRate: 1e9, WriteRate: 1e9})
	}
	g := newGWAt(t, ds, &upstream{name: "serve", url: srv.URL})
	g.withLedger()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(srv.Palace().Dir, "logstream.sqlite3")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return &warmRig{t: t, srv: srv, g: g, log: db, hc: hc}
}

// answer is the gateway's answer to one call, as the edge reads it.
type answer struct {
	status int
	code   int // the JSON-RPC error's code, 0 for a result
	msg    string
	ok     bool // a result that says the call was made
}

func (a answer) String() string {
	return fmt.Sprintf("HTTP %d, code %d %q, ok %v", a.status, a.code, a.msg, a.ok)
}

// post sends one tools/call as dev and reads the answer; a transport
// failure is an answer with status 0.
func (r *warmRig) post(dev, tool string, args map[string]any, meta map[string]any) answer {
	params := map[string]any{"name": tool, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, r.g.http.URL+"/mcp", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+r.g.tokens[dev])
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return answer{msg: err.Error()}
	}
	defer resp.Body.Close()
	var env struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	a := answer{status: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		a.msg = "undecodable: " + err.Error()
		return a
	}
	if env.Error != nil {
		a.code, a.msg = env.Error.Code, env.Error.Message
		return a
	}
	if len(env.Result.Content) > 0 {
		a.msg = env.Result.Content[0].Text
		var m map[string]any
		json.Unmarshal([]byte(a.msg), &m) // not an object: not ok
		a.ok = !env.Result.IsError && m != nil && m["success"] != false && m["error"] == nil
	}
	return a
}

// appendEvent sends an event_append carrying op id op, body as its body.
func (r *warmRig) appendEvent(dev, op, body, resend string) answer {
	meta := map[string]any{ledger.MetaKey: op}
	if resend != "" {
		meta[ledger.ResendKey] = resend
	}
	return r.post(dev, "mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@" + dev, "body": body}, meta)
}

// read is a read every device may make.
func (r *warmRig) read(dev string) answer {
	return r.post(dev, "mempalace_event_list", map[string]any{"stream": "s", "limit": 1}, nil)
}

// landed is how many events with body serve's log holds (-1, and the
// test failed, if the log could not be read).
func (r *warmRig) landed(body string) int {
	var n int
	if err := r.log.QueryRow(`SELECT count(*) FROM events WHERE body = ?`, body).Scan(&n); err != nil {
		r.t.Errorf("count %q: %v", body, err) // Errorf: called from the devices' goroutines too
		return -1
	}
	return n
}

// opID is a well-formed op id, distinct per (dev, i).
func opID(dev string, i int) string {
	return fmt.Sprintf("%032x%032x", len(dev)*7919+int(dev[0]), i)
}

func (r *warmRig) restart(kill bool) {
	r.t.Helper()
	stop := r.srv.Stop
	if kill {
		stop = r.srv.Kill
	}
	if err := stop(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.srv.Restart(); err != nil {
		r.t.Fatal(err)
	}
}

// TestRealWarmServeRestartedBetweenCalls: serve is killed (or stopped)
// and started again on its port between every call, while the gateway
// holds a connection it dialled to the serve that is gone; then a write
// and a read go at once. Each must be answered on its first send (the
// dead connection is never used, and nothing is left in doubt), and
// every write is on serve exactly once.
func TestRealWarmServeRestartedBetweenCalls(t *testing.T) {
	r := newWarmRig(t, "dev1")
	const runs = 6
	for i := range runs {
		if a := r.read("dev1"); !a.ok { // leaves a spare dialled to this serve
			t.Fatalf("read before restart %d: %v", i, a)
		}
		r.restart(i%2 == 0)
		var w, rd answer
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			w = r.appendEvent("dev1", opID("dev1", i), fmt.Sprintf("restart write %d", i), "")
		}()
		go func() { defer wg.Done(); rd = r.read("dev1") }()
		wg.Wait()
		if !w.ok || w.status != 200 {
			t.Errorf("write %d after a restart: %v", i, w)
		}
		if !rd.ok || rd.status != 200 {
			t.Errorf("read %d after a restart: %v", i, rd)
		}
	}
	for i := range runs {
		if n := r.landed(fmt.Sprintf("restart write %d", i)); n != 1 {
			t.Errorf("write %d is on serve %d times, want 1", i, n)
		}
	}
}

// TestRealWarmAcrossIdlePauses: calls 5 to 12 s apart, around serve's own
// 10 s socket timeout and the transport's 4 s limit on a kept connection:
// every call is answered on its first send, every write lands once.
func TestRealWarmAcrossIdlePauses(t *testing.T) {
	r := newWarmRig(t, "dev1")
	pauses := []time.Duration{5 * time.Second, 11 * time.Second}
	for i, p := range pauses {
		if a := r.appendEvent("dev1", opID("dev1", i), fmt.Sprintf("paused write %d", i), ""); !a.ok {
			t.Errorf("write %d: %v", i, a)
		}
		time.Sleep(p)
		if a := r.read("dev1"); !a.ok {
			t.Errorf("read after a %s pause: %v", p, a)
		}
	}
	for i := range pauses {
		if n := r.landed(fmt.Sprintf("paused write %d", i)); n != 1 {
			t.Errorf("write %d is on serve %d times, want 1", i, n)
		}
	}
}

// edgeSend sends one write as the edge's outbox would until it is
// settled: a 503 ("not sent") again as it is, an op in flight again after
// a pause, an op in doubt looked up and sent again only if it is not on
// serve. Whenever the gateway says the write was not sent, serve must not
// hold it. It returns how many times the op was in doubt.
func (r *warmRig) edgeSend(dev string, i int, body string, bad func(string, ...any)) (doubts int) {
	op, resend := opID(dev, i), ""
	for try := 0; try < 200; try++ {
		a := r.appendEvent(dev, op, body, resend)
		switch {
		case a.ok:
			return doubts
		case a.status == http.StatusServiceUnavailable:
			if n := r.landed(body); n != 0 {
				bad("%s: answered %v, but serve holds it %d times", body, a, n)
				return doubts
			}
		case a.code == ledger.CodeInDoubt:
			doubts++
			if r.landed(body) != 0 {
				return doubts // it landed (or could not be counted: failed above): the look-up settles it
			}
			resend = "looked-up"
		case a.status == http.StatusBadGateway || a.code == ledger.CodeInFlight || a.status == 0:
			// may have applied, or being forwarded: the next send says which
		default:
			bad("%s: unexpected answer %v", body, a)
			return doubts
		}
		time.Sleep(100 * time.Millisecond)
	}
	bad("%s: never settled", body)
	return doubts
}

// TestRealWarmConcurrentDevicesThroughKills: three devices write and read
// at once while serve is killed and started again twice under them. The
// edge's rules settle every write; a write the gateway called "not sent"
// is never on serve; at the end each write is on serve exactly once, and
// the gateway answers reads and writes as before the kills.
func TestRealWarmConcurrentDevicesThroughKills(t *testing.T) {
	devs := []string{"dev1", "dev2", "dev3"}
	r := newWarmRig(t, devs...)
	const perDevice = 12
	var mu sync.Mutex
	var problems []string
	bad := func(f string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(f, args...))
		mu.Unlock()
	}
	doubts := 0
	ctx, stopReads := context.WithCancel(context.Background())
	var wg, readers sync.WaitGroup
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perDevice {
				n := r.edgeSend(d, i, fmt.Sprintf("%s write %d", d, i), bad)
				mu.Lock()
				doubts += n
				mu.Unlock()
				time.Sleep(150 * time.Millisecond)
			}
		}()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for ctx.Err() == nil {
				r.read(d) // during a kill a read may fail: only the end is checked
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	for k := range 2 {
		time.Sleep(1500 * time.Millisecond)
		r.restart(k == 0)
	}
	wg.Wait()
	stopReads()
	readers.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	for _, d := range devs {
		for i := range perDevice {
			if n := r.landed(fmt.Sprintf("%s write %d", d, i)); n != 1 {
				t.Errorf("%s write %d is on serve %d times, want 1", d, i, n)
			}
		}
		if a := r.read(d); !a.ok {
			t.Errorf("%s: a read after the kills: %v", d, a)
		}
	}
	t.Logf("%d writes, %d answers in doubt", len(devs)*perDevice, doubts)
}

// TestRealWarmLargeWriteRefusedFromItsHead: serve refuses a request from
// its head alone (a token it does not know: 401; a body over its 16 MiB
// limit: 413) and closes without reading the body, so a large body fails
// to go out. The device still gets serve's reason: the gateway's token
// (naming its fix), or "Request too large" (the gateway's re-encoding of
// U+2028 doubles a body the device sent under the gateway's own limit:
// the gateway now refuses it itself, unsent, attack100 F5) -
// never "upstream unreachable: not sent", which sends the operator after
// the network and the edge to resend it for ever.
func TestRealWarmLargeWriteRefusedFromItsHead(t *testing.T) {
	r := newWarmRig(t, "dev1")
	event := func(body string) map[string]any {
		return map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@dev1", "body": body}
	}
	over := event("b")
	over["metadata"] = map[string]any{"k": strings.Repeat("\u2028", 5<<20)}
	if a := r.post("dev1", "mempalace_event_append", over, nil); a.status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(a.msg, "Request too large") {
		t.Errorf("a write over serve's limit: %v, want the gateway's 413", a)
	}
	r.g.srv.UpstreamToken = func() string { return "not-the-upstream-token" }
	large := event("b") // within the gateway's caps: an 8 MiB metadata (serve's own 64 KiB cap is never reached)
	large["metadata"] = map[string]any{"k": strings.Repeat("x", 8<<20)}
	if a := r.post("dev1", "mempalace_event_append", large, nil); a.status != http.StatusServiceUnavailable || a.msg != UpstreamRefused {
		t.Errorf("a large write with the gateway's token refused: %v, want 503 %q", a, UpstreamRefused)
	}
}

// slowProxy passes calls to serve through realpalace.Proxy and holds each
// answer for hold once serve has made it; it notes when the gateway gave
// a call up (its request's context ended while the answer was held).
type slowProxy struct {
	p        *realpalace.Proxy
	hold     time.Duration
	mu       sync.Mutex
	givenUp  int
	answered int
}

func (s *slowProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &heldAnswer{header: http.Header{}}
	s.p.ServeHTTP(rec, r) // serve makes the call
	select {
	case <-time.After(s.hold):
	case <-r.Context().Done():
		s.mu.Lock()
		s.givenUp++
		s.mu.Unlock()
		return
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
	s.mu.Lock()
	s.answered++
	s.mu.Unlock()
}

type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldAnswer) Header() http.Header         { return h.header }
func (h *heldAnswer) WriteHeader(s int)           { h.status = s }
func (h *heldAnswer) Write(b []byte) (int, error) { return h.body.Write(b) }

// TestRealWarmSlowUpstream: serve's answers arrive after the device has
// given up. A write's upstream call is not given up with the device: the
// ledger records its answer, the device's resends are told it is in
// flight, then answered from the record, and the write is on serve once.
// A read is given up upstream with the device (no call left waiting).
func TestRealWarmSlowUpstream(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	slow := &slowProxy{p: realpalace.NewProxy(t, srv.URL), hold: 3 * time.Second} // its own listener unused: slow serves the gateway
	front := httptest.NewServer(slow)
	t.Cleanup(front.Close)
	dev := Device{ID: "dev1", Label: "dev1", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@dev1"}, Coordinator: true, ReadRate: 1e9, WriteRate: 1e9}
	g := newGWAt(t, []Device{dev}, &upstream{name: "slow serve", url: front.URL + "/mcp"})
	g.withLedger()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(srv.Palace().Dir, "logstream.sqlite3")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &warmRig{t: t, srv: srv, g: g, log: db, hc: &http.Client{Timeout: time.Second, Transport: &http.Transport{}}}
	t.Cleanup(r.hc.CloseIdleConnections)

	if a := r.read("dev1"); a.status != 0 {
		t.Fatalf("a read slower than the device's patience: %v, want the device's own timeout", a)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("after 10 s: %s", what)
			}
		}
	}
	waitFor("the gateway gives the read up upstream", func() bool { slow.mu.Lock(); defer slow.mu.Unlock(); return slow.givenUp == 1 })

	op := opID("dev1", 1)
	first := r.appendEvent("dev1", op, "slow write", "")
	if first.status != 0 {
		t.Fatalf("a write slower than the device's patience: %v, want the device's own timeout", first)
	}
	var last answer
	for try := 0; try < 100; try++ {
		if last = r.appendEvent("dev1", op, "slow write", ""); last.code != ledger.CodeInFlight {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !last.ok {
		t.Errorf("the resend after the write's answer came: %v, want the recorded answer", last)
	}
	if n := r.landed("slow write"); n != 1 {
		t.Errorf("the slow write is on serve %d times, want 1", n)
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if slow.answered != 1 || slow.givenUp != 1 {
		t.Errorf("serve's answers: %d delivered, %d given up; want the write's delivered and the read's given up", slow.answered, slow.givenUp)
	}
}
