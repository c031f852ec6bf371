package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// stalled sends head (a request line and headers) and the first bytes of
// a body, then nothing; it returns the answer's status and whether the
// gateway closed the connection after it, each within wait.
func (g *gw) stalled(t *testing.T, head, part string, wait time.Duration) (status int, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(g.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head+"\r\n"+part); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	return resp.StatusCode, errors.Is(err, io.EOF) || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded))
}

// attack69 F5: a request that sends part of its body and stops is
// answered, and its connection closed, at once when the gateway refuses
// it before the body (no token, a wrong token, a wrong Host), and after
// its body's time (bodyTime) when its device is known. Before, net/http
// read the rest of the body before the 401 went out: the client got no
// answer in 400 s, and held the connection and its goroutine.
func TestStalledBodyIsAnsweredAndItsConnectionClosed(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 300 * time.Millisecond
	host := "Host: " + strings.TrimPrefix(g.http.URL, "http://") + "\r\n"
	post := "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	for _, c := range []struct {
		name, head string
		status     int
		within     time.Duration
	}{
		{"no token", post + host, http.StatusUnauthorized, time.Second},
		{"a wrong token", post + host + "Authorization: Bearer nope\r\n", http.StatusUnauthorized, time.Second},
		{"chunked, no token", "POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n" + host, http.StatusUnauthorized, time.Second},
		{"a wrong host", post + "Host: evil.example\r\n", http.StatusForbidden, time.Second},
		{"another route", "POST /other HTTP/1.1\r\nContent-Length: 1000\r\n" + host, http.StatusNotFound, time.Second},
		{"a device's token", post + host + "Authorization: Bearer " + g.tokens["laptop-7f3a"] + "\r\n", http.StatusRequestTimeout, 3 * time.Second},
	} {
		part := `{"jsonrpc"`
		if strings.Contains(c.head, "chunked") {
			part = "a\r\n" + part
		}
		start := time.Now()
		status, closed := g.stalled(t, c.head, part, c.within)
		if status != c.status || !closed {
			t.Errorf("%s: status %d, closed %v after %s; want %d and the connection closed within %s", c.name, status, closed, time.Since(start).Round(time.Millisecond), c.status, c.within)
		}
	}
}

// A device's body that arrives slowly but steadily, for longer than
// bodyGrace, is read in full: its time grows with its length (bodyTime).
func TestSlowBodyStillArrives(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 300 * time.Millisecond
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","room":"r","content":"` + strings.Repeat("slow words ", 8<<10) + `"}}}`
	pr, pw := io.Pipe()
	go func() { // ends with the write: the request reads the pipe to its end
		for i := 0; i < len(body); i += 8 << 10 {
			time.Sleep(60 * time.Millisecond)
			pw.Write([]byte(body[i:min(i+8<<10, len(body))]))
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", g.http.URL+"/mcp", pr)
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", "Bearer "+g.tokens["laptop-7f3a"])
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); resp.StatusCode != 200 || !strings.Contains(string(b), "drawer_id") || took < g.srv.bodyGrace {
		t.Errorf("a %d-byte body over %s: %d %.300s", len(body), took, resp.StatusCode, b)
	}
}

// A body the gateway stops waiting for is audited as the 408 the device
// was answered, not as a device that hung up (the review of attack69 F8's
// 499: the deadline ends the request's context too, and the line said
// 499).
func TestAStalledBodysLineSaysItsAnswer(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 300 * time.Millisecond
	host := "Host: " + strings.TrimPrefix(g.http.URL, "http://") + "\r\n"
	post := "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	before := len(g.auditLog())
	status, _ := g.stalled(t, post+host+"Authorization: Bearer "+g.tokens["laptop-7f3a"]+"\r\n", `{"jsonrpc"`, 3*time.Second)
	var e Entry
	waitUntil(t, "the stalled request's line", func() bool {
		log := g.auditLog()
		if len(log) > before {
			e = log[len(log)-1]
		}
		return len(log) > before
	})
	if status != http.StatusRequestTimeout || e.Status != status || e.Note != "" {
		t.Errorf("answered %d; audited %d, note %q (want the 408 on both, no note)", status, e.Status, e.Note)
	}
}

// A device over both its rates is refused before its body, as a request
// with no token is: its stalled body holds no connection until the body
// deadline (attack71 F2: 1,883 over-rate requests of one device were
// answered only when their clients hung up).
func TestAnOverRateDeviceIsRefusedBeforeItsBody(t *testing.T) {
	t.Parallel()
	slow := []Device{{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, ReadRate: 0.001, WriteRate: 0.001}}
	g := newGW(t, slow)
	tok := g.tokens["laptop-7f3a"]
	for range 100 {
		g.call(tok, "list_wings", map[string]any{})
	}
	for i := range 20 {
		g.call(tok, "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": fmt.Sprintf("write %d", i)})
	}
	g.srv.bodyGrace = 5 * time.Second
	host := "Host: " + strings.TrimPrefix(g.http.URL, "http://") + "\r\n"
	post := "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	start := time.Now()
	status, closed := g.stalled(t, post+host+"Authorization: Bearer "+tok+"\r\n", `{"jsonrpc"`, 3*time.Second)
	if status != http.StatusOK || !closed || time.Since(start) > 2*time.Second {
		t.Errorf("a stalled body of a device over both rates: status %d, closed %v after %v (want its refusal at once, the connection closed)", status, closed, time.Since(start))
	}
	if e := g.auditLog(); e[len(e)-1].Rule != ruleRateRead {
		t.Errorf("its line: %+v (want rule rate:read)", e[len(e)-1])
	}
}

