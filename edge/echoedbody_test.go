package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	h := start(t, harnessOpts{primaryURL: echo.URL + "/mcp"})
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
	p := NewPrimary(echo.URL+"/mcp", func() string { return testToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 2 * time.Second})
	defer p.Close()
	(&outbox.Flusher{S: s, P: FlushTarget(p), Log: slog.New(slog.DiscardHandler)}).Drain(context.Background())
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.LastError, "answer said") {
		t.Fatalf("the flush's error is not kept: %+v", st)
	}
	for where, text := range map[string]string{"a tool answer": answers.String(), "the log": h.logs.String(), "the outbox": stored()} {
		for _, secret := range []string{testToken, other} {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s quotes %q: …%s", where, secret, text[max(0, i-120):i+len(secret)])
			}
		}
	}
	if !strings.Contains(answers.String(), "denied for Authorization: Bearer [redacted]") {
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
