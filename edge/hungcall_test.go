package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// A Primary whose session is open on a primary that then hangs (kill
// -STOP on the gateway or serve) closes at once after a call the SDK sent
// there was given up: `edge status` and `edge flush` asking it (Check's
// ping) at their timeout, the edge's ask for its device or its probe at
// the stop. Before, Close sometimes waited 5 s more: the MCP SDK sends a
// notifications/cancelled for the call on a context detached from the
// caller's, bounded at 5 s, and the session's Close (the failed
// session's courtesy close, or Close's own) waits for that send to the
// hung primary. The race between the send and the Close is won either
// way: many Primaries show it. (A tool call sent as a plain POST was not
// held: its cancellation is sent on the Primary's context.)
func TestAPrimaryClosesAtOnceAfterACallGivenUpOnAHungPrimary(t *testing.T) {
	t.Parallel()
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: testToken})
	url, hang := hangable(t, srv.URL())
	const primaries, giveUp = 96, 200 * time.Millisecond
	ps := make([]*Primary, primaries)
	for i := range ps {
		ps[i] = NewPrimary(url, func() string { return testToken }, slog.New(slog.NewTextHandler(io.Discard, nil)), PrimaryOptions{Timeout: 30 * time.Second})
		defer ps[i].Close()
		if _, err := ps[i].sessionFor(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	hang.Store(true)
	var wg sync.WaitGroup
	took := make([]time.Duration, primaries)
	for i, p := range ps {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), giveUp)
			defer cancel()
			if got := p.Check(ctx); got == "reachable, token accepted" {
				t.Error("a hung primary checked reachable")
			}
			began := time.Now()
			p.Close()
			took[i] = time.Since(began)
		})
	}
	wg.Wait()
	for i, d := range took {
		if d > time.Second {
			t.Errorf("Close of primary %d took %v after its check was given up", i, d)
		}
	}
}

// hangable stands in front of a primary and passes every request on
// until hang is set; from then on it accepts requests and never answers
// them (the client gives up).
func hangable(t *testing.T, target string) (string, *atomic.Bool) {
	t.Helper()
	var hang atomic.Bool
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if hang.Load() {
			select {
			case <-r.Context().Done():
			case <-quit:
			}
			return
		}
		passOn(w, r, target, body, nil)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) })
	return srv.URL + "/mcp", &hang
}

// A Primary closes within a second of a session-issuing primary (the
// official-SDK fork) that hung after the session opened: the session's
// DELETE, its close's courtesy, is not waited for beyond that. Before,
// Close waited the SDK's 5 s for the hung primary's answer to it, on top
// of the edge's stop grace and the local palace's exit (past docker
// stop's SIGKILL at 10 s).
func TestAPrimaryClosesSoonWithASessionPrimaryHung(t *testing.T) {
	t.Parallel()
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: testToken, SessionMode: true})
	url, hang := hangable(t, srv.URL())
	p := NewPrimary(url, func() string { return testToken }, slog.New(slog.NewTextHandler(io.Discard, nil)), PrimaryOptions{Timeout: 30 * time.Second})
	s, err := p.sessionFor(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() == "" {
		t.Fatal("the primary issued no session id")
	}
	hang.Store(true)
	began := time.Now()
	p.Close()
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("Close took %v with the session's primary hung", took)
	}
}
