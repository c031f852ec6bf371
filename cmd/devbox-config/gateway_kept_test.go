package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/sqlitewal"
	"github.com/joakimp/devbox-config/testbed"
)

// initGateway runs `gateway init` in dir/gw, adds laptop-7f3a and issues
// its token: the config's path and the token.
func initGateway(t *testing.T, dir string) (cfg, token string) {
	t.Helper()
	cfg = filepath.Join(dir, "gw", "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "laptop-7f3a", "--read", "shared", "--write", "shared", "--kg", "read")
	out, _ := cli(0, "token", "issue", "laptop-7f3a")
	return cfg, strings.TrimSpace(out)
}

// serveOnce opens cfg's gateway as `gateway` does (the audit log with its
// key, the provenance index, the trash, the op-id ledger), answers one
// request with token (its first use) and closes it: a gateway that has
// served.
func serveOnce(t *testing.T, cfg, token string) {
	t.Helper()
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1", Stderr: io.Discard}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := srv.Trash(); err != nil {
		t.Fatal(err)
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(c.LedgerPath(), c.LedgerRetention())
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	srv.ServeHTTP(httptest.NewRecorder(), req)
	if st, err := gateway.LoadState(gateway.StateFile(cfg, c)); err != nil || len(st.FirstUsed) == 0 {
		t.Fatalf("the token's first use is not recorded: %v %v", st, err)
	}
}

// A gateway that has served refuses to start when part of its kept state
// is missing, naming it, what it held and the fix (before: it made a new,
// empty op-id ledger and said nothing, so resends were applied again).
func TestGatewayRefusesToStartOnAMissingLedger(t *testing.T) {
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	led := filepath.Join(filepath.Dir(cfg), "audit", "op-ledger.sqlite")
	if err := os.Remove(led); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "tok")
	code, out := runBounded(t, "gateway", "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1/mcp")
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"has served", "the op-id ledger " + led + " (a resent write", "--new-state"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(led); err == nil {
		t.Error("the refused start made a new ledger")
	}
}

// A config whose paths are absolute (as `gateway init` wrote them before),
// moved with its directory: the refusal names the path it looked at and
// the file of that name beside the config, with the relative path that
// fixes it (before: only the secret, with the fixes for a lost one).
func TestGatewayMovedAbsoluteConfigNamesWhatIsBesideIt(t *testing.T) {
	dir := t.TempDir()
	cfg, token := initGateway(t, dir)
	serveOnce(t, cfg, token)
	old := filepath.Dir(cfg)
	b, _ := os.ReadFile(cfg)
	abs := strings.NewReplacer(`"gateway.secret"`, `"`+filepath.Join(old, "gateway.secret")+`"`, `"audit/audit.jsonl"`, `"`+filepath.Join(old, "audit", "audit.jsonl")+`"`).Replace(string(b))
	os.WriteFile(cfg, []byte(abs), 0o600)
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "tok")
	code, out := runBounded(t, "gateway", "--config", filepath.Join(moved, "gateway.jsonc"), "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1/mcp")
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"the server secret " + filepath.Join(old, "gateway.secret") + " (",
		filepath.Join(moved, "gateway.secret") + " is beside the config",
		`set secret_file to "gateway.secret"`,
		`set audit_log to "audit/audit.jsonl"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(old); err == nil {
		t.Errorf("the refused start made %s again", old)
	}
}

// A gateway that never served has no kept state to lose: a config moved
// before its first start names the secret's old path and the one beside it.
func TestGatewayMissingSecretSaysTheConfigMayHaveMoved(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := initGateway(t, dir)
	old := filepath.Dir(cfg)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), `"gateway.secret"`, `"`+filepath.Join(old, "gateway.secret")+`"`, 1)), 0o600)
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "tok")
	code, out := runBounded(t, "gateway", "--config", filepath.Join(moved, "gateway.jsonc"), "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1/mcp")
	if code != 1 || !strings.Contains(out, filepath.Join(old, "gateway.secret")+" does not exist") || !strings.Contains(out, filepath.Join(moved, "gateway.secret")+" is beside the config, so the gateway's directory may have moved") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// A gateway directory `gateway init` made, moved with mv, starts on its
// own state: the audit chain goes on (intact, signed with the same key),
// and nothing is made at the old path (before: init wrote absolute paths,
// so the moved gateway refused to start on the secret, and once that was
// fixed started on a new key, trash, ledger and provenance index at the
// old path).
func TestGatewayMovedDirectoryKeepsItsState(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	dir := t.TempDir()
	cfg, token := initGateway(t, dir)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), `"audit_anchor": "stderr",`, `"audit_checkpoint_lines": 1,`, 1)), 0o600)
	callGatewayBinary(t, cfg, token)
	old := filepath.Dir(cfg)
	pub, _ := os.ReadFile(filepath.Join(old, "audit-signing.key.pub"))
	before, _ := os.ReadFile(filepath.Join(old, "audit", "audit.jsonl"))
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(moved, "gateway.jsonc")
	callGatewayBinary(t, cfg, token)
	if _, err := os.Stat(old); err == nil {
		t.Errorf("the moved gateway made %s again", old)
	}
	if now, _ := os.ReadFile(filepath.Join(moved, "audit-signing.key.pub")); string(now) != string(pub) {
		t.Error("the moved gateway signs with a new key")
	}
	after, _ := os.ReadFile(filepath.Join(moved, "audit", "audit.jsonl"))
	if len(before) == 0 || len(after) <= len(before) || string(after[:len(before)]) != string(before) {
		t.Errorf("the audit log before the move is not where the moved gateway's begins:\n%s\n---\n%s", before, after)
	}
	if out, _ := gatewayCLI(t, cfg)(0, "audit", "verify"); !strings.Contains(out, "chain intact") {
		t.Errorf("audit verify after the move:\n%s", out)
	}
}

// callGatewayBinary starts the gateway binary on cfg, makes one call with
// token and stops it (SIGTERM).
func callGatewayBinary(t *testing.T, cfg, token string) {
	t.Helper()
	cmd, addr, logs, _ := startGatewayBinary(t, cfg)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait() // its exit status is not what this checks
	}()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_kg_stats","arguments":{}}}`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never answered (%v)\n%s", err, logs.String())
		}
	}
}