// One device has at most maxInFlight requests served at once: past them a
// request is refused 429 before its body (attack72 F4: a device over its
// read rate alone held 50 stalled 16 MB uploads, each to its deadline).
func TestADeviceHasABoundedNumberOfRequestsInFlight(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 10 * time.Second
	addr := strings.TrimPrefix(g.http.URL, "http://")
	host := "Host: " + addr + "\r\n"
	head := "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n" + host + "Authorization: Bearer " + g.tokens["laptop-7f3a"] + "\r\n"
	for range maxInFlight {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, head+"\r\n"+`{"jsonrpc"`)
	}
	waitUntil(t, "the stalled requests in flight", func() bool {
		g.srv.flight.mu.Lock()
		defer g.srv.flight.mu.Unlock()
		return g.srv.flight.n["laptop-7f3a"] == maxInFlight
	})
	start := time.Now()
	if status, closed := g.stalled(t, head, `{"jsonrpc"`, 3*time.Second); status != http.StatusTooManyRequests || !closed || time.Since(start) > 2*time.Second {
		t.Errorf("one request past the device's %d in flight: %d, closed %v, after %v (want 429 at once)", maxInFlight, status, closed, time.Since(start))
	}
	if status, _ := g.post(g.tokens["desk-9b21"], `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != http.StatusOK {
		t.Errorf("another device's ping meanwhile: %d", status)
	}
}

// A body that did not arrive within its time is answered as not applied,
// in a code an edge's outbox takes as "not now" (ledger.CodeBodyTimeout),
// with the floor and the fix named: before, it was -32600, which an edge
// takes as a strict parse's refusal of the write as written, and the op
// (a big checkpoint over a slow uplink) was dead at once (attack94 F5).
func TestALateBodyIsAnsweredNotApplied(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 300 * time.Millisecond
	pr, pw := io.Pipe() // never written: the body stops after its first bytes
	defer pw.Close()
	req, _ := http.NewRequest("POST", g.http.URL+"/mcp", io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"`), pr))
	req.ContentLength = 1000
	req.Header.Set("Authorization", "Bearer "+g.tokens["laptop-7f3a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Error struct {
			Code    int
			Message string
		}
	}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &a)
	if resp.StatusCode != http.StatusRequestTimeout || a.Error.Code != ledger.CodeBodyTimeout {
		t.Fatalf("a body that stopped: %d %s; want 408, code %d", resp.StatusCode, b, ledger.CodeBodyTimeout)
	}
	for _, w := range []string{"1000 bytes", "nothing applied", "64 KiB/s", "a faster link", "smaller"} {
		if !strings.Contains(a.Error.Message, w) {
			t.Errorf("its message %q does not say %q", a.Error.Message, w)
		}
	}
}

