package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// SIGTERM stops the gateway gracefully: a request in flight (the primary
// takes a second to answer it) is answered in full, and the process exits
// 0 within a few seconds. Before, the signal closed every connection at
// once and the call in flight got no answer.
func TestGatewayStopsGracefullyOnSIGTERM(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	cfg, token := gatewayWithDevice(t, "--read", "shared", "--write", "shared", "--kg", "read")
	cmd, addr, logs, pl := startGatewayBinary(t, cfg)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // received below, or in the deferred kill
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()

	call := func() (int, string, error) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_kg_stats","arguments":{}}}`
		req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _, _ := call(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never answered\n%s", logs.String())
		}
	}

	pl.SetLatency("mempalace_kg_stats", time.Second)
	type answer struct {
		code int
		body string
		err  error
	}
	inflight := make(chan answer, 1)
	go func() { c, b, err := call(); inflight <- answer{c, b, err} }() // received below
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-inflight
	var r struct{ Result json.RawMessage }
	if a.err != nil || a.code != 200 || json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(a.body, "event: message\n")), "data: ")), &r) != nil || r.Result == nil {
		t.Errorf("the call in flight at SIGTERM: HTTP %d %q %v", a.code, a.body, a.err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("the gateway exited with %v after SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the gateway still runs 10s after SIGTERM\n%s", logs.String())
	}
	if took := time.Since(began); took > 6*time.Second {
		t.Errorf("the gateway took %s to stop", took)
	}
	if t.Failed() {
		t.Logf("gateway log:\n%s", logs.String())
	}
}
