package edge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goroutinesOf lists the goroutines running now, with no grace, whose
// stack names fn (e.g. "edge.(*Primary)"), other than the caller's. Not
// listed: one in runtime.goexit1, or one that has started (its frame has an
// offset) and is in no call but its own function: each owned goroutine here
// is a function that calls its work and then Done, so it has returned from
// its work and run its deferred Done, which is all a WaitGroup can see. One
// not started yet (at its entry, no offset) is listed.
func goroutinesOf(fn string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		running, _, _ := strings.Cut(g, "\ncreated by ")
		frames := strings.Split(running, "\n")[1:] // a function line, then its file line
		returned := strings.HasPrefix(frames[0], "runtime.goexit1(") || len(frames) <= 2 && strings.Contains(frames[len(frames)-1], " +0x")
		if i == 0 || !strings.Contains(g, fn) || returned {
			continue // the first is the caller's
		}
		out = append(out, g)
	}
	return out
}

// Close returns only once every goroutine the type started has ended: the
// prober, a dropped session's close and the warm transport's background
// dial are owned, not left to finish on their own (goleak's check in
// TestMain gives stragglers a grace period; this one gives none).
func TestCloseWaitsForItsGoroutines(t *testing.T) {
	t.Run("Primary", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there: every call fails, the prober runs
		p := NewPrimary("http://"+addr+"/mcp", func() string { return "" }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: time.Second, Probe: time.Millisecond})
		if _, err := p.Call(context.Background(), &mcp.CallToolParams{Name: "mempalace_status", Arguments: json.RawMessage(`{}`)}, false); err == nil {
			t.Fatal("a call to a primary that is not there succeeded")
		}
		if p.Up() {
			t.Fatal("the breaker did not open")
		}
		p.Close()
		if left := goroutinesOf("edge.(*Primary)"); len(left) > 0 {
			t.Fatalf("Close returned with the Primary's goroutines running:\n%s", strings.Join(left, "\n\n"))
		}
	})
	t.Run("warmTransport", func(t *testing.T) {
		var log connLog
		srv := log.started(t, true, nil) // closes each connection: a spare is dialled after each answer
		c, wt := warmClient(t, srv.URL)
		post(t, c, context.Background(), srv.URL, "one")
		wt.Close()
		if left := goroutinesOf("edge.(*warmTransport)"); len(left) > 0 {
			t.Fatalf("Close returned with a background dial running:\n%s", strings.Join(left, "\n\n"))
		}
	})
}
