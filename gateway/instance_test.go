package gateway

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A second gateway on the same audit log (a restart while the old one
// still runs, two replicas behind a proxy) is refused at start, naming
// the lock file and the holder's pid: two writers break the log's hash
// chain for good. Once the first stops, the second starts. What only
// reads (audit verify) and the operator's config changes still work
// while the gateway runs.
func TestASecondGatewayOnOneAuditLogIsRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.call(g.tokens["laptop-7f3a"], "status", nil)
	cfg := g.srv.cfg.Load()

	second := &Server{ConfigFile: g.cfgFile, Upstream: g.up.url, BindHost: "127.0.0.1"}
	err := second.Open()
	if err == nil {
		second.Close()
		t.Fatal("a second gateway opened the audit log the first one writes")
	}
	for _, want := range []string{cfg.AuditLog + ".lock", fmt.Sprintf("pid %d", os.Getpid()), "stop"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if _, err := VerifyLog(cfg.AuditLog, nil, nil); err != nil {
		t.Errorf("audit verify while the gateway runs: %v", err)
	}
	if err := UpdateConfig(g.cfgFile, func(c *Config) error { c.Devices[0].Label = "changed"; return nil }); err != nil {
		t.Errorf("a config change while the gateway runs: %v", err)
	}

	if err := g.srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The first gateway runs in this test process, which forks the
	// children of parallel tests: a fork between the lock file's open
	// and the child's exec holds the lock for those microseconds (the
	// file is close-on-exec). A gateway process forks nothing, so only
	// this test sees it: it asks again briefly.
	deadline := time.Now().Add(2 * time.Second)
	for err = second.Open(); err != nil && time.Now().Before(deadline); err = second.Open() {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the second gateway, after the first stopped: %v", err)
	}
	second.Close()
}
