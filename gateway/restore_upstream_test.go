package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// trash restore given a gateway's URL as --upstream refuses it before the
// shared upstream token leaves: a token-less /healthz tells a gateway
// (before: tools/list carried the token to it, and its 401 told; attack44
// F8).
func TestRestoreSendsNoTokenToAGateway(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		ledger.Advertise(w.Header()) // as every gateway answer
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	defer gw.Close()
	r := Restorer{Upstream: gw.URL + "/mcp", Token: func() string { return "the-shared-upstream-token" }}
	_, err := r.Restore(context.Background(), []string{"1"})
	if err == nil || !strings.Contains(err.Error(), "is a devbox-config gateway, not the primary") {
		t.Errorf("restore against a gateway: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range sent {
		if strings.Contains(s, "the-shared-upstream-token") {
			t.Errorf("the upstream token went to the gateway: %s", s)
		}
	}
	if len(sent) != 1 || sent[0] != "GET /healthz " {
		t.Errorf("the gateway was asked %q, want its /healthz alone, without a token", sent)
	}
}

// A gateway started with another gateway's URL as --upstream (a typo:
// the public URL, a tunnel) says so at start, and its start-up probe
// sends the shared upstream token nowhere: a token-less /healthz tells a
// gateway, as trash restore's first look does (before: tools/list carried
// the token to it, and its 401 was logged as a refused token; attack44 F8).
func TestProbeSendsNoTokenToAGateway(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		ledger.Advertise(w.Header())
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	defer other.Close()
	g := newGWAt(t, devices, &upstream{url: other.URL + "/mcp"})
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	g.srv.ProbeUpstream(context.Background())
	if got := logged.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "is a devbox-config gateway, not the primary") || !strings.Contains(got, "--upstream") {
		t.Errorf("probe's log (want an error naming the gateway at --upstream):\n%s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0] != "GET /healthz " {
		t.Errorf("the other gateway was asked %q, want its /healthz alone, without a token", sent)
	}
}
