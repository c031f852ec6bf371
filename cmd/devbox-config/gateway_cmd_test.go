package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
)

func TestGatewayOperatorCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.jsonc")
	os.WriteFile(cfg, []byte(`{
  // devices are added with the CLI
  "secret_file": "`+filepath.Join(dir, "secret")+`",
  "audit_log": "`+filepath.Join(dir, "audit.jsonl")+`",
  "devices": []
}`), 0o600)
	cli := func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if got := run(append([]string{"gateway", "--config", cfg}, args...), &out, &errb); got != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, got, want, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	cli(0, "device", "add", "laptop-7f3a", "--label", "laptop", "--read", "shared,wing_opencode", "--write", "shared", "--kg", "read", "--agents", "opencode@laptop")
	cli(1, "device", "add", "laptop-7f3a")
	out, errOut := cli(0, "token", "issue", "laptop-7f3a")
	tok := strings.TrimSpace(out)
	if !strings.HasPrefix(tok, "dbx_") || !strings.Contains(errOut, "shown once") {
		t.Fatalf("issue: %q %q", out, errOut)
	}
	b, _ := os.ReadFile(cfg)
	if strings.Contains(string(b), strings.Split(tok, "_")[2]) {
		t.Fatal("the token's secret is stored in the config")
	}
	cli(0, "token", "rotate", "laptop-7f3a")
	cli(1, "token", "issue", "laptop-7f3a") // a third live token is refused
	out, _ = cli(0, "device", "list")
	if !strings.Contains(out, "laptop-7f3a") || strings.Count(out, ":live") != 2 {
		t.Fatalf("list: %s", out)
	}
	out, _ = cli(0, "token", "revoke", "laptop-7f3a")
	if !strings.Contains(out, "revoked 2") {
		t.Fatalf("revoke: %s", out)
	}
	cli(1, "device", "add", "bad", "--kg", "everything") // validated: kg
	cli(1, "audit", "verify")                            // no log yet
	cli(0, "device", "remove", "laptop-7f3a")
	cli(2, "--listen", ":8766", "--upstream", "http://127.0.0.1:8765/mcp") // no implicit 0.0.0.0
}

// The gateway records first uses in its state file, not the config; the
// operator commands read it: a token rotated out shows its expiry, and
// once that has passed a new token may be issued.
func TestGatewayOperatorCommandsSeeState(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.jsonc")
	os.WriteFile(cfg, []byte(`{"secret_file": "`+filepath.Join(dir, "secret")+`", "audit_log": "`+filepath.Join(dir, "audit.jsonl")+`", "devices": []}`), 0o600)
	cli := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if got := run(append([]string{"gateway", "--config", cfg}, args...), &out, &errb); got != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, got, want, out.String(), errb.String())
		}
		return out.String()
	}
	cli(0, "device", "add", "laptop-7f3a", "--read", "shared")
	cli(0, "token", "issue", "laptop-7f3a")
	newTok := strings.TrimSpace(cli(0, "token", "rotate", "laptop-7f3a"))
	cli(1, "token", "issue", "laptop-7f3a") // two live tokens
	// The gateway saw the new token's first use eight days ago.
	newID := strings.Split(newTok, "_")[1]
	if err := gateway.RecordFirstUse(cfg+".state.json", map[string]time.Time{newID: time.Now().Add(-8 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if out := cli(0, "device", "list"); !strings.Contains(out, ":expires ") {
		t.Fatalf("the rotated-out token's expiry is not shown:\n%s", out)
	}
	cli(0, "token", "issue", "laptop-7f3a") // the old one has expired
}
