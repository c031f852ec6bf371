package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// A4 (attack50): `gateway --new-state` on a gateway that has served says
// what it made anew: a WARN naming each file and what it held, and an
// audit line (decision "new-state") that goes on with the chain, so an
// auditor sees when the state was reset (before: the two usual INFO lines
// and nothing in the log).
func TestGatewayNewStateLeavesATrace(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(c.ProvenancePath()); err != nil {
		t.Fatal(err)
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	addr := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
	cmd := exec.Command(bin, "gateway", "--new-state", "--listen", addr, "--upstream", "http://127.0.0.1:1/mcp", "--config", cfg)
	cmd.Env = append(os.Environ(), "MEMPALACE_UPSTREAM_TOKEN=upstream-secret")
	logs := &testbed.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the gateway never listened:\n%s", logs.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait() // its exit status is not what this checks
	warn := "level=WARN msg=\"--new-state: made anew, empty; what it held is lost\" component=gateway file=\"the provenance index " + c.ProvenancePath() + " (who wrote each record"
	if !strings.Contains(logs.String(), warn) {
		t.Errorf("no WARN naming the provenance index made anew:\n%s", logs.String())
	}
	b, _ := os.ReadFile(c.AuditLog)
	if !strings.Contains(string(b), `"method":"--new-state","decision":"new-state"`) || !strings.Contains(string(b), "made anew, empty: the provenance index "+c.ProvenancePath()) {
		t.Errorf("no audit line says the provenance index was made anew:\n%s", b)
	}
	if out, _ := gatewayCLI(t, cfg)(0, "audit", "verify"); !strings.Contains(out, "chain intact") {
		t.Errorf("audit verify after --new-state:\n%s", out)
	}
}
