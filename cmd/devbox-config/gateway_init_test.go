package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// gateway init on an empty directory writes a commented config with mode
// 0600 that the gateway loads, refuses to overwrite it, and device add and
// token issue work on it right away (before: "open gateway.jsonc: no such
// file or directory").
func TestGatewayInitFromNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw", "gateway.jsonc")
	os.Mkdir(filepath.Dir(cfg), 0o700)
	cli := func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if got := run(append([]string{"gateway", "--config", cfg}, args...), &out, &errb); got != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, got, want, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	// before init, the operator commands say what to run
	_, errOut := cli(1, "device", "add", "laptop-7f3a")
	if !strings.Contains(errOut, "no gateway config at "+cfg+": create one with 'devbox-config gateway init --config "+cfg+"'") {
		t.Errorf("device add before init says %q", errOut)
	}
	_, errOut = cli(0, "init")
	if !strings.Contains(errOut, "wrote "+cfg+" (0600)") {
		t.Errorf("init says %q", errOut)
	}
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(cfg)
	for _, want := range []string{`"secret_file": "` + filepath.Join(dir, "gw", "gateway.secret") + `"`, `"audit_log": "` + filepath.Join(dir, "gw", "audit.jsonl") + `"`, `//   "id": "laptop-7f3a"`, "// "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("sample lacks %q:\n%s", want, b)
		}
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatalf("the sample does not load: %v", err)
	}
	if len(c.Devices) != 0 {
		t.Errorf("the sample's example device is live: %+v", c.Devices)
	}

	// never overwritten
	os.WriteFile(cfg, append(b, []byte("// mine\n")...), 0o600)
	_, errOut = cli(1, "init")
	if !strings.Contains(errOut, cfg+" exists; not overwritten") {
		t.Errorf("second init says %q", errOut)
	}
	if got, _ := os.ReadFile(cfg); !bytes.HasSuffix(got, []byte("// mine\n")) {
		t.Error("init overwrote an existing config")
	}
	os.WriteFile(cfg, b, 0o600)

	cli(0, "device", "add", "laptop-7f3a", "--label", "laptop", "--read", "shared", "--write", "shared", "--kg", "read", "--agents", "opencode@laptop")
	out, _ := cli(0, "token", "issue", "laptop-7f3a")
	if !strings.HasPrefix(strings.TrimSpace(out), "dbx_") {
		t.Fatalf("token issue printed %q", out)
	}
	if fi, err := os.Stat(filepath.Join(dir, "gw", "gateway.secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the secret beside the config: %v %v", fi, err)
	}
	if fi, _ := os.Stat(cfg); fi.Mode().Perm() != 0o600 {
		t.Errorf("after device add the config's mode is %v", fi.Mode().Perm())
	}
}

// gateway init --config in a directory that does not exist yet creates it
// (0700) and writes the config (0600); before, it failed with "open …: no
// such file or directory". It still refuses to overwrite.
func TestGatewayInitMissingDirectory(t *testing.T) {
	base := t.TempDir()
	cfg := filepath.Join(base, "some", "missing", "dir", "gateway.jsonc")
	code, _, errOut := runCLI("gateway", "init", "--config", cfg)
	if code != 0 || !strings.Contains(errOut, "wrote "+cfg+" (0600)") {
		t.Fatalf("init into a missing directory: exit %d: %s", code, errOut)
	}
	for _, d := range []string{"some", "some/missing", "some/missing/dir"} {
		fi, err := os.Stat(filepath.Join(base, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a directory with mode 0700", d, fi, err)
		}
	}
	fi, err := os.Stat(cfg)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config: %v %v, want mode 0600", fi, err)
	}
	if _, err := gateway.LoadConfig(cfg); err != nil {
		t.Fatalf("the sample does not load: %v", err)
	}
	if code, _, errOut := runCLI("gateway", "init", "--config", cfg); code != 1 || !strings.Contains(errOut, "exists; not overwritten") {
		t.Errorf("second init: exit %d: %s", code, errOut)
	}
}

// The commented-out example device is valid once uncommented, so a user
// who edits the sample by hand gets a working device.
func TestGatewaySampleExampleDeviceIsValid(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	b, err := gateway.SampleConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inDevices := false
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"devices": [`) {
			inDevices = true
		}
		if inDevices {
			l = regexp.MustCompile(`^(\s*)// `).ReplaceAllString(l, "$1")
		}
		lines = append(lines, l)
	}
	os.WriteFile(cfg, []byte(strings.Join(lines, "\n")), 0o600)
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatalf("the uncommented example does not load: %v\n%s", err, strings.Join(lines, "\n"))
	}
	d := c.Device("laptop-7f3a")
	if d == nil || d.KG != "read" || len(d.Agents) != 1 {
		t.Fatalf("example device: %+v", c.Devices)
	}
	// and the gateway opens with it
	s := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1"}
	if err := s.Open(); err != nil {
		t.Fatalf("the gateway does not open on the sample: %v", err)
	}
}
