package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// gatewayCLI runs `devbox-config gateway --config cfg ARGS`, wants exit
// code want, and returns stdout and stderr.
func gatewayCLI(t *testing.T, cfg string) func(want int, args ...string) (string, string) {
	return func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if got := run(append([]string{"gateway", "--config", cfg}, args...), &out, &errb); got != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, got, want, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
}

// emptyGatewayConfig writes a gateway config with no devices in a new
// temporary directory, its secret and audit log beside it: its path.
func emptyGatewayConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.jsonc")
	if err := os.WriteFile(cfg, []byte(`{"secret_file": "`+filepath.Join(dir, "secret")+`", "audit_log": "`+filepath.Join(dir, "audit.jsonl")+`", "devices": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// gatewayWithDevice is an emptyGatewayConfig with device laptop-7f3a
// added (with the device add flags given) and issued a token: the
// config's path and the token.
func gatewayWithDevice(t *testing.T, flags ...string) (cfg, token string) {
	t.Helper()
	cfg = emptyGatewayConfig(t)
	cli := gatewayCLI(t, cfg)
	cli(0, append([]string{"device", "add", "laptop-7f3a"}, flags...)...)
	out, _ := cli(0, "token", "issue", "laptop-7f3a")
	return cfg, strings.TrimSpace(out)
}

// startGatewayBinary runs the devbox-config binary's gateway on cfg, on a
// free loopback address, in front of a fake primary that wants the
// token upstream-secret; the caller waits for the process.
func startGatewayBinary(t *testing.T, cfg string) (cmd *exec.Cmd, addr string, logs *testbed.SyncBuffer, primary *fakepalace.Palace) {
	t.Helper()
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	primary, up := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "upstream-secret"})
	addr = fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
	cmd = exec.Command(bin, "gateway", "--listen", addr, "--upstream", up.URL(), "--config", cfg)
	cmd.Env = append(os.Environ(), "MEMPALACE_UPSTREAM_TOKEN=upstream-secret")
	logs = &testbed.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, addr, logs, primary
}

// The audit log's end can be checked: `audit verify` says how many lines
// follow the last signed checkpoint, and with the anchor the gateway
// wrote outside the log's directory, a log whose last lines were removed
// fails, where the hash chain alone still verifies.
func TestAuditVerifyAnchorCatchesACutLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logDir, keyDir, anchorDir := filepath.Join(dir, "log"), filepath.Join(dir, "keys"), filepath.Join(dir, "elsewhere")
	for _, d := range []string{logDir, keyDir, anchorDir} {
		os.MkdirAll(d, 0o700)
	}
	auditLog, anchor := filepath.Join(logDir, "audit.jsonl"), filepath.Join(anchorDir, "audit.anchor")
	cfg := filepath.Join(keyDir, "gateway.jsonc")
	os.WriteFile(cfg, []byte(`{"secret_file": "`+filepath.Join(keyDir, "secret")+`", "audit_log": "`+auditLog+`",
  "signing_key_file": "`+filepath.Join(keyDir, "audit.key")+`", "audit_anchor": "`+anchor+`", "audit_checkpoint_lines": 10, "devices": []}`), 0o600)
	cli := gatewayCLI(t, cfg)
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for range 25 { // unauthenticated requests: 25 audit lines, a checkpoint after every 10
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{}`)))
	}
	out, _ := cli(0, "audit", "verify")
	if !strings.Contains(out, "27 lines, chain intact") || !strings.Contains(out, "last signed checkpoint at line 22") || !strings.Contains(out, "5 line(s) after it are not covered by a signature") {
		t.Fatalf("verify does not name the unsigned tail:\n%s", out)
	}
	// Named as FILE, the log is checked with the config's key all the same
	// (its --help says so): a rewritten copy must not pass as "intact"
	// with its signatures unchecked.
	if out, _ := cli(0, "audit", "verify", auditLog); !strings.Contains(out, "last signed checkpoint at line 22") {
		t.Fatalf("verify FILE did not check the signatures with the config's key:\n%s", out)
	}
	if out, _ := cli(0, "audit", "verify", "--anchor", anchor); !strings.Contains(out, "anchor: the log reaches line 22 with the head the anchor recorded") {
		t.Fatalf("verify --anchor on the whole log:\n%s", out)
	}
	// Cut the last eight lines: into the signed part.
	b, _ := os.ReadFile(auditLog)
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	os.WriteFile(auditLog, []byte(strings.Join(lines[:len(lines)-8], "")+"\n"), 0o600)
	if out, _ := cli(0, "audit", "verify"); !strings.Contains(out, "19 lines, chain intact") {
		t.Fatalf("the hash chain alone cannot see a cut end: %s", out)
	}
	// Cut back to the last checkpoint: nothing follows a signature, and
	// the output still says that only --anchor sees a cut end.
	os.WriteFile(auditLog, []byte(strings.Join(lines[:22], "")), 0o600)
	if out, _ := cli(0, "audit", "verify"); !strings.Contains(out, "0 line(s) after it") || !strings.Contains(out, "without --anchor, a cut of the log's end is not detected") {
		t.Fatalf("a log cut back to a checkpoint reads as fully covered:\n%s", out)
	}
	os.WriteFile(auditLog, []byte(strings.Join(lines[:len(lines)-8], "")+"\n"), 0o600)
	_, errOut := cli(1, "audit", "verify", "--anchor", anchor)
	if !strings.Contains(errOut, "the log ends at line 19") || !strings.Contains(errOut, "22 lines") {
		t.Fatalf("verify --anchor on a cut log: %s", errOut)
	}
	// A rewritten line under the anchor's count: caught too.
	os.WriteFile(auditLog, []byte(strings.Join(lines, "")), 0o600)
	edited := strings.Replace(string(b), `"status":401`, `"status":200`, 1)
	if edited == string(b) {
		t.Fatal("nothing to edit")
	}
	os.WriteFile(auditLog, []byte(edited), 0o600)
	if _, errOut := cli(1, "audit", "verify", "--anchor", anchor); !strings.Contains(errOut, "line 1") {
		t.Fatalf("an edited line: %s", errOut)
	}
	srv.Close()
	// The anchor must live outside the log's directory.
	os.WriteFile(cfg, fmt.Appendf(nil, `{"secret_file": %q, "audit_log": %q, "signing_key_file": %q, "audit_anchor": %q, "devices": []}`, filepath.Join(keyDir, "secret"), auditLog, filepath.Join(keyDir, "audit.key"), filepath.Join(logDir, "anchor")), 0o600)
	if _, errOut := cli(1, "audit", "verify"); !strings.Contains(errOut, "audit_anchor") || !strings.Contains(errOut, "outside") {
		t.Fatalf("an anchor beside the log: %s", errOut)
	}
}