// The bytes of bodies in flight are bounded, one device's and every
// device's: past either a request is refused 429 (rule in_flight, with a
// Retry-After) before its body is read (attack100 F4: 32 of one device's
// 16 MiB bodies held 3.5 GB). A small body (under smallBytes) counts in
// its device's bound only: devices holding every device's bytes with big
// bodies sent slowly do not refuse another device's ping (review32 R4:
// they did, 429 in_flight, for as long as the bodies took).
func TestTheBytesOfBodiesInFlightAreBounded(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 10 * time.Second
	g.srv.flight.device, g.srv.flight.gateway = 7<<20, 9<<20
	addr := strings.TrimPrefix(g.http.URL, "http://")
	head := func(device string) string {
		return fmt.Sprintf("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", 3<<20, addr, g.tokens[device])
	}
	stall := func(device string) (status int, says string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, head(device)+`{"jsonrpc"`)
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, "" // stalled, being read
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b) + " Retry-After: " + resp.Header.Get("Retry-After")
	}
	for _, device := range []string{"laptop-7f3a", "laptop-7f3a", "desk-9b21"} { // 9 MiB held
		if status, says := stall(device); status != 0 {
			t.Fatalf("%s's stalled 3 MiB body: %d %s; want it read", device, status, says)
		}
	}
	for _, c := range []struct{ name, device, says string }{
		{"laptop's 3 MiB more (its 7 MiB)", "laptop-7f3a", "laptop-7f3a has 6291456 bytes of request bodies"},
		{"admin's 3 MiB (the gateway's 9 MiB)", "admin-0001", "the gateway holds 9437184 bytes"},
	} {
		if status, says := stall(c.device); status != http.StatusTooManyRequests || !strings.Contains(says, c.says) || strings.HasSuffix(says, "Retry-After: ") {
			t.Errorf("%s: %d %s; want 429 saying %q, with a Retry-After", c.name, status, says, c.says)
		}
	}
	if e := g.auditLog(); e[len(e)-1].Rule != ruleInFlight {
		t.Errorf("the refusal's line: %+v (want rule in_flight)", e[len(e)-1])
	}
	for _, device := range []string{"admin-0001", "desk-9b21", "laptop-7f3a"} {
		if status, m := g.post(g.tokens[device], `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != http.StatusOK {
			t.Errorf("%s's ping with every device's bytes held: %d %v; want it served", device, status, m)
		}
	}
}

// An upstream answer counts, past its first smallBytes, in the bytes its
// device and the gateway hold in flight, as it is read: a get_drawers
// whose answer would pass the device's bound is refused, saying to ask
// for fewer ids, a smaller one is served, and what they held is given
// back (review32 R3: one token's 32 reads of 64 MiB answers held > 2 GB,
// answers being counted nowhere).
func TestAnAnswerCountsInTheBytesInFlight(t *testing.T) {
	t.Parallel()
	g := newGW(t, bulkDevices)
	g.srv.flight.device = 2 << 20
	admin := g.tokens["admin-0001"]
	var ids []any
	for i := range 40 { // 40 drawers of 99,000 bytes: an answer of 3.8 MiB
		res, rpc, _ := g.call(admin, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": fmt.Sprintf("%d %s", i, strings.Repeat("x", 99_000))})
		if rpc != nil || res["drawer_id"] == nil {
			t.Fatalf("add_drawer: %v %v", res, rpc)
		}
		ids = append(ids, res["drawer_id"])
	}
	if text := g.rawText(admin, "get_drawers", map[string]any{"drawer_ids": ids}); !strings.Contains(text, "upstream answer refused") ||
		!strings.Contains(text, "admin-0001 has") || !strings.Contains(text, "ask for less") {
		t.Errorf("get_drawers of an answer past the device's 2 MiB: %.300s; want refused, saying so", text)
	} else if i := strings.Index(text, "a read applies nothing: ask for less"); i < 0 || i > 150 {
		// an edge reads a refusal's first 200 characters for its cue to ask in halves (attack103 F1)
		t.Errorf("the refusal's 'ask for less' starts at character %d, past what an edge reads: %.300s", i, text)
	}
	if text := g.rawText(admin, "get_drawers", map[string]any{"drawer_ids": ids[:15]}); strings.HasPrefix(text, "error:") {
		t.Errorf("get_drawers of an answer within it: %.300s; want it served", text)
	}
	waitUntil(t, "the reads' bytes given back", func() bool {
		g.srv.flight.mu.Lock()
		defer g.srv.flight.mu.Unlock()
		return len(g.srv.flight.bytes) == 0 && g.srv.flight.total == 0
	})
}
