package edge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/testbed"
)

// Close returns only once every goroutine the type started has ended: the
// prober and a dropped session's close are owned, not left to finish on their own (goleak's check in
// TestMain gives stragglers a grace period; this one gives none). Not
// parallel: GoroutinesOf sees the whole process, and another test's
// Primary (an edge connecting) is not this one's.
func TestCloseWaitsForItsGoroutines(t *testing.T) {
	t.Run("Primary", func(t *testing.T) {
		// Nothing listens on port 1 (a closed ephemeral port could be
		// taken by a parallel test process): every call fails, the prober runs.
		p := NewPrimary("http://127.0.0.1:1/mcp", func() string { return "" }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: time.Second, Probe: time.Millisecond})
		if _, err := p.Call(context.Background(), &mcp.CallToolParams{Name: "mempalace_status", Arguments: json.RawMessage(`{}`)}, false); err == nil {
			t.Fatal("a call to a primary that is not there succeeded")
		}
		if p.Up() {
			t.Fatal("the breaker did not open")
		}
		p.Close()
		if left := testbed.GoroutinesOf("edge.(*Primary)"); len(left) > 0 {
			t.Fatalf("Close returned with the Primary's goroutines running:\n%s", strings.Join(left, "\n\n"))
		}
	})
	// A connect in progress when Close runs (a caller's, the initialize
	// unanswered) is ended and waited for: Close does not return while it
	// runs on, and a session it opens after Close is not left open.
	t.Run("Primary connecting", func(t *testing.T) {
		asked, release := make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // read to the end, net/http ends r's context when the client goes
			select {
			case asked <- struct{}{}:
			default:
			}
			select { // the initialize is not answered
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		p := NewPrimary(srv.URL+"/mcp", func() string { return "" }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 3 * time.Second})
		called := make(chan struct{})
		go func() {
			defer close(called)
			p.Call(context.Background(), &mcp.CallToolParams{Name: "mempalace_status", Arguments: json.RawMessage(`{}`)}, false)
		}()
		<-asked
		p.Close()
		left := testbed.GoroutinesOf("mcp.(*Client).Connect")
		<-called
		if len(left) > 0 {
			t.Fatalf("Close returned with a connect in progress:\n%s", strings.Join(left, "\n\n"))
		}
	})
}

// The agent's logging level is passed on to the local palace off the
// agent's reader; that goroutine is the edge's, ended and waited for
// when Serve returns, not left waiting (up to 20 s) for a local palace
// that never opened its session.
func TestSetLevelIsOwnedByTheEdge(t *testing.T) {
	h := start(t, harnessOpts{passThrough: true, child: []string{"sh", "-c", "exec sleep 30"}, childExitWait: 100 * time.Millisecond})
	if err := h.s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	h.s.Close()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the edge did not stop")
	}
	if left := testbed.GoroutinesOf("edge.(*Child).SetLoggingLevel"); len(left) > 0 {
		t.Fatalf("Serve returned with the logging level's goroutine still running:\n%s", strings.Join(left, "\n\n"))
	}
}
