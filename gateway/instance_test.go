package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/sqlitewal"
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
	if _, err := VerifyLog([]string{cfg.AuditLog}, nil, nil); err != nil {
		t.Errorf("audit verify while the gateway runs: %v", err)
	}
	if _, err := UpdateConfig(g.cfgFile, func(c *Config) error { c.Devices[0].Label, c.Devices[0].Agents = "changed", nil; return nil }); err != nil {
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

// An audit_log that is a symlink to the log another gateway writes is that
// log: the second gateway is refused, its lock taken beside the real file
// (before: <link>.lock, a lock of its own, and two gateways appended to one
// log, breaking its chain).
func TestASecondGatewayThroughALinkedAuditLogIsRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.call(g.tokens["laptop-7f3a"], "status", nil)
	cfg := g.srv.cfg.Load()
	dir := t.TempDir()
	link := filepath.Join(dir, "audit.jsonl")
	if err := os.Symlink(cfg.AuditLog, link); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(g.cfgFile)
	other := filepath.Join(dir, "gateway.jsonc")
	if err := os.WriteFile(other, []byte(strings.Replace(string(b), strconv.Quote(cfg.AuditLog), strconv.Quote(link), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig(other); err != nil || c.AuditLog != link {
		t.Fatalf("the second config's audit_log is not the link: %v", err)
	}
	second := &Server{ConfigFile: other, Upstream: g.up.url, BindHost: "127.0.0.1"}
	if err := second.Open(); err == nil {
		second.Close()
		t.Fatal("a second gateway opened, through a symlink, the audit log the first one writes")
	} else if !strings.Contains(err.Error(), cfg.AuditLog+".lock") {
		t.Errorf("the refusal does not name the real log's lock: %v", err)
	}
}

// Outside tester, attack85 F4: a trash command run while this release's
// gateway starts on older stores (it holds the lock a moment before it
// migrates them) named it "a gateway of an older release". A lock whose
// holder says it brings the stores to this release's versions is not
// called older; one that names only a pid (an older release's) still is.
func TestCheckNoOlderGatewayKnowsThisRelease(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	cfg := g.srv.cfg.Load()
	st, err := trash.Open(cfg.TrashPath(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sqlitewal.Open(cfg.TrashPath(), "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := cfg.CheckNoOlderGateway(); err != nil {
		t.Errorf("beside this release's gateway, the trash behind: %v", err)
	}
	real, err := filewrite.Resolve(cfg.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real+".lock", []byte("4242\n"), 0o600); err != nil { // as an older release writes it
		t.Fatal(err)
	}
	if err := cfg.CheckNoOlderGateway(); err == nil || !strings.Contains(err.Error(), "a gateway of an older release (pid 4242)") {
		t.Errorf("beside an older release's gateway: %v", err)
	}
}
