package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/warmconn"
	"github.com/tidwall/gjson"
)

// rawUpstream listens on loopback and hands each connection to serve.
func rawUpstream(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return "http://" + l.Addr().String() + "/mcp"
}

// readRequest reads one whole HTTP request from c.
func readRequest(c net.Conn) *http.Request {
	r, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return nil
	}
	io.ReadAll(r.Body)
	return r
}

// What the edge does with an upstream failure depends on whether the
// call left whole: never sent is retried as it is (503), sent without an
// answer may have been applied (502). The warm transport keeps that line
// where net/http's transport drew it. The answer carries the call's id,
// as JSON-RPC asks of an error to a request whose id is known.
func TestUpstreamFailuresSayWhetherTheCallWasSent(t *testing.T) {
	t.Parallel()
	body := []byte(`{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{}}}`)

	const closed = "http://127.0.0.1:1/mcp" // nothing listens on port 1
	hangs := make(chan struct{})
	t.Cleanup(func() { close(hangs) })
	cases := []struct {
		name, url  string
		ctxTimeout time.Duration
		status     int
		says       string
	}{
		{"nothing listens", closed, 0, 503, "not sent"},
		{"read, then hung up", rawUpstream(t, func(c net.Conn) { readRequest(c) }), 0, 502, "may have applied"},
		{"answer cut short", rawUpstream(t, func(c net.Conn) {
			readRequest(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"jsonrpc\"")
		}), 0, 502, "cut short"},
		{"no answer before the call's deadline", rawUpstream(t, func(c net.Conn) { readRequest(c); <-hangs }), 200 * time.Millisecond, 502, "may have applied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			warm, err := warmconn.New(c.url, http.DefaultTransport)
			if err != nil {
				t.Fatal(err)
			}
			defer warm.Close()
			client := &http.Client{Transport: warm}
			ctx := context.Background()
			if c.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.ctxTimeout)
				defer cancel()
			}
			status, resp := postMCP(ctx, client, c.url, "tok", body)
			if status != c.status || !strings.Contains(string(resp), c.says) {
				t.Fatalf("HTTP %d %s; want %d saying %q", status, resp, c.status, c.says)
			}
			if id := gjson.GetBytes(resp, "id").Raw; id != `"call-7"` {
				t.Fatalf("the answer's id is %s, want the call's (\"call-7\"): %s", id, resp)
			}
		})
	}
}

// An op whose answer the upstream lost is in doubt; the resend's refusal
// says why (the answer was lost on the way back), not that the gateway
// stopped, which sent the operator to the gateway's log for a crash that
// never happened.
func TestInDoubtAfterALostAnswerSaysTheAnswerWasLost(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, func(c net.Conn) { readRequest(c) }) // takes every call, answers none
	g := newGWAt(t, []Device{{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@lab"}, Coordinator: true}}, &upstream{name: "loses answers", url: u})
	g.withLedger()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_kg_add","arguments":{"subject":"a","predicate":"b","object":"c"},"_meta":{"` + ledger.MetaKey + `":"` + strings.Repeat("ab", 32) + `"}}}`
	if status, _ := g.post(g.tokens["dev1"], body); status != http.StatusBadGateway {
		t.Fatalf("the lost answer: HTTP %d, want 502", status)
	}
	_, resp := g.post(g.tokens["dev1"], body)
	e, _ := resp["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code, _ := e["code"].(float64); int(code) != ledger.CodeInDoubt {
		t.Fatalf("the resend: %v, want the in-doubt refusal", resp)
	}
	if strings.Contains(msg, "when the gateway stopped") || !strings.Contains(msg, "answer") {
		t.Errorf("the in-doubt refusal of a lost answer says %q; it should say the answer was lost, not that the gateway stopped", msg)
	}
}
