package edge

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A read whose answer is still arriving when the call timeout runs out (a
// large answer over a slow link) is cut, but the primary answered: the
// breaker stays closed, so the next read is sent and answered, and
// neither the cut read nor the log calls the primary unreachable
// (attack97 F8). Before, the cut opened the breaker and the next read, a
// small one the primary answered at once, was answered "primary
// unreachable (not sent)".
func TestAReadCutWhileItsAnswerArrivesLeavesThePrimaryUp(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	link, slow := slowAnswers(t, srv.URL())
	logged := &testbed.SyncBuffer{}
	p := NewPrimary(link, func() string { return testToken }, slog.New(slog.NewTextHandler(logged, nil)), PrimaryOptions{Timeout: 300 * time.Millisecond, Probe: time.Hour})
	defer p.Close()
	if _, err := p.Call(context.Background(), statusCall(), true); err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	_, err := p.Call(context.Background(), statusCall(), true)
	if err == nil {
		t.Fatal("a read whose answer took longer than the call timeout was answered")
	}
	if strings.Contains(err.Error(), "unreachable") {
		t.Errorf("a read cut while its answer arrived: %v, which calls the primary unreachable", err)
	}
	if !p.Up() {
		t.Errorf("a read cut while its answer arrived opened the breaker (%s)", p.State())
	}
	slow.Store(false)
	if _, err := p.Call(context.Background(), statusCall(), true); err != nil {
		t.Errorf("the read after the cut one: %v", err)
	}
	if strings.Contains(logged.String(), "unreachable") {
		t.Errorf("a read cut while its answer arrived logged the primary unreachable:\n%s", logged)
	}
}

// slowAnswers is target's URL through a proxy that, while slow is set,
// passes each answer's body on a byte every 20 ms (a large answer over a
// slow link): its head comes at once. Host names target (a primary on
// loopback refuses another port in it).
func slowAnswers(t *testing.T, target string) (string, *atomic.Bool) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var slow atomic.Bool
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.URL.Path = r.In.URL.Path // not joined to u's
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			w = trickle{w}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, &slow
}

// trickle writes a body a byte at a time, 20 ms apart.
type trickle struct{ http.ResponseWriter }

func (w trickle) Write(b []byte) (int, error) {
	for i := range b {
		if _, err := w.ResponseWriter.Write(b[i : i+1]); err != nil {
			return i, err
		}
		http.NewResponseController(w.ResponseWriter).Flush()
		time.Sleep(20 * time.Millisecond)
	}
	return len(b), nil
}
