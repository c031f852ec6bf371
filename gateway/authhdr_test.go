package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// An outside tester's findings on the gateway's HTTP surface: each is
// checked through the real handler, by its status and its audit line.

// send makes one request with the headers given (a header may repeat).
func (g *gw) send(method, path, body string, hdr [][2]string) (int, string) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.http.URL+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	for _, h := range hdr {
		req.Header.Add(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lastAudit checks that the request just made wrote exactly one audit
// line and returns it.
func (g *gw) lastAudit(before int, what string) Entry {
	g.t.Helper()
	log := g.auditLog()
	if len(log) != before+1 {
		g.t.Fatalf("%s: %d audit lines, want 1: %+v", what, len(log)-before, log[before:])
	}
	return log[len(log)-1]
}

const pingBody = `{"jsonrpc":"2.0","id":1,"method":"ping"}`

// Finding 1: a query parameter a route does not take is refused (400,
// naming it) on every route, /healthz and /mcp included, as the docs say.
func TestUnknownQueryRefusedOnEveryRoute(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := [][2]string{{"Authorization", "Bearer " + g.tokens["admin-0001"]}}
	for _, c := range []struct {
		method, path, body string
		hdr                [][2]string
		device             string
	}{
		{"GET", "/healthz?x=1", "", nil, ""},
		{"GET", "/healthz?", "", nil, ""}, // an empty query is none: allowed below
		{"GET", "/healthz?x", "", nil, ""},
		{"POST", "/mcp?x=1", pingBody, admin, "admin-0001"},
		{"POST", "/mcp?session=a&session=b", pingBody, admin, "admin-0001"},
		{"GET", "/statusz?verbose=1", "", admin, "admin-0001"},
		{"GET", "/sync/ops?origin=a&x=1", "", admin, "admin-0001"},
		{"GET", "/logstream/stream?to_agent=a&x=1", "", admin, "admin-0001"},
	} {
		what := c.method + " " + c.path
		before := len(g.auditLog())
		code, body := g.send(c.method, c.path, c.body, c.hdr)
		if c.path == "/healthz?" {
			if code != 200 {
				t.Errorf("%s: HTTP %d, want 200", what, code)
			}
			g.lastAudit(before, what)
			continue
		}
		if code != 400 || !strings.Contains(body, "query parameter") {
			t.Errorf("%s: HTTP %d %q, want 400 naming the query parameter", what, code, body)
		}
		e := g.lastAudit(before, what)
		if e.Status != 400 || e.Decision != VerdictDeny || e.Rule != ruleQuery || e.Device != c.device || e.UpstreamStatus != 0 {
			t.Errorf("%s: audit line %+v, want a denial by %q for %q", what, e, ruleQuery, c.device)
		}
	}
}

// Finding 2: the auth scheme is case-insensitive (RFC 9110 §11.1): any
// case of "Bearer" authenticates; anything else is still 401.
func TestBearerSchemeAnyCase(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	tok := g.tokens["laptop-7f3a"]
	for _, h := range []string{"bearer " + tok, "BEARER " + tok, "bEaReR " + tok, "Bearer  " + tok} {
		before := len(g.auditLog())
		code, body := g.send("POST", "/mcp", pingBody, [][2]string{{"Authorization", h}})
		if code != 200 || !strings.Contains(body, `"result"`) {
			t.Errorf("%.10q…: HTTP %d %s, want the ping answered", h, code, body)
		}
		if e := g.lastAudit(before, h[:7]); e.Decision != VerdictAllow || e.Device != "laptop-7f3a" {
			t.Errorf("%.10q…: audit line %+v", h, e)
		}
	}
	for _, h := range []string{"Basic " + tok, "Bearer" + tok, "Bearer", "Bearer ", tok, "Bearerx " + tok, "Bearer " + tok + " x"} {
		before := len(g.auditLog())
		if code, _ := g.send("POST", "/mcp", pingBody, [][2]string{{"Authorization", h}}); code != 401 {
			t.Errorf("%.10q…: HTTP %d, want 401", h, code)
		}
		if e := g.lastAudit(before, h); e.Decision != VerdictDeny || e.Rule != ruleAuthenticate || e.Status != 401 || e.Device != "" {
			t.Errorf("%.10q…: audit line %+v", h, e)
		}
	}
}

// Finding 3: two Authorization headers are ambiguous credentials (which
// one a proxy or the upstream would use is anyone's guess): refused with
// 400 before either is looked at, on every authenticated route, audited.
func TestTwoAuthorizationHeadersRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	good, other := "Bearer "+g.tokens["admin-0001"], "Bearer "+g.tokens["laptop-7f3a"]
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/mcp", pingBody},
		{"GET", "/statusz", ""},
		{"GET", "/logstream/stream", ""},
	} {
		for _, pair := range [][2]string{{good, good}, {good, other}, {good, "Bearer nonsense"}, {"Bearer nonsense", good}, {good, ""}} {
			what := c.method + " " + c.path
			before := len(g.auditLog())
			code, body := g.send(c.method, c.path, c.body, [][2]string{{"Authorization", pair[0]}, {"Authorization", pair[1]}})
			if code != 400 || !strings.Contains(body, "Authorization") {
				t.Errorf("%s with two Authorization headers: HTTP %d %q, want 400 naming them", what, code, body)
			}
			if e := g.lastAudit(before, what); e.Status != 400 || e.Decision != VerdictDeny || e.Rule != ruleAuthAmbiguous || e.Device != "" || e.UpstreamStatus != 0 {
				t.Errorf("%s with two Authorization headers: audit line %+v", what, e)
			}
		}
	}
}