// The trash commands refuse a gateway that has served whose trash is
// missing, as its start does (before: `trash list` said "the trash is
// empty: no delete has gone through the gateway", exit 0).
func TestGatewayTrashListRefusesAMissingTrash(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	bin := filepath.Join(filepath.Dir(cfg), "audit", "trash.sqlite")
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("gateway", "--config", cfg, "trash", "list")
	if code != 1 || !strings.Contains(errOut, "the trash "+bin+" (") || strings.Contains(out, "empty") {
		t.Errorf("exit %d: %s%s", code, out, errOut)
	}
	if _, err := os.Stat(bin); err == nil {
		t.Error("trash list made a new trash")
	}
}

// A trash restore on a gateway that has served whose op-id ledger or
// provenance index is missing is refused, naming it, and makes neither
// anew: before, it opened (so created) both empty, and the next start
// took them as kept and said nothing (the gwstate helper's note).
func TestGatewayTrashRestoreRefusesMissingState(t *testing.T) {
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{c.LedgerPath(), c.ProvenancePath()} {
		moved := gone + ".away"
		if err := os.Rename(gone, moved); err != nil {
			t.Fatal(err)
		}
		t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "upstream-token")
		code, out, errOut := runCLI("gateway", "--config", cfg, "trash", "restore", "--upstream", "http://127.0.0.1:1/mcp", "1")
		if code != 1 || !strings.Contains(errOut, gone+" (") {
			t.Errorf("restore without %s: exit %d: %s%s", gone, code, out, errOut)
		}
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("trash restore made %s anew", gone)
		}
		if err := os.Rename(moved, gone); err != nil {
			t.Fatal(err)
		}
	}
}

// A3 (attack50): a kept SQLite store emptied to 0 bytes (a truncated copy,
// a failed restore) is refused as a missing one is, by the start and by
// `trash list` (before: it started on it, and `trash list` said "0
// delete(s)" where there were deletes).
func TestGatewayRefusesAnEmptiedStore(t *testing.T) {
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "tok")
	for _, emptied := range []string{c.TrashPath(), c.LedgerPath(), c.ProvenancePath()} {
		kept, err := os.ReadFile(emptied)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(emptied, 0); err != nil {
			t.Fatal(err)
		}
		code, out := runBounded(t, "gateway", "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1/mcp")
		if want := emptied + " ("; code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "is empty, 0 bytes") {
			t.Errorf("start with %s emptied: exit %d, want 1 naming it as empty:\n%s", emptied, code, out)
		}
		code, stdout, errOut := runCLI("gateway", "--config", cfg, "trash", "list")
		if emptied == c.TrashPath() && (code != 1 || !strings.Contains(errOut, emptied+" (")) {
			t.Errorf("trash list with %s emptied: exit %d: %s%s", emptied, code, stdout, errOut)
		}
		if err := os.WriteFile(emptied, kept, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A gateway an earlier build ran through a symlinked config kept its
// default state file beside the link; now it belongs beside the config's
// real file, and the refusal to start says where the old one is and to
// move it (the reviewer's note: it said only "does not exist").
func TestGatewayRefusalNamesTheStateFileBesideTheLink(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "gateway.jsonc")
	if err := os.Symlink(cfg, link); err != nil {
		t.Fatal(err)
	}
	state := gateway.StateFile(cfg, c)
	if err := os.Rename(state, link+".state.json"); err != nil {
		t.Fatal(err)
	}
	err = c.CheckKept(link)
	if err == nil || !strings.Contains(err.Error(), link+".state.json, beside the link the config was given by, is where earlier builds kept it: move it to "+state) {
		t.Errorf("the refusal: %v", err)
	}
}

// A store of a gateway that has served replaced by a valid database with
// no tables (a fresh file put in its place) is refused as an empty one
// is, not opened as an empty store (attack53 N3: trash list said "0
// delete(s)" and made its tables in it).
func TestGatewayRefusesAStoreReplacedByAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	cfg, token := initGateway(t, t.TempDir())
	serveOnce(t, cfg, token)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, replaced := range []string{c.TrashPath(), c.LedgerPath(), c.ProvenancePath()} {
		kept, err := os.ReadFile(replaced)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(replaced)
		db, err := sqlitewal.Open(replaced, "FULL")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE t (x); DROP TABLE t`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := c.CheckKept(cfg); err == nil || !strings.Contains(err.Error(), replaced+" (") || !strings.Contains(err.Error(), "an empty database, with no tables") {
			t.Errorf("%s replaced by an empty database: %v", replaced, err)
		}
		code, stdout, errOut := runCLI("gateway", "--config", cfg, "trash", "list")
		if replaced == c.TrashPath() && (code != 1 || !strings.Contains(errOut, replaced+" (")) {
			t.Errorf("trash list with %s replaced: exit %d: %s%s", replaced, code, stdout, errOut)
		}
		if err := os.WriteFile(replaced, kept, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(replaced + "-wal")
		os.Remove(replaced + "-shm")
	}
}