// Right after `gateway init` and a start, the log holds lines but no
// checkpoint yet: verify says when the first comes, not to set a
// signing_key_file init already set; a log with no key configured is told
// to set one.
func TestAuditVerifyBeforeTheFirstCheckpoint(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for range 3 {
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{}`)))
	}
	out, _ := cli(0, "audit", "verify")
	if strings.Contains(out, "set signing_key_file") || !strings.Contains(out, "no checkpoint yet") || !strings.Contains(out, "100 lines") || !strings.Contains(out, "when it stops") {
		t.Fatalf("verify before the first checkpoint, with init's signing key:\n%s", out)
	}
	bare := emptyGatewayConfig(t)
	c, err := gateway.LoadConfig(bare)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.AuditLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := gatewayCLI(t, bare)(0, "audit", "verify"); !strings.Contains(out, "set signing_key_file") {
		t.Fatalf("verify of a log no key signs:\n%s", out)
	}
}

// A line's args_digest does not let a reader of the log test guesses of
// what a device sent (attack44 F1: an unkeyed SHA-256 of the arguments'
// JSON gave a 4-digit code back in 10,000 guesses); `audit digest`, run
// by the operator who holds the secret, prints the digest of arguments
// they hold, given the device and tool that sent them (the digest takes
// them in, so that a device cannot digest its guesses of another's call:
// attack46 N1), and the line carrying it is found by it; without them it
// is refused. The log written before and after the change is still one
// intact chain.
func TestAuditArgsDigestIsKeyedAndTheOperatorMatchesIt(t *testing.T) {
	t.Parallel()
	cfg := emptyGatewayConfig(t)
	cli := gatewayCLI(t, cfg)
	cli(0, "device", "add", "ops-0001", "--read", "*", "--write", "*", "--admin")
	out, _ := cli(0, "token", "issue", "ops-0001")
	token := strings.TrimSpace(out)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1", UpstreamToken: func() string { return "x" }}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	args := `{"wing":"wing_secret","room":"keys","content":"the launch code is 4242"}`
	req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":`+args+`}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	srv.ServeHTTP(httptest.NewRecorder(), req)
	b, _ := os.ReadFile(c.AuditLog)
	unkeyed := sha256.Sum256([]byte(`{"content":"the launch code is 4242","room":"keys","wing":"wing_secret"}`))
	if bytes.Contains(b, []byte(hex.EncodeToString(unkeyed[:16]))) {
		t.Fatalf("the log carries the unkeyed SHA-256 of the arguments: a reader guesses them\n%s", b)
	}
	argsFile := filepath.Join(t.TempDir(), "args.json")
	os.WriteFile(argsFile, []byte(args+"\n"), 0o600)
	out, _ = cli(0, "audit", "digest", "--device", "ops-0001", "--tool", "mempalace_add_drawer", argsFile)
	d := strings.TrimSpace(out)
	if len(d) != 32 || !bytes.Contains(b, []byte(`"args_digest":"`+d+`"`)) {
		t.Fatalf("audit digest printed %q, not the line's digest\n%s", d, b)
	}
	out, _ = cli(0, "audit", "digest", "--device", "laptop-7f3a", "--tool", "mempalace_status", argsFile)
	if other := strings.TrimSpace(out); other == d || len(other) != 32 {
		t.Fatalf("the same arguments from another device and tool digest to %q (ops's: %q)", other, d)
	}
	if _, errOut := cli(2, "audit", "digest", argsFile); !strings.Contains(errOut, "--device and --tool") {
		t.Fatalf("audit digest without --device and --tool: %s", errOut)
	}
	if _, errOut := cli(1, "audit", "digest", "--string", filepath.Join(t.TempDir(), "none")); !strings.Contains(errOut, "none") {
		t.Fatalf("a missing FILE: %s", errOut)
	}
	if out, _ := cli(0, "audit", "verify"); !strings.Contains(out, "chain intact") {
		t.Fatalf("verify: %s", out)
	}
}

// After the server secret is rotated (every token revoked, one issued
// anew), `audit digest --secret-file OLD` still matches a line written
// under the old secret; and the digest of no arguments ({}) is refused
// with the reason (before: there was no way to key it with the old
// secret, and {} printed an empty line, exit 0).
func TestAuditDigestAfterTheSecretIsRotated(t *testing.T) {
	t.Parallel()
	cfg, token := gatewayWithDevice(t, "--read", "*", "--write", "*")
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1", UpstreamToken: func() string { return "x" }}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	args := `{"wing":"shared","room":"r","content":"before the rotation"}`
	req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":`+args+`}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	srv.ServeHTTP(httptest.NewRecorder(), req)
	srv.Close()
	log, _ := os.ReadFile(c.AuditLog)

	old := filepath.Join(t.TempDir(), "old.secret")
	if err := os.Rename(c.SecretFile, old); err != nil {
		t.Fatal(err)
	}
	cli := gatewayCLI(t, cfg)
	cli(0, "token", "revoke", "laptop-7f3a")
	cli(0, "token", "issue", "laptop-7f3a")
	argsFile := filepath.Join(t.TempDir(), "args.json")
	os.WriteFile(argsFile, []byte(args), 0o600)
	q := []string{"audit", "digest", "--device", "laptop-7f3a", "--tool", "mempalace_add_drawer"}
	out, _ := cli(0, append(q, argsFile)...)
	if d := strings.TrimSpace(out); len(d) != 32 || bytes.Contains(log, []byte(d)) {
		t.Fatalf("under the new secret the digest is %q (it should match no old line)", d)
	}
	out, _ = cli(0, append(q, "--secret-file", old, argsFile)...)
	if d := strings.TrimSpace(out); len(d) != 32 || !bytes.Contains(log, []byte(`"args_digest":"`+d+`"`)) {
		t.Fatalf("--secret-file OLD printed %q, not the old line's digest\n%s", d, log)
	}
	os.WriteFile(argsFile, []byte(`{}`), 0o600)
	if out, errOut := cli(1, append(q, argsFile)...); out != "" || !strings.Contains(errOut, "no args_digest") {
		t.Fatalf("digest of {}: %q %q", out, errOut)
	}
}

// operator.md's rotation of the audit log: moved away while the gateway
// runs, the log is made anew at its path on the next line, its chain
// going on from the moved file's; the new file alone says it does not
// start the chain and how to verify it, and the files together, oldest
// first, verify with their signatures and the anchors of both.
func TestARotatedAuditLogVerifiesWithTheFilesBeforeIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logDir, keyDir, anchorDir := filepath.Join(dir, "log"), filepath.Join(dir, "keys"), filepath.Join(dir, "elsewhere")
	for _, d := range []string{logDir, keyDir, anchorDir} {
		os.MkdirAll(d, 0o700)
	}
	auditLog, anchor, cfg := filepath.Join(logDir, "audit.jsonl"), filepath.Join(anchorDir, "audit.anchor"), filepath.Join(keyDir, "gateway.jsonc")
	os.WriteFile(cfg, fmt.Appendf(nil, `{"secret_file": %q, "audit_log": %q, "signing_key_file": %q, "audit_anchor": %q, "audit_checkpoint_lines": 10, "devices": []}`,
		filepath.Join(keyDir, "secret"), auditLog, filepath.Join(keyDir, "audit.key"), anchor), 0o600)
	cli := gatewayCLI(t, cfg)
	srv := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1"}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	requests := func(n int) {
		for range n { // no token: a line each
			srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(`{}`)))
		}
	}
	requests(15)
	if err := os.Rename(auditLog, auditLog+".1"); err != nil {
		t.Fatal(err)
	}
	requests(15)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errOut := cli(1, "audit", "verify"); !strings.Contains(errOut, "line 1: the chain does not start here") || !strings.Contains(errOut, "oldest first") {
		t.Fatalf("the log rotated into, alone:\n%s", errOut)
	}
	old, _ := os.ReadFile(auditLog + ".1")
	cur, _ := os.ReadFile(auditLog)
	if bytes.Count(old, []byte("\n")) != 16 || bytes.Count(cur, []byte("\n")) != 17 {
		t.Fatalf("the moved file has %d lines and the new one %d: the gateway did not go on in a new file", bytes.Count(old, []byte("\n")), bytes.Count(cur, []byte("\n")))
	}
	// The files as they lie, oldest first, the moved one compressed as
	// logrotate leaves it (attack78 F4: verify took one file, and read a
	// compressed one as "not an audit entry").
	gz := auditLog + ".1.gz"
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(old)
	zw.Close()
	os.WriteFile(gz, zb.Bytes(), 0o600)
	// The anchor file rotated too, its first anchor compressed: --anchor
	// takes each file, in any order, a compressed one as it lies (review26
	// S3: it took one plain file).
	anchors, _ := os.ReadFile(anchor)
	nl := bytes.IndexByte(anchors, '\n') + 1
	zb.Reset()
	zw = gzip.NewWriter(&zb)
	zw.Write(anchors[:nl])
	zw.Close()
	os.WriteFile(anchor+".1.gz", zb.Bytes(), 0o600)
	os.WriteFile(anchor, anchors[nl:], 0o600)
	out, _ := cli(0, "audit", "verify", "--anchor", anchor, "--anchor", anchor+".1.gz", gz, auditLog)
	// 30 requests and a checkpoint after every 10 of them (none left for Close)
	if !strings.Contains(out, "33 lines, chain intact") || !strings.Contains(out, "last signed checkpoint at line 33") || !strings.Contains(out, "anchor: the log reaches line 33") {
		t.Fatalf("the rotated files together:\n%s", out)
	}
	// A line edited is named by its file and its line there.
	lines := strings.SplitAfter(string(cur), "\n")
	lines[4] = strings.Replace(lines[4], `"latency_ms":`, `"latency_ms":1`, 1)
	os.WriteFile(auditLog, []byte(strings.Join(lines, "")), 0o600)
	if _, errOut := cli(1, "audit", "verify", gz, auditLog); !strings.Contains(errOut, auditLog+" line 5 (line 21 of the log): edited") {
		t.Fatalf("a line edited in the second file:\n%s", errOut)
	}
	os.WriteFile(auditLog, cur, 0o600)
	// A file given twice (or one missing between them) is named.
	if _, errOut := cli(1, "audit", "verify", gz, gz, auditLog); !strings.Contains(errOut, gz+" line 1 (line 17 of the log): its first line does not follow the last line of "+gz) {
		t.Fatalf("a file twice:\n%s", errOut)
	}
}

// verify's report says once how many checkpoints an older release signed
// over their file's count alone, and says nothing of it when none was.
func TestVerifyReportsFileCountedCheckpoints(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "", 2: "2 checkpoint(s) signed by an older release count their file's lines alone"} {
		var out bytes.Buffer
		printVerified(&out, []string{"audit.jsonl.1", "audit.jsonl"}, gateway.Report{Lines: 20, Checkpoint: 20, Signed: true, FileCounted: n}, true, 100, 0)
		if strings.Count(out.String(), "older release") != min(n, 1) || !strings.Contains(out.String(), want) {
			t.Errorf("%d checkpoints counting their file: %q", n, out.String())
		}
	}
}