// Found probing after the tester's findings: a /sync path is forwarded
// as given, so `/sync/../mcp` (or `/sync/%2e%2e/mcp`) reached the
// upstream as GET /sync/../mcp, with the upstream's token: one proxy
// that resolves dot segments away from a GET of an upstream route the
// gateway never authorized. A /sync path that is not clean is no route.
func TestSyncPathNotCleanIsNoRoute(t *testing.T) {
	t.Parallel()
	u := startPython(t)
	g := newGWAt(t, devices, u)
	admin := [][2]string{{"Authorization", "Bearer " + g.tokens["admin-0001"]}}
	for _, p := range []string{"/sync/../mcp", "/sync/%2e%2e/statusz", "/sync/./ops", "/sync//ops", "/sync/", "/sync/ops/", "/sync/x/../ops"} {
		before := len(g.auditLog())
		req := "GET " + p + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + admin[0][1] + "\r\nConnection: close\r\n\r\n"
		if status := rawStatus(t, g.http.Listener.Addr().String(), req); !strings.Contains(status, " 404 ") {
			t.Errorf("GET %s: %s, want 404", p, status)
		}
		if e := g.lastAudit(before, p); e.Status != 404 || e.Decision != VerdictDeny || e.Rule != ruleNoRoute || e.UpstreamStatus != 0 {
			t.Errorf("GET %s: audit line %+v", p, e)
		}
	}
	for _, r := range u.received(t) {
		t.Errorf("the upstream got GET %s", r.Path)
	}
	if code, _ := g.send("GET", "/sync/ops?origin=a", "", admin); code != 200 {
		t.Errorf("GET /sync/ops: HTTP %d, want it forwarded", code)
	}
}

// rawStatus sends one raw HTTP/1.1 request (a path net/http's client
// would clean) and returns the status line.
func rawStatus(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Proto + " " + resp.Status + " "
}

// A refused device token is answered with what to do, the same words
// whatever the reason, and nothing of the token sent: a bare
// "Unauthorized" sent mcp-remote and the Inspector into OAuth errors
// that named no token (outside tester, attack36 N4).
func TestARefusedTokenIsToldTheFix(t *testing.T) {
	g := newGW(t, devices)
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	var first string
	for i, hdr := range [][][2]string{nil, {{"Authorization", "Bearer dbx_not-a-token-at-all-000000"}}, {{"Authorization", "Basic eDp5"}}} {
		status, text := g.send("POST", "/mcp", body, hdr)
		if status != http.StatusUnauthorized || !strings.Contains(text, "devbox-config gateway token issue") || !strings.Contains(text, "devbox-config doctor") || strings.Contains(text, "not-a-token") {
			t.Fatalf("%v: %d %q", hdr, status, text)
		}
		if i == 0 {
			first = text
		} else if text != first {
			t.Errorf("%v is told %q, a missing token %q: one text for every reason", hdr, text, first)
		}
	}
}

// A request to no route (404, 405) names the device its valid token
// names on its audit line, and a bidi override in its path is written as
// its code, not raw, the line still verifying (attack69 F10: the lines
// said no device, and a raw U+202E made a line display reversed).
func TestARequestToNoRouteIsNamedAndItsPathShown(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := [][2]string{{"Authorization", "Bearer " + g.tokens["laptop-7f3a"]}}
	for _, c := range []struct {
		method, path string
		hdr          [][2]string
		status       int
		device       string
	}{
		{"GET", "/nothere", laptop, 404, "laptop-7f3a"},
		{"GET", "/mcp", laptop, 405, "laptop-7f3a"},
		{"GET", "/nothere", [][2]string{{"Authorization", "Bearer not-a-token"}}, 404, ""},
		{"GET", "/%E2%80%AE%22%7D%0A%7B%22device%22:%22laptop", nil, 404, ""},
	} {
		before := len(g.auditLog())
		if status, _ := g.send(c.method, c.path, "", c.hdr); status != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, status, c.status)
		}
		if e := g.lastAudit(before, c.path); e.Device != c.device || (c.device != "" && e.TokenID == "") {
			t.Errorf("%s %s audited as device %q token %q, want %q", c.method, c.path, e.Device, e.TokenID, c.device)
		}
	}
	raw, _ := os.ReadFile(g.srv.cfg.Load().AuditLog)
	if bytes.ContainsRune(raw, '\u202e') || !bytes.Contains(raw, []byte(`\u202e`)) {
		t.Errorf("the audit log holds the path's U+202E raw, or not at all:\n%s", raw)
	}
	if r, err := VerifyLog([]string{g.srv.cfg.Load().AuditLog}, nil, nil); err != nil || r.Lines != len(g.auditLog()) {
		t.Errorf("the log does not verify: %+v %v", r, err)
	}
}

// A device's requests to no route count against its read rate, as its
// GETs do: past it, 429 (attack71 F6: 3,400 404 lines a second from one
// device, uncounted).
func TestADevicesRequestsToNoRouteCountAgainstItsRate(t *testing.T) {
	t.Parallel()
	slow := []Device{{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, ReadRate: 0.001}}
	g := newGW(t, slow)
	laptop := [][2]string{{"Authorization", "Bearer " + g.tokens["laptop-7f3a"]}}
	got := map[int]int{}
	for range 105 {
		status, _ := g.send("GET", "/nothere", "", laptop)
		got[status]++
	}
	if got[404] != 100 || got[429] != 5 {
		t.Errorf("105 requests to no route within a burst of 100 reads: %v (want 100 404s, then 429s)", got)
	}
}
