package edge

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A primary that answers 307 to another host or port does not get the
// token sent there: the edge's client (its session, the check `edge
// status` and `edge flush` make) follows no redirect, and says where the
// primary pointed and what to set. Before, the bearer transport put the
// token on the followed request too (attack61 F5).
func TestThePrimarysRedirectIsNotFollowedWithTheToken(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			reached.Add(1)
		}
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer elsewhere.Close()
	primary := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/mcp?k=v", http.StatusTemporaryRedirect))
	defer primary.Close()

	p := NewPrimary(primary.URL+"/mcp", func() string { return "tok-secret" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Hour, Quiet: true})
	defer p.Close()
	got := p.Check(context.Background())
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests carried the token to the redirect's target", n)
	}
	want := "the primary answered a redirect (HTTP 307) to " + elsewhere.URL + "/mcp: set MEMPALACE_REMOTE_URL to the final URL"
	if !strings.Contains(got, want) || strings.Contains(got, "k=v") {
		t.Errorf("Check = %q, want it to hold %q (the target's query left out)", got, want)
	}
}
