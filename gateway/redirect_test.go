package gateway

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// An upstream that answers a redirect to another port of its host gets
// no second request: the upstream token never reaches the address it
// names (net/http keeps Authorization across a redirect to the same host
// name). Found while fixing the devbox side of attack61 F5; before, the
// gateway followed it, token and all.
func TestTheUpstreamsRedirectIsNotFollowedWithItsToken(t *testing.T) {
	t.Parallel()
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
	}))
	defer elsewhere.Close()
	fake := startFake(t)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	g := newGWAt(t, []Device{devices[0]}, &upstream{name: "redirecting", url: redirecting.URL + "/mcp", palace: fake.palace})
	g.call(g.tokens[devices[0].ID], "search", map[string]any{"query": "q", "wing": "shared"})
	g.call(g.tokens[devices[0].ID], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "c"})
	if n := leaked.Load(); n != 0 {
		t.Fatalf("%d request(s) with the upstream token reached the redirect's target", n)
	}
}
