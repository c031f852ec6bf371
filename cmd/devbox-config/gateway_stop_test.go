package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// A stop (SIGTERM) ends the /logstream/stream streams open then at once:
// the client sees the stream end cleanly (EOF, not a cut connection) and
// serve returns. Before, serve waited out its whole grace (5 s) for the
// stream, which never ends by itself, then cut it.
func TestGatewayStopEndsOpenStreams(t *testing.T) {
	t.Parallel()
	cfg, token := gatewayWithDevice(t, "--label", "laptop", "--read", "shared", "--write", "shared", "--agents", "opencode@laptop")
	// The upstream's stream: a heartbeat, then nothing until the gateway hangs up.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": ping\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer up.Close()

	addr := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
	log := slog.New(slog.DiscardHandler)
	s := &gateway.Server{ConfigFile: cfg, Upstream: up.URL + "/mcp", BindHost: "127.0.0.1", Log: log}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sc := &gatewayServeCmd{listen: addr, upstream: up.URL + "/mcp"}
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- sc.serve(stop, s, log) }() // received below

	var resp *http.Response
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/logstream/stream?to_agent=opencode@laptop", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		var err error
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never answered: %v", err)
		}
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if line, err := body.ReadString('\n'); resp.StatusCode != 200 || line != ": ping\n" {
		t.Fatalf("the stream: HTTP %d %q %v", resp.StatusCode, line, err)
	}

	began := time.Now()
	cancel() // SIGTERM
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Errorf("the stream was cut, not ended, %s after the stop: %v (read %q)", time.Since(began), err, rest)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve still runs 20 s after the stop")
	}
	t.Logf("stopped in %s", time.Since(began))
}
