package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// The running gateway process reloads its config on SIGHUP: a token
// revoked in a config whose change the file watch cannot see (its mtime
// put back) stays valid until the signal, and is refused right after it.
func TestGatewayReloadsOnSIGHUP(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	cfg, token := gatewayWithDevice(t, "--read", "shared", "--write", "shared", "--kg", "read")
	cmd, addr, logs, _ := startGatewayBinary(t, cfg)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	status := func() int {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_kg_stats","arguments":{}}}`
		req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		var r struct{ Error json.RawMessage }
		json.NewDecoder(resp.Body).Decode(&r)
		if resp.StatusCode == 200 && r.Error != nil {
			return -1 // a JSON-RPC error
		}
		return resp.StatusCode
	}
	waitStatus := func(what string, want int, within time.Duration) {
		t.Helper()
		got := 0
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got = status(); got == want {
				return
			}
		}
		t.Fatalf("%s: HTTP %d, want %d\n%s", what, got, want, logs.String())
	}
	waitStatus("before the revocation", 200, 10*time.Second)
	fi, err := os.Stat(cfg) // after the token's first use was recorded
	if err != nil {
		t.Fatal(err)
	}
	// Written as `token revoke` does, without its wait for the gateway to
	// take the change (which the file watch would, before the mtime is put
	// back).
	if _, err := gateway.UpdateConfig(cfg, func(c *gateway.Config) error { gateway.Revoke(c.Device("laptop-7f3a"), ""); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(cfg, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // three polls of the file watch
	if got := status(); got != 200 {
		t.Fatalf("the file watch saw a change it should not have (HTTP %d): this test cannot tell SIGHUP from it", got)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitStatus("after SIGHUP", http.StatusUnauthorized, time.Second)
	if strings.Contains(logs.String(), token) {
		t.Error("the token appears in the gateway's log")
	}
}
