package realpalace

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// TestRealRunsWithoutNetwork proves that the real-MemPalace tests ran with
// no network: scripts/test-realpalace runs them inside a network namespace
// with only loopback (unshare -n) and says so in DEVBOX_NO_NETWORK. Then
// every interface but loopback is absent, a connection to an address
// outside fails, and real MemPalace still starts and searches (its
// embedder, the package's server on 127.0.0.1, is all it needs).
func TestRealRunsWithoutNetwork(t *testing.T) {
	Venv(t)
	if os.Getenv("DEVBOX_NO_NETWORK") != "1" {
		testbed.Missing(t, "not run in a network namespace: scripts/test-realpalace runs the TestReal tests under unshare -n when it is root")
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 && i.Flags&net.FlagUp != 0 {
			t.Errorf("an interface other than loopback is up: %s", i.Name)
		}
	}
	for _, addr := range []string{"1.1.1.1:443", "8.8.8.8:53", "[2606:4700:4700::1111]:443"} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			t.Errorf("connected to %s: the network is not cut", addr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if addrs, err := net.DefaultResolver.LookupHost(ctx, "pypi.org"); err == nil {
		t.Errorf("pypi.org resolved to %v: the network is not cut", addrs)
	}
	srv := New(t).Serve(t, "tok")
	srv.Seed(t, Drawer("w", "r", "offline palace"))
	if r := srv.MustCall(t, "mempalace_search", map[string]any{"query": "offline palace"}); len(r["results"].([]any)) != 1 {
		t.Fatalf("search without network: %v", r)
	}
}
