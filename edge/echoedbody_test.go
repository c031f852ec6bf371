package edge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A primary, or a proxy or debug error page in front of it, whose server
// error repeats the request's Authorization header (and another bearer it
// holds): what the edge quotes of that body (in the agent's tool answer,
// its log, the outbox a flush and status print) says neither token, yet
// still says what the body said. The outbox holding the agent's writes is
// the owner's alone (found by an outside tester).
func TestAnEchoedAuthorizationHeaderIsNotQuoted(t *testing.T) {
	t.Parallel()
	const other = "proxy-own-secret-42"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "denied for Authorization: %s; token %s; forwarded authorization: bearer %s\nsecond line", r.Header.Get("Authorization"), testToken, other)
	}))
	t.Cleanup(echo.Close)
	notQuoted(t, echo.URL+"/mcp", testToken, []string{testToken, other}, "denied for Authorization: Bearer [redacted]")
}

// notQuoted calls the primary at url through an edge holding token,
// flushes what it queued, and fails if a tool answer, the log or the outbox says any of
// secrets, or if the tool answers do not say says.
func notQuoted(t *testing.T, url, token string, secrets []string, says string) {
	t.Helper()
	h := start(t, harnessOpts{primaryURL: url, token: token})
	var answers strings.Builder
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "hello"}},
		{"search", map[string]any{"query": "hello"}},
		{"kg_stats", nil},
	} {
		_, res := h.call(c.name, c.args)
		b, _ := json.Marshal(res)
		answers.Write(b)
	}
	edgeDir := filepath.Join(h.palace, "edge")
	stored := func() string {
		var all strings.Builder
		files, _ := filepath.Glob(filepath.Join(edgeDir, "*"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			all.Write(b)
		}
		return all.String()
	}
	// what `devbox-config edge flush` does once the edge has exited (a
	// running edge holds the flush lease, and the flush would send nothing)
	h.stop()
	<-h.done
	s, err := outbox.Open(filepath.Join(edgeDir, outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.ClearBackoff(context.Background())
	p := NewPrimary(url, func() string { return token }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
	defer p.Close()
	(&outbox.Flusher{S: s, P: FlushTarget(p), Log: slog.New(slog.DiscardHandler)}).Drain(context.Background())
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.LastError == "" {
		t.Fatalf("the flush's error is not kept: %+v", st)
	}
	for where, text := range map[string]string{"a tool answer": answers.String(), "the log": h.logs.String(), "the outbox": stored()} {
		for _, secret := range secrets {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s quotes %q: …%s", where, secret, text[max(0, i-120):i+len(secret)])
			}
		}
	}
	if !strings.Contains(answers.String(), says) {
		t.Errorf("the tool answers no longer say what the primary's body said:\n%s", answers.String())
	}
	fi, err := os.Stat(filepath.Join(edgeDir, outbox.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("the outbox has mode %o, not 0600", m)
	}
}

// A primary that answers a call with a JSON-RPC error (HTTP 200) or an
// isError tool result repeating the edge's token, or an error body with
// it percent-encoded or base64'd: neither the agent's tool answer, the
// log, nor the outbox (edge status, edge flush) says the token in any of
// those forms (found by an outside tester); what the primary said around
// it still reads.
func TestATokenEchoedInAnyShapeIsNotQuoted(t *testing.T) {
	t.Parallel()
	const tok = "Ab+cd/ef=gh_0123456789xyzXYZ" // percent-encoding and base64 change it
	forms := []string{tok, strings.ToLower(tok), url.QueryEscape(tok), tok[:10], tok[10:]}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for k := range 3 {
			forms = append(forms, enc.EncodeToString([]byte(tok[k:]))[:12])
		}
	}
	for _, c := range []struct {
		name   string
		status int
		body   func(auth string) string
		says   string
	}{
		{"rpc error", 200, func(a string) string {
			return `{"jsonrpc":"2.0","id":ID,"error":{"code":-32603,"message":"internal: auth=` + a + `","data":{"sent":"` + tok + `"}}}`
		}, "internal: auth=Bearer [redacted]"},
		{"tool error", 200, func(a string) string {
			return `{"jsonrpc":"2.0","id":ID,"result":{"isError":true,"content":[{"type":"text","text":"failed for ` + a + ` (` + tok + `)"}]}}`
		}, "failed for Bearer [redacted] ([redacted])"},
		{"initialize error", 200, nil, "no session for Bearer [redacted]"},
		{"percent-encoded body", 500, func(a string) string {
			return "redirect to /login?next=%2Fmcp&auth=" + url.QueryEscape(a)
		}, "auth=Bearer+[redacted]"},
		{"base64 body", 500, func(a string) string { return "debug: " + base64.StdEncoding.EncodeToString([]byte(a)) }, "debug: [redacted]"},
		{"base64 token body", 500, func(a string) string {
			return "debug: " + base64.RawURLEncoding.EncodeToString([]byte(strings.TrimPrefix(a, "Bearer ")))
		}, "debug: [redacted]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var m struct {
					ID     json.RawMessage
					Method string
				}
				json.NewDecoder(r.Body).Decode(&m)
				w.Header().Set("Content-Type", "application/json")
				switch {
				case strings.HasPrefix(m.Method, "notifications/"):
					w.WriteHeader(http.StatusAccepted)
				case m.Method == "initialize" && c.name == "initialize error":
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no session for %s"}}`, m.ID, r.Header.Get("Authorization"))
				case m.Method == "initialize":
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}}`, m.ID)
				case m.Method == "tools/call":
					w.WriteHeader(c.status)
					io.WriteString(w, strings.Replace(c.body(r.Header.Get("Authorization")), `"id":ID`, `"id":`+string(m.ID), 1))
				default:
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
				}
			}))
			t.Cleanup(srv.Close)
			notQuoted(t, srv.URL+"/mcp", tok, forms, c.says)
		})
	}
}
