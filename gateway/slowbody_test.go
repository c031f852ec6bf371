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
// 16 MiB bodies held 3.5 GB). A request within both is served.
func TestTheBytesOfBodiesInFlightAreBounded(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.srv.bodyGrace = 10 * time.Second
	g.srv.flight.device, g.srv.flight.gateway = 2500, 3500
	addr := strings.TrimPrefix(g.http.URL, "http://")
	head := func(device string) string {
		return "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nHost: " + addr + "\r\nAuthorization: Bearer " + g.tokens[device] + "\r\n"
	}
	for _, device := range []string{"laptop-7f3a", "laptop-7f3a", "desk-9b21"} { // 3000 bytes held
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, head(device)+"\r\n"+`{"jsonrpc"`)
	}
	waitUntil(t, "the stalled bodies in flight", func() bool {
		g.srv.flight.mu.Lock()
		defer g.srv.flight.mu.Unlock()
		return g.srv.flight.total == 3000
	})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("x", 600) + `"}}}`
	for _, c := range []struct {
		name, device, body string
		status             int
		says               string
	}{
		{"laptop's 600 more bytes (its 2500)", "laptop-7f3a", big, http.StatusTooManyRequests, "laptop-7f3a has 2000 bytes of request bodies being served"},
		{"desk's 600 more bytes (the gateway's 3500)", "desk-9b21", big, http.StatusTooManyRequests, "the gateway holds 3000 bytes"},
		{"desk's ping, within both", "desk-9b21", ping, http.StatusOK, ""},
	} {
		req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+g.tokens[c.device])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.says) || c.status == 429 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %s (Retry-After %q); want %d saying %q", c.name, resp.StatusCode, b, resp.Header.Get("Retry-After"), c.status, c.says)
		}
	}
	if e := g.auditLog(); e[len(e)-2].Rule != ruleInFlight {
		t.Errorf("the refusal's line: %+v (want rule in_flight)", e[len(e)-2])
	}
}
