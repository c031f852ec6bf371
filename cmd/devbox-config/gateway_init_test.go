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
	t.Parallel()
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
	if !strings.Contains(errOut, "no gateway config at "+cfg+": create one with 'devbox-config gateway --config "+cfg+" init'") {
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
	for _, want := range []string{`"secret_file": "gateway.secret"`, `"audit_log": "audit/audit.jsonl"`, `"signing_key_file": "audit-signing.key"`, `"audit_anchor": "stderr"`, `//   "id": "laptop-7f3a"`, "// "} {
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
	if c.SecretFile != filepath.Join(dir, "gw", "gateway.secret") || c.AuditLog != filepath.Join(dir, "gw", "audit", "audit.jsonl") {
		t.Errorf("the sample's paths are not relative to its directory: %s, %s", c.SecretFile, c.AuditLog)
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
	t.Parallel()
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

// runHint runs a command line the CLI printed as a hint, as pasted into a
// shell (the hints here have no quoting: t.TempDir has no spaces).
func runHint(t *testing.T, hint string) (code int, stdout, stderr string) {
	t.Helper()
	words := strings.Fields(hint)
	if len(words) < 2 || words[0] != "devbox-config" || strings.ContainsAny(hint, `'"\`) {
		t.Fatalf("not a command line to run: %q", hint)
	}
	return runCLI(words[1:]...)
}

// The hints gateway prints name --config when it is not the default, in the
// form that works (right after 'gateway', absolute), so pasted in another
// directory they reach the same config; before, 'gateway token issue
// laptop-7f3a' from the sample failed there with "no gateway config at
// gateway.jsonc".
func TestGatewayHintsWorkFromAnotherDirectory(t *testing.T) {
	work, elsewhere := t.TempDir(), t.TempDir()
	t.Chdir(work)
	rel := filepath.Join("gw", "gateway.jsonc")
	abs := filepath.Join(work, rel)

	// the hint of an operator command run before init
	code, _, errOut := runCLI("gateway", "--config", rel, "device", "list")
	hint, ok := between(errOut, "create one with '", "'")
	if code != 1 || !ok || hint != "devbox-config gateway --config "+abs+" init" {
		t.Fatalf("device list before init: exit %d: %s", code, errOut)
	}
	t.Chdir(elsewhere)
	if code, _, errOut := runHint(t, hint); code != 0 {
		t.Fatalf("%s: exit %d: %s", hint, code, errOut)
	}
	os.Remove(abs)

	// init's "next:" hint
	t.Chdir(work)
	code, _, errOut = runCLI("gateway", "init", "--config", rel)
	next, ok := between(errOut, "next: ", "\n")
	if code != 0 || !ok || next != "devbox-config gateway --config "+abs+" device add ID ..." {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	sample, _ := os.ReadFile(abs) // before device add rewrites it without comments
	t.Chdir(elsewhere)
	add := strings.Replace(next, "ID ...", "laptop-7f3a --read shared --write shared", 1)
	if code, out, errOut := runHint(t, add); code != 0 {
		t.Fatalf("%s: exit %d: %s%s", add, code, out, errOut)
	}

	// the sample's comment: the token issue line
	var issue string
	for _, l := range strings.Split(string(sample), "\n") {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "//")); strings.HasSuffix(l, "token issue laptop-7f3a") {
			issue = l
		}
	}
	if issue != "devbox-config gateway --config "+abs+" token issue laptop-7f3a" {
		t.Fatalf("the sample's token issue hint is %q:\n%s", issue, sample)
	}
	if code, out, errOut := runHint(t, issue); code != 0 || !strings.HasPrefix(out, "dbx_") {
		t.Fatalf("%s: exit %d: %s%s", issue, code, out, errOut)
	}

	// with the default config the hints leave --config out, and they work
	// where it is ./gateway.jsonc
	t.Chdir(elsewhere)
	code, _, errOut = runCLI("gateway", "init")
	if next, _ := between(errOut, "next: ", "\n"); code != 0 || next != "devbox-config gateway device add ID ..." {
		t.Fatalf("init with the default config: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runHint(t, "devbox-config gateway device add laptop-7f3a --read shared"); code != 0 {
		t.Fatalf("device add on ./gateway.jsonc: exit %d: %s", code, errOut)
	}
}

func between(s, from, to string) (string, bool) {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return "", false
	}
	v, _, ok := strings.Cut(rest, to)
	return v, ok
}

// The commented-out example device is valid once uncommented, so a user
// who edits the sample by hand gets a working device.
func TestGatewaySampleExampleDeviceIsValid(t *testing.T) {
	t.Parallel()
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
	if c.InstructionWing != "wing_instructions" {
		t.Errorf("the sample's instruction wing: %q", c.InstructionWing)
	}
	if dec := gateway.Authorize(d, "mempalace_add_drawer", map[string]any{"wing": "wing_instructions", "room": "r", "content": "x"}, ""); dec.Allow {
		t.Errorf("the example device, not an admin, may write the instruction wing: %+v", dec)
	}
	if dec := gateway.Authorize(d, "mempalace_list_drawers", map[string]any{"wing": "wing_instructions"}, ""); !dec.Allow {
		t.Errorf("the example device may not read the instruction wing: %+v", dec)
	}
	// and the gateway opens with it
	s := &gateway.Server{ConfigFile: cfg, Upstream: "http://127.0.0.1:1/mcp", BindHost: "127.0.0.1"}
	if err := s.Open(); err != nil {
		t.Fatalf("the gateway does not open on the sample: %v", err)
	}
	s.Close()
}

// An operator command run outside the config's directory, without --config,
// names the absolute path it looked at and the way to reach the config
// (outsider65: it said only "no gateway config at gateway.jsonc").
func TestMissingDefaultConfigNamesItsDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("gateway", "device", "list")
	want := "no gateway config at " + filepath.Join(wd, "gateway.jsonc") + ": "
	if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "give --config its path") {
		t.Fatalf("exit %d: %s\nwant it to contain %q and the --config way", code, errOut, want)
	}
}
