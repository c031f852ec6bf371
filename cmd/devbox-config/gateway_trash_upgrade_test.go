package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// setVersion sets the store at path's schema version, as an older
// release left it.
func setVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA user_version = ` + strconv.Itoa(v)); err != nil {
		t.Fatal(err)
	}
}

// versionOf is the store at path's schema version.
func versionOf(t *testing.T, path string) int {
	t.Helper()
	_, v, err := sqlitewal.Schema(path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// holdLock takes the audit log's lock as a running gateway does, with
// pid written in it, until the test ends.
func holdLock(t *testing.T, auditLog string, pid int) {
	t.Helper()
	f, err := os.OpenFile(auditLog+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.WriteString(strconv.Itoa(pid) + "\n")
}

// Outside tester, attack83 F9: `gateway trash list` or `trash prune` of a
// new binary, run while an older gateway still serves on the same files,
// migrated its trash in place, so that gateway could no longer restart
// and the backup taken after stopping it held the migrated file. Now such
// a command is refused, naming the gateway and the fix, and changes
// nothing; with no gateway running it migrates, as before.
func TestTrashCommandsDoNotMigrateUnderAnOlderGateway(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	setVersion(t, c.TrashPath(), 1)
	holdLock(t, c.AuditLog, 4242)
	for _, cmd := range [][]string{{"trash", "list"}, {"trash", "prune"}} {
		code, out, errOut := runCLI(append([]string{"gateway", "--config", cfg}, cmd...)...)
		if code != 1 || !strings.Contains(errOut, "a gateway of an older release (pid 4242) runs on these files") || !strings.Contains(errOut, "the trash "+c.TrashPath()+" (schema version 1") || !strings.Contains(errOut, "Stop that gateway first") {
			t.Errorf("%v under an older gateway: exit %d\n%s%s", cmd, code, out, errOut)
		}
		if v := versionOf(t, c.TrashPath()); v != 1 {
			t.Fatalf("%v migrated the trash under the running gateway: version %d", cmd, v)
		}
	}
	// The restore opens the provenance index and the op-id ledger too.
	setVersion(t, c.TrashPath(), 2)
	setVersion(t, c.ProvenancePath(), 0)
	code, out, errOut := runCLI("gateway", "--config", cfg, "trash", "restore", "--no-upstream-token", "--upstream", "http://127.0.0.1:1/mcp", "1")
	if code != 1 || !strings.Contains(errOut, "the provenance index "+c.ProvenancePath()+" (schema version 0") {
		t.Errorf("restore under an older gateway: exit %d\n%s%s", code, out, errOut)
	}
	if v := versionOf(t, c.ProvenancePath()); v != 0 {
		t.Errorf("restore migrated the provenance index under the running gateway: version %d", v)
	}
}

// With no gateway running, or with this release's (whose stores are
// current), the trash commands run as before.
func TestTrashListMigratesWithNoGatewayRunning(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	holdLock(t, c.AuditLog, 4242) // current stores: nothing to migrate
	if code, out, errOut := runCLI("gateway", "--config", cfg, "trash", "list"); code != 0 {
		t.Fatalf("trash list beside a current gateway: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	cfg, token = initGateway(t, dir)
	serveOnce(t, cfg, token)
	if c, err = gateway.LoadConfig(cfg); err != nil {
		t.Fatal(err)
	}
	setVersion(t, c.TrashPath(), 1)
	if code, out, errOut := runCLI("gateway", "--config", cfg, "trash", "list"); code != 0 || versionOf(t, c.TrashPath()) != 2 {
		t.Errorf("trash list with no gateway running: exit %d, version %d\n%s%s", code, versionOf(t, c.TrashPath()), out, errOut)
	}
}
