package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
)

// `gateway device set` changes a device's scopes in place: only the flags
// given change, and its tokens stay (before: the only way was device
// remove, which killed the tokens, and add again, or editing JSON by hand).
func TestGatewayDeviceSetKeepsTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "laptop-7f3a", "--label", "laptop", "--read", "shared", "--agents", "opencode@laptop")
	tok, _ := cli(0, "token", "issue", "laptop-7f3a")
	tok = strings.TrimSpace(tok)
	before, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	out, _ := cli(0, "device", "set", "laptop-7f3a", "--read", "shared,wing_opencode", "--write", "shared", "--kg", "write")
	if out != "device laptop-7f3a: read shared,wing_opencode; write shared; kg write; agents opencode@laptop\n" {
		t.Errorf("set says %q", out)
	}
	c, err := gateway.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Device("laptop-7f3a")
	if d.Label != "laptop" || strings.Join(d.Read, ",") != "shared,wing_opencode" || strings.Join(d.Write, ",") != "shared" || d.KG != gateway.KGWrite || strings.Join(d.Agents, ",") != "opencode@laptop" {
		t.Errorf("after set: %+v", d)
	}
	if len(d.Tokens) != 1 || d.Tokens[0] != before.Device("laptop-7f3a").Tokens[0] {
		t.Errorf("the tokens changed: %+v, were %+v", d.Tokens, before.Device("laptop-7f3a").Tokens)
	}
	key, _ := gateway.LoadSecret(c)
	if got, _, _, err := gateway.AuthenticateWith(c, nil, key, tok, time.Now()); err != nil || got.ID != "laptop-7f3a" {
		t.Errorf("the token issued before set no longer authenticates: %v", err)
	}

	cli(0, "device", "set", "laptop-7f3a", "--write", "", "--admin=false", "--agents", "opencode@laptop,pi@laptop")
	c, _ = gateway.LoadConfig(cfg)
	if d := c.Device("laptop-7f3a"); len(d.Write) != 0 || strings.Join(d.Agents, ",") != "opencode@laptop,pi@laptop" || strings.Join(d.Read, ",") != "shared,wing_opencode" {
		t.Errorf("--write '' should clear the writes and leave the rest: %+v", d)
	}
	_, errOut := cli(2, "device", "set", "laptop-7f3a")
	if !strings.Contains(errOut, "--read") {
		t.Errorf("set without flags: %s", errOut)
	}
	cli(1, "device", "set", "nosuch", "--read", "x")
	cli(1, "device", "set", "laptop-7f3a", "--kg", "everything")
	if c2, _ := gateway.LoadConfig(cfg); c2.Device("laptop-7f3a").KG != gateway.KGWrite {
		t.Error("a refused set changed the device")
	}
}

// `device add|set --trusts --untrusted` name the devices a device trusts
// and what its answers do with the rest; an empty --trusts trusts every device
// again. A set naming a device that does not exist is refused and
// changes nothing.
func TestGatewayDeviceTrusts(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	run := gatewayCLI(t, cfg)
	cli := func(want int, args ...string) string {
		t.Helper()
		out, errOut := run(want, args...)
		return out + errOut
	}
	cli(0, "init")
	cli(0, "device", "add", "ops-0001", "--admin", "--read", "*", "--write", "*")
	out := cli(0, "device", "add", "laptop-7f3a", "--read", "shared", "--trusts", "ops-0001")
	if !strings.Contains(out, "trusts ops-0001 (mark the rest)") {
		t.Errorf("add says %q", out)
	}
	if out := cli(0, "device", "set", "laptop-7f3a", "--untrusted", "withhold"); !strings.Contains(out, "trusts ops-0001 (withhold the rest)") {
		t.Errorf("set says %q", out)
	}
	if out := cli(1, "device", "set", "laptop-7f3a", "--trusts", "nosuch-1"); !strings.Contains(out, `"nosuch-1" is no device`) {
		t.Errorf("a trusted device that does not exist: %q", out)
	}
	for given, meant := range map[string]string{"ｏps-0001": "ops-0001", "ops-001": "ops-0001", "lap\u0301top-7f3a": "laptop-7f3a"} { // a look-alike (attack113 F5) or a typo
		if out := cli(1, "device", "set", "laptop-7f3a", "--trusts", given); !strings.Contains(out, `did you mean "`+meant+`"?`) {
			t.Errorf("--trusts %q: %q, want a did you mean %s", given, out, meant)
		}
	}
	c, _ := gateway.LoadConfig(cfg)
	if d := c.Device("laptop-7f3a"); strings.Join(d.Trusts, ",") != "ops-0001" || d.Untrusted != gateway.UntrustedWithhold {
		t.Errorf("after set: %+v", d)
	}
	if out := cli(0, "device", "list"); !strings.Contains(out, "ops-0001:withhold") || !strings.Contains(out, "TRUSTS") {
		t.Errorf("device list does not show the trusted set:\n%s", out)
	}
	cli(0, "device", "set", "laptop-7f3a", "--trusts", "")
	c, _ = gateway.LoadConfig(cfg)
	if d := c.Device("laptop-7f3a"); d.Trusts != nil || d.Untrusted != "" {
		t.Errorf("--trusts '' should trust every device again: %+v", d)
	}
}

