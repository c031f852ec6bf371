package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A primary that refuses the token answers its /healthz (which asks for
// none) with 200. The prober asks /healthz before each handshake; that
// answer must not count as the token's: a call failing between it and
// the handshake's 401 read as "the primary is not reachable now" at a
// session start whose token was refused (and stayed so: the prober's own
// failures do not set the breaker's reason). Seen as a race-tier flake of
// TestWakeWithARefusedTokenSaysTheTokenWasRefused under load.
func TestTheHealthProbeDoesNotHideARefusedToken(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	hold := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Write([]byte("ok"))
			return
		}
		mu.Lock()
		h := hold
		mu.Unlock()
		if h {
			once.Do(func() { close(held) })
			<-release
		}
		http.Error(w, "bad token", http.StatusUnauthorized)
	}))
	defer srv.Close()
	p := NewPrimary(srv.URL+"/mcp", func() string { return "not-the-token" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Hour, Quiet: true})
	defer p.Close()

	ctx := context.Background()
	if _, err := p.Call(ctx, &mcp.CallToolParams{Name: "mempalace_status"}, false); !errors.Is(err, outbox.ErrUnauthorized) {
		t.Fatalf("a refused token: %v", err)
	}
	mu.Lock()
	hold = true
	mu.Unlock()
	up := make(chan error)
	go func() { up <- p.tryUp() }()
	<-held // /healthz answered 200; the handshake's request waits at the primary
	if st := p.LastStatus(); st != http.StatusUnauthorized {
		t.Errorf("after the prober's /healthz the last status is %d: a call failing now would not read as a refused token", st)
	}
	close(release)
	if <-up == nil {
		t.Error("the prober found a primary that refuses the token up")
	}
}

// A primary that was down and comes back refusing the token (rotated
// meanwhile) is told as refusing it, by the prober that found it back:
// no call is sent while the breaker is open, so before, the edge kept
// saying "not reachable" (the session start's words) for as long as the
// token stayed wrong.
func TestAPrimaryBackWithARotatedTokenReadsAsRefusingIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	rotated := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		back := rotated
		mu.Unlock()
		switch {
		case !back:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		case r.URL.Path == "/healthz":
			w.Write([]byte("ok"))
		default:
			http.Error(w, "bad token", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	p := NewPrimary(srv.URL+"/mcp", func() string { return "the-old-token" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: 10 * time.Millisecond, ProbeMax: 20 * time.Millisecond, Quiet: true})
	defer p.Close()
	if _, err := p.Call(context.Background(), &mcp.CallToolParams{Name: "mempalace_status"}, false); err == nil || errors.Is(err, outbox.ErrUnauthorized) {
		t.Fatalf("a primary answering 503: %v", err)
	}
	if st := p.State(); st == "up" || st == "unauthorized" {
		t.Fatalf("down, the state is %q", st)
	}
	mu.Lock()
	rotated = true
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for p.State() != "unauthorized" {
		if time.Now().After(deadline) {
			t.Fatalf("the primary answers again and refuses the token, but the edge says %q", p.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.Call(context.Background(), &mcp.CallToolParams{Name: "mempalace_status"}, false); !errors.Is(err, outbox.ErrUnauthorized) {
		t.Errorf("a call now: %v", err)
	}
}
