package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runBounded runs the CLI and fails the test if it has not returned within
// a few seconds: a gateway that should have refused to start is serving.
func runBounded(t *testing.T, args ...string) (int, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() { c, o, e := runCLI(args...); done <- result{c, o, e} }()
	select {
	case r := <-done:
		return r.code, r.out + r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("%v: still running after 5 s: the gateway started with settings that cannot work", args)
		return 0, ""
	}
}

// The gateway refuses to start with settings that cannot work, each with
// the exact fix (before: an --upstream without a scheme logged "listening"
// and answered every request 502; no upstream token passed the upstream's
// 401 on; --listen 0.0.0.0 was accepted silently; a missing config said
// "no such file").
func TestGatewayRefusesWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.jsonc")
	if code, _, errOut := runCLI("gateway", "--config", cfg, "init"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "the-upstreams-token-0123456789")
	withFile := filepath.Join(dir, "with-file.jsonc")
	b, _ := os.ReadFile(cfg)
	tokFile := filepath.Join(dir, "upstream.token")
	os.WriteFile(withFile, []byte(strings.Replace(string(b), `"devices"`, `"upstream_token_file": "`+tokFile+`", "devices"`, 1)), 0o600)
	up := "http://127.0.0.1:8765/mcp"
	for _, c := range []struct {
		name string
		env  string // MEMPALACE_UPSTREAM_TOKEN for this case
		args []string
		code int
		says []string
	}{
		{"upstream without a scheme", "tok", []string{"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:8765/mcp"}, 2, []string{"no scheme", "--upstream http://127.0.0.1:8765/mcp"}},
		{"upstream without /mcp", "tok", []string{"--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:8765"}, 2, []string{"/mcp", "--upstream http://127.0.0.1:8765/mcp"}},
		{"upstream with a password", "tok", []string{"--listen", "127.0.0.1:0", "--upstream", "http://u:p@127.0.0.1:8765/mcp"}, 2, []string{"MEMPALACE_UPSTREAM_TOKEN"}},
		{"wildcard v4", "tok", []string{"--listen", "0.0.0.0:0", "--upstream", up}, 2, []string{"--allow-wildcard", "172.17.0.1"}},
		{"wildcard v6", "tok", []string{"--listen", "[::]:0", "--upstream", up}, 2, []string{"--allow-wildcard"}},
		{"no config", "tok", []string{"--config", filepath.Join(dir, "none.jsonc"), "--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{"gateway --config " + filepath.Join(dir, "none.jsonc") + " init"}},
		{"wildcard allowed, then the config", "tok", []string{"--config", filepath.Join(dir, "none.jsonc"), "--listen", "0.0.0.0:0", "--allow-wildcard", "--upstream", up}, 1, []string{"init"}},
		{"listen port out of range", "tok", []string{"--listen", "127.0.0.1:191200", "--upstream", up}, 2, []string{`port "191200" is not a port`, "--listen 127.0.0.1:8766"}},
		{"config is a directory", "tok", []string{"--config", dir, "--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{"is a directory", "--config " + filepath.Join(dir, "gateway.jsonc")}},
		{"no upstream token", "", []string{"--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{"MEMPALACE_UPSTREAM_TOKEN", "upstream_token_file", "--no-upstream-token"}},
		{"upstream token file missing", "", []string{"--config", withFile, "--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{tokFile, "upstream_token_file"}},
		{"no token, yet --no-upstream-token is contradicted", "tok", []string{"--no-upstream-token", "--listen", "127.0.0.1:0", "--upstream", up}, 2, []string{"--no-upstream-token", "MEMPALACE_UPSTREAM_TOKEN"}},
		// The token file refuses the same (gateway.ReadSecretFile).
		{"upstream token of two lines", "first-half-0123\nsecond-half-4567", []string{"--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{"MEMPALACE_UPSTREAM_TOKEN", "the token alone"}},
		{"upstream token with a space", "first-half-0123 second-half-4567", []string{"--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{"MEMPALACE_UPSTREAM_TOKEN", "the token alone"}},
		{"upstream token with a control character", "first-half-0123\x1bsecond-half-4567", []string{"--listen", "127.0.0.1:0", "--upstream", up}, 1, []string{"MEMPALACE_UPSTREAM_TOKEN", "the token alone"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MEMPALACE_UPSTREAM_TOKEN", c.env)
			args := append([]string{"gateway"}, c.args...)
			if !strings.Contains(strings.Join(c.args, " "), "--config") {
				args = append([]string{"gateway", "--config", cfg}, c.args...)
			}
			code, out := runBounded(t, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d:\n%s", code, c.code, out)
			}
			for _, s := range c.says {
				if !strings.Contains(out, s) {
					t.Errorf("the refusal does not say %q:\n%s", s, out)
				}
			}
			if strings.Contains(out, "listening") {
				t.Errorf("it listened:\n%s", out)
			}
			if strings.Contains(out, "half-") {
				t.Errorf("the refusal shows the token:\n%s", out)
			}
		})
	}
	os.WriteFile(tokFile, []byte("the-upstreams-token-0123456789\n"), 0o644)
	t.Setenv("MEMPALACE_UPSTREAM_TOKEN", "")
	if code, out := runBounded(t, "gateway", "--config", withFile, "--listen", "127.0.0.1:0", "--upstream", up); code != 1 || !strings.Contains(out, "chmod 600 "+tokFile) {
		t.Errorf("a token file others can read: exit %d\n%s", code, out)
	}
	os.Chmod(tokFile, 0o600)
	os.WriteFile(tokFile, []byte("MEMPALACE_MCP_HTTP_TOKEN=the-upstreams-token-0123456789\n"), 0o600)
	if code, out := runBounded(t, "gateway", "--config", withFile, "--listen", "127.0.0.1:0", "--upstream", up); code != 1 || !strings.Contains(out, tokFile+" is in .env form") || strings.Contains(out, "upstreams-token") || strings.Contains(out, "listening") {
		t.Errorf("a token file in .env form: exit %d\n%s", code, out)
	}
}
