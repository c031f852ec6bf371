package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// An upstream, or a proxy or debug page in front of it, whose error
// repeats the request's Authorization header: a device never gets that
// body (the gateway's upstream token, the primary's master token, with
// it), only the gateway's own message naming the status. A 5xx that is
// not an answer to the call reads as one whose answer was lost (502: it
// may have been applied), as the edge has always read it. A JSON-RPC
// error answering the call is the upstream's answer and is passed on
// (the upstream token taken out of it: the test below) (found by an
// outside tester).
func TestAnUpstreamErrorBodyIsNotPassedOn(t *testing.T) {
	t.Parallel()
	echo := func(status int, body string) *upstream {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(status)
			fmt.Fprintf(w, body, r.Header.Get("Authorization"))
		}))
		t.Cleanup(srv.Close)
		return &upstream{name: "echo", url: srv.URL + "/mcp"}
	}
	do := func(g *gw, method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, g.http.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status","arguments":{}}}`
	for _, c := range []struct {
		upstream, want int
		body, says     string
	}{
		{500, 502, "denied for Authorization: %s", "HTTP 500"},
		{502, 502, "<html>bad gateway; you sent %s</html>", "HTTP 502"},
		{503, 503, "busy (Authorization: %s)", "HTTP 503"},
		{400, 400, "bad request from %s", "HTTP 400"},
		{500, 502, `{"jsonrpc":"2.0","id":99,"error":{"code":-32603,"message":"someone else's: %s"}}`, "HTTP 500"},
		{500, 500, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"the palace's own error"}}%.0s`, "the palace's own error"},
	} {
		t.Run(fmt.Sprintf("%d %.20s", c.upstream, c.body), func(t *testing.T) {
			t.Parallel()
			g := newGWAt(t, devices, echo(c.upstream, c.body))
			status, got := do(g, "POST", "/mcp", g.tokens["laptop-7f3a"], call)
			var m struct {
				Error struct{ Message string }
			}
			if strings.Contains(got, upstreamToken) || status != c.want || json.Unmarshal([]byte(got), &m) != nil || !strings.Contains(m.Error.Message, c.says) {
				t.Errorf("the device got HTTP %d %s; want %d, a JSON-RPC error saying %q, no upstream token", status, got, c.want, c.says)
			}
			if c.upstream == 500 {
				return
			}
			status, got = do(g, "GET", "/sync/ops?origin=a", g.tokens["admin-0001"], "")
			if strings.Contains(got, upstreamToken) || status != c.upstream {
				t.Errorf("GET: the device got HTTP %d %s; want %d without the upstream token", status, got, c.upstream)
			}
		})
	}
}

// An upstream whose JSON-RPC error, or isError tool result, repeats the
// request's Authorization header (raw, percent-encoded, base64'd): the
// device gets the error with the gateway's upstream token taken out, and
// what the upstream said around it (found by an outside tester).
func TestAnUpstreamErrorAnswerDoesNotRepeatTheUpstreamToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		body func(auth string) string
		says string
	}{
		{"rpc error", func(a string) string {
			return `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal: auth=` + a + `","data":{"seen":"` + url.QueryEscape(a) + `"}}}`
		}, "internal: auth=Bearer [redacted]"},
		{"tool error", func(a string) string {
			text, _ := json.Marshal(`{"error":"failed for ` + a + `; debug ` + b64(a) + `"}`) // MemPalace's error: a JSON object
			return `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":` + string(text) + `}]}}`
		}, "failed for Bearer [redacted]; debug [redacted]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGWAt(t, devices, &upstream{name: "echo", url: echoing(t, c.body)})
			req, _ := http.NewRequest("POST", g.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"x"}}}`))
			req.Header.Set("Authorization", "Bearer "+g.tokens["desk-9b21"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if got := string(b); !strings.Contains(got, c.says) || strings.Contains(got, upstreamToken) || strings.Contains(got, b64("Bearer " + upstreamToken)[:12]) {
				t.Errorf("the device got %s; want it to say %q, without the upstream token", got, c.says)
			}
		})
	}
}

// A successful answer is passed on as it came, whatever its text (a
// drawer may hold the token's very words): only error answers are read.
func TestASuccessfulAnswerIsNotRedacted(t *testing.T) {
	t.Parallel()
	answer := func(a string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a drawer says ` + a + `"}]}}`
	}
	status, got := postMCP(context.Background(), http.DefaultClient, echoing(t, answer), upstreamToken, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	if want := answer("Bearer " + upstreamToken); status != 200 || string(got) != want {
		t.Errorf("got HTTP %d %s; want %s", status, got, want)
	}
}