// `device add --read 'wing_carol, wing_shared'` (the comma-space habit)
// reads two wings: the spaces around each item of a list flag are
// dropped (before, " wing_shared" was stored and never matched, and the
// device silently lost the wing).
func TestGatewayDeviceListFlagsTrimSpaces(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := func(args ...string) {
		t.Helper()
		if code, out, errOut := runCLI(append([]string{"gateway", "--config", cfg}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	cli("init")
	cli("device", "add", "ops-0001", "--read", "*")
	cli("device", "add", "carol-04", "--label", "carol", "--read", "wing_carol, wing_shared", "--write", " wing_carol", "--agents", "x@carol, y@carol", "--trusts", "carol-04, ops-0001")
	want := func(what string) {
		t.Helper()
		c, err := gateway.LoadConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d := c.Device("carol-04")
		if got := fmt.Sprintf("%q %q %q %q", d.Read, d.Write, d.Agents, d.Trusts); got != `["wing_carol" "wing_shared"] ["wing_carol"] ["x@carol" "y@carol"] ["carol-04" "ops-0001"]` {
			t.Errorf("after %s: %s", what, got)
		}
	}
	want("add")
	cli("device", "set", "carol-04", "--read", "wing_carol ,  wing_shared", "--write", "wing_carol ", "--agents", " x@carol,y@carol", "--trusts", "carol-04 , ops-0001")
	want("set")
}

// The operator's mistakes with devices say the fix: removing a device
// another trusts names who trusts it and the command that drops it from
// each trusted set (before: "devices[1].trusts[0]: ... is no device of
// this config", about a file that does not exist); adding an id that
// exists says to change it with device set; a duplicate id or a bad glob
// in the file says what to write.
func TestGatewayDeviceMistakesSayTheFix(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "ops-03", "--read", "*")
	cli(0, "device", "add", "bob-02", "--read", "*", "--trusts", "bob-02,ops-03")
	cli(0, "device", "add", "eve-05", "--read", "*", "--trusts", "ops-03")
	before, _ := os.ReadFile(cfg)
	_, errOut := cli(1, "device", "remove", "ops-03")
	for _, w := range []string{"ops-03 is trusted by bob-02, eve-05", "device set bob-02 --trusts bob-02'", "device set eve-05 --trusts eve-05'", "then remove it"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("remove of a trusted device does not say %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "no device of this config") {
		t.Errorf("remove speaks of a config that does not exist:\n%s", errOut)
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("the refused remove changed the config")
	}
	if _, errOut := cli(1, "device", "add", "bob-02", "--read", "x"); !strings.Contains(errOut, "device bob-02 exists (fix: change it with '") || !strings.Contains(errOut, "device set bob-02 ...', or add the new machine under another id: '") || !strings.Contains(errOut, "device add NEW-ID ...')") {
		t.Errorf("add of an existing id: %s", errOut)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"id": "eve-05"`, `"id": "bob-02"`, `devices[2].id: "bob-02" appears twice (fix: give each device its own id`},
		{`"*"`, `"[a"`, `"[a" is not a valid glob: syntax error in pattern; close each [ with ], and write a literal *, ?, [ or \ as \*, \?, \[ or \\`},
	} {
		bad := strings.Replace(string(before), c.from, c.to, 1)
		if bad == string(before) {
			t.Fatalf("%q not in the config", c.from)
		}
		os.WriteFile(cfg, []byte(bad), 0o600)
		if _, errOut := cli(1, "device", "list"); !strings.Contains(errOut, c.want) {
			t.Errorf("got %s\nwant it to say %s", errOut, c.want)
		}
	}
}

// `gateway init`'s file and `device list`'s output end with a newline
// (reported missing; pinned here: both did already).
func TestGatewayInitAndDeviceListEndWithANewline(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	runCLI("gateway", "--config", cfg, "init")
	if b, _ := os.ReadFile(cfg); !strings.HasSuffix(string(b), "}\n") {
		t.Errorf("init's config ends %q", b[max(0, len(b)-10):])
	}
	for _, add := range [][]string{nil, {"device", "add", "a-1", "--read", "x"}} {
		if add != nil {
			runCLI(append([]string{"gateway", "--config", cfg}, add...)...)
		}
		if _, out, _ := runCLI("gateway", "--config", cfg, "device", "list"); !strings.HasSuffix(out, "\n") {
			t.Errorf("device list ends %q", out)
		}
	}
}

// `device add ... --read 'a,,b'` (a doubled comma) makes an empty glob:
// the refusal names the device and the fix, not only "devices[3].read[1]:
// an empty glob" (outside tester, attack5).
func TestAnEmptyGlobNamesTheDeviceAndTheFix(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	if code, out, errOut := runCLI("gateway", "--config", cfg, "init"); code != 0 {
		t.Fatalf("init: %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"add", "desk-9b21", "--read", "a,,b"}, {"set", "desk-9b21", "--write", "a,"}} {
		if args[0] == "set" {
			runCLI("gateway", "--config", cfg, "device", "add", "desk-9b21", "--read", "a")
		}
		code, _, errOut := runCLI(append([]string{"gateway", "--config", cfg, "device"}, args...)...)
		if code == 0 || !strings.Contains(errOut, "desk-9b21") || !strings.Contains(errOut, "doubled") || !strings.Contains(errOut, "comma") {
			t.Errorf("device %v: exit %d, %q; want a refusal naming device desk-9b21 and the doubled or trailing comma", args, code, errOut)
		}
	}
}

// The tables (`gateway device list`, `edge outbox list`) end each line at
// its last character: a device with no token yet, or a queued op with no
// error, ends its row at the cell before, not in the padding after it
// (before: "...  all  " with two trailing spaces, which a diff or a
// copy-paste into a config shows).
func TestTableLinesEndWithoutSpaces(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "a-1", "--read", "x")
	cli(0, "device", "add", "b-2", "--read", "x", "--label", "laptop")
	out, _ := cli(0, "device", "list")
	wantNoTrailingSpace(t, "device list", out)

	s := edgeOutbox(t)
	s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"c"}`), Wing: "w"})
	s.Close()
	wantNoTrailingSpace(t, "edge outbox list", runOK(t, "edge", "outbox", "list"))
}

func wantNoTrailingSpace(t *testing.T, what, out string) {
	t.Helper()
	for line := range strings.Lines(out) {
		if l := strings.TrimSuffix(line, "\n"); strings.HasSuffix(l, " ") {
			t.Errorf("%s: a line ends in a space: %q\n%s", what, l, out)
		}
	}
}

// A device written by hand without "kg" has no knowledge-graph grant, and
// `device list` says so ("none") rather than leaving the column blank
// (reported by a helper while fixing the config's messages).
func TestDeviceListNamesTheDefaultKGGrant(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	runCLI("gateway", "--config", cfg, "init")
	runCLI("gateway", "--config", cfg, "device", "add", "hand-1", "--label", "hand", "--read", "shared", "--write", "shared")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	handWritten := regexp.MustCompile(`"kg":\s*"none",?`).ReplaceAll(b, nil)
	if bytes.Equal(handWritten, b) {
		t.Fatalf("no kg member to take out of:\n%s", b)
	}
	if err := os.WriteFile(cfg, handWritten, 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, _ := runCLI("gateway", "--config", cfg, "device", "list")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "hand-1" {
			if len(f) < 5 || f[4] != "none" {
				t.Errorf("device list's line %q: the KG column is not none", line)
			}
			return
		}
	}
	t.Errorf("device list does not list hand-1:\n%s", out)
}

// An agent no session of the device could be is refused where it is
// given, as pi@laptop(home) is (attack65 F4): a session speaks as
// MEMPALACE_AGENT_NAME@MEMPALACE_ORIGIN_LABEL, its device's label. Before,
// `--agents opencode` and an agent of another label were taken without a
// word, and the device could never post on the coordination log. A
// hand-edited config is refused at its line and column, with the fix.
func TestGatewayRefusesAnAgentNoSessionCouldBe(t *testing.T) {
	t.Parallel()
	cfg := emptyGatewayConfig(t)
	cli := gatewayCLI(t, cfg)
	for _, c := range []struct{ args []string }{
		{[]string{"device", "add", "bare-1", "--label", "bare", "--read", "shared", "--agents", "opencode"}},
		{[]string{"device", "add", "bare-1", "--label", "bare", "--read", "shared", "--agents", "opencode@other"}},
	} {
		if _, errOut := cli(1, c.args...); !strings.Contains(errOut, "--agents: ") || !strings.Contains(errOut, "no session could be this agent (fix: --agents opencode@bare)") {
			t.Errorf("%v: stderr %q", c.args, errOut)
		}
	}
	if _, errOut := cli(1, "device", "add", "bare-1", "--read", "shared", "--agents", "opencode@bare"); !strings.Contains(errOut, "the device has no label") || !strings.Contains(errOut, "--label bare") {
		t.Errorf("an agent on a device with no label: %q", errOut)
	}
	cli(0, "device", "add", "bare-1", "--label", "bare", "--read", "shared", "--agents", "opencode@bare")
	if _, errOut := cli(1, "device", "set", "bare-1", "--label", "naked"); !strings.Contains(errOut, `"opencode@bare": its label "bare" is not the device's label "naked"`) || !strings.Contains(errOut, "(fix: --agents opencode@naked)") {
		t.Errorf("a relabel leaving the agents behind: %q", errOut)
	}
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(b, []byte(`"opencode@bare"`), []byte(`"opencode"`), 1), 0o600)
	// A config that has one (hand-edited, or from before the rule) is
	// still loaded: a restart must not stop the fleet over it. It is told.
	if out, errOut := cli(0, "device", "list"); !strings.Contains(out, "bare-1") || !strings.Contains(errOut, "warning: ") || !strings.Contains(errOut, `devices[0].agents[0]: "opencode" has no @label`) || !strings.Contains(errOut, "(fix: --agents opencode@bare)") {
		t.Errorf("a hand-edited bare agent: stdout %q, stderr %q", out, errOut)
	}
}
