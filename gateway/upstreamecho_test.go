package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An upstream, or a proxy or debug page in front of it, whose error
// repeats the request's Authorization header: a device never gets that
// body (the gateway's upstream token, the primary's master token, with
// it), only the gateway's own message naming the status. A 5xx that is
// not an answer to the call reads as one whose answer was lost (502: it
// may have been applied), as the edge has always read it. A JSON-RPC
// error answering the call is the upstream's answer and is passed on as
// it is (found by an outside tester).
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
