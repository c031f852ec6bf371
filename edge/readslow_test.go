package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
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
// unreachable (not sent)". The cut read's time runs out once its answer's
// first byte is read, not at a wall-clock bound: a 300 ms call timeout
// ran out on a loaded machine before the answer began, or in the connect.
func TestAReadCutWhileItsAnswerArrivesLeavesThePrimaryUp(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	link, slow := slowAnswers(t, srv.URL())
	logged := &testbed.SyncBuffer{}
	// No call here is to run out of the call timeout: it is as long as a
	// loaded machine needs.
	p := NewPrimary(link, func() string { return testToken }, slog.New(slog.NewTextHandler(logged, nil)), PrimaryOptions{Timeout: time.Minute, Probe: time.Hour})
	defer p.Close()
	if _, err := p.Call(context.Background(), statusCall(), true); err != nil {
		t.Fatal(err)
	}
	fired := make(chan struct{})
	p.httpc.Transport = firstByte{p.httpc.Transport, sync.OnceFunc(func() { close(fired) })} // nothing of p runs meanwhile
	slow.Store(true)
	_, err := p.Call(ranOut{context.Background(), fired}, statusCall(), true)
	if err == nil {
		t.Fatal("a read whose answer took longer than its time was answered")
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

// ranOut is ctx with a deadline that passes when fired is closed: a
// bound that runs out at the moment a test means, not at a wall-clock
// one a loaded machine reaches early. Its callee is told a deadline an
// hour away (a write to the primary is an op's own only with one).
type ranOut struct {
	context.Context
	fired <-chan struct{}
}

func (ranOut) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c ranOut) Done() <-chan struct{}     { return c.fired }
func (c ranOut) Err() error {
	select {
	case <-c.fired:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// firstByte is a transport that calls then once an answer's body gave
// its first byte.
type firstByte struct {
	next http.RoundTripper
	then func()
}

func (f firstByte) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(r)
	if err == nil {
		resp.Body = firstByteBody{resp.Body, f.then}
	}
	return resp, err
}

type firstByteBody struct {
	io.ReadCloser
	then func()
}

func (b firstByteBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.then()
	}
	return n, err
}

// slowAnswers is target's URL through a proxy that, while slow is set,
// passes each answer's head and first byte, and the rest of it never (a
// large answer over a slow link, the caller gone before it ends). Host
// names target (a primary on loopback refuses another port in it).
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
			w = firstOnly{w, r.Context().Done()}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, &slow
}

// firstOnly writes a body's first byte, then nothing until gone is closed.
type firstOnly struct {
	http.ResponseWriter
	gone <-chan struct{}
}

func (w firstOnly) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if _, err := w.ResponseWriter.Write(b[:1]); err != nil {
		return 0, err
	}
	http.NewResponseController(w.ResponseWriter).Flush()
	<-w.gone
	return 1, http.ErrAbortHandler
}