// An upstream error answer as SSE, with a duplicate key, as a batch or
// with the token as a key: the device gets only what the gateway parsed,
// the error rebuilt with the token taken out, or the gateway's own "not a
// JSON-RPC answer" (a copy the gateway checked while it forwarded other
// bytes let the token through; found by an outside tester).
func TestAnUpstreamAnswerIsForwardedOnlyAsParsed(t *testing.T) {
	t.Parallel()
	rpcErr := func(msg string) string {
		return `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"` + msg + `"}}`
	}
	notAnswer := "HTTP 200 OK, not a JSON-RPC answer"
	for _, c := range []struct {
		name, ct string
		body     func(auth string) string
		status   int
		says     string
	}{
		{"sse", "text/event-stream", func(a string) string { return "event: message\ndata: " + rpcErr("internal: auth="+a) + "\n\n" }, 200, "internal: auth=Bearer [redacted]"},
		{"sse split", "text/event-stream", func(a string) string {
			e := rpcErr("internal: tok=" + strings.TrimPrefix(a, "Bearer "))
			i := strings.Index(e, `"error"`) // data lines are joined by a newline: split between values
			return ": ping\r\n\r\nevent: message\r\ndata: " + e[:i] + "\r\ndata: " + e[i:] + "\r\n\r\n"
		}, 200, "internal: tok=[redacted]"},
		{"duplicate message", "", func(a string) string {
			return `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal: auth=` + a + `","message":"internal error"}}`
		}, 502, notAnswer},
		{"duplicate error", "", func(a string) string {
			return strings.TrimSuffix(rpcErr(a), "}") + `,"error":{"code":-32603,"message":"x"}}`
		}, 502, notAnswer},
		{"duplicate result", "", func(a string) string {
			return `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"` + a + `"}]},"result":{"content":[]}}`
		}, 502, notAnswer},
		{"escaped duplicate", "", func(a string) string {
			return strings.TrimSuffix(rpcErr(a), "}") + `,"\u0065rror":{"code":-32603,"message":"x"}}`
		}, 502, notAnswer},
		{"batch", "", func(a string) string { return "[" + rpcErr("internal: auth="+a) + "]" }, 502, notAnswer},
		{"token as a key", "", func(a string) string {
			return `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error","data":{"` + strings.TrimPrefix(a, "Bearer ") + `":1}}}`
		}, 200, `"data":{"[redacted]":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			status, b := postMCP(context.Background(), http.DefaultClient, echoingAs(t, c.ct, c.body), upstreamToken, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
			if got := string(b); status != c.status || !strings.Contains(got, c.says) || strings.Contains(got, upstreamToken) || !json.Valid(b) {
				t.Errorf("got HTTP %d %s; want %d saying %q, JSON, without the upstream token", status, got, c.status, c.says)
			}
		})
	}
}

// echoing is the URL of an upstream answering body(the request's
// Authorization header) to every request.
func echoing(t *testing.T, body func(auth string) string) string {
	return echoingAs(t, "", body)
}

// echoingAs is echoing with the answer's Content-Type ct ("": none set).
func echoingAs(t *testing.T, ct string, body func(auth string) string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		io.WriteString(w, body(r.Header.Get("Authorization")))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
