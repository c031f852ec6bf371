package main

import (
	"github.com/joakimp/devbox-config/gateway"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `device add` and `device set` refuse what lets one device pass as
// another on the coordination log (the repro gave carol-03 claude@alice
// and carol read alice's mailbox and acked her asks): an agent name
// another device has, exactly or as a case or Cyrillic look-alike, a
// label another device has, and control, bidi or zero-width characters in
// labels and agents. Each refusal names the other device and the fix, and
// the config stays as it was. The refusal names the flag (--agents), not
// the config field it lands in.
func TestGatewayDeviceRefusesPassingAsAnother(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "alice-01", "--label", "alice", "--read", "*", "--agents", "claude@alice")
	cli(0, "device", "add", "bob-02", "--label", "bob", "--read", "*", "--agents", "pi@bob")
	cli(0, "device", "add", "carol-03", "--label", "carol", "--read", "*", "--agents", "op@carol")
	before, _ := os.ReadFile(cfg)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "carol-03", "--agents", "op@carol,claude@alice"}, `--agents: "claude@alice" is also an agent of device alice-01 (devices[0])`},
		{[]string{"set", "carol-03", "--agents", "op@carol,pi@bоb"}, `--agents: "pi@b\u043eb" looks like "pi@bob", an agent of device bob-02 (devices[1])`},
		{[]string{"set", "carol-03", "--label", "alice"}, `--label: "alice" looks like "alice", the label of device alice-01 (devices[0])`},
		{[]string{"set", "carol-03", "--label", "carol\x1b]0;alice\x07"}, `--label: "carol\x1b]0;alice\a" holds a control, bidi or zero-width character (U+001B)`},
		{[]string{"set", "carol-03", "--agents", "op@ca\u200drol"}, `--agents: "op@ca\u200drol" holds a control, bidi or zero-width character (U+200D)`},
		{[]string{"add", "dave-04", "--label", "Bob", "--read", "*"}, `--label: "Bob" looks like "bob", the label of device bob-02 (devices[1])`},
		{[]string{"add", "dave-04", "--label", "dave", "--read", "*", "--agents", "Claude@Alice"}, `--agents: "Claude@Alice" looks like "claude@alice", an agent of device alice-01 (devices[0])`},
	} {
		_, errOut := cli(1, append([]string{"device"}, c.args...)...)
		if !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "fix") {
			t.Errorf("%q:\n got %s\nwant it to say %s and the fix", c.args, errOut, c.want)
		}
		if after, _ := os.ReadFile(cfg); string(after) != string(before) {
			t.Fatalf("the refused %q changed the config", c.args)
		}
	}
	// Its own names again, and a name in another script that looks like
	// no other device's, stay legal.
	cli(0, "device", "set", "carol-03", "--label", "carol", "--agents", "op@carol,pi@carol")
	cli(0, "device", "add", "petr-05", "--label", "пётр", "--read", "*", "--agents", "pi@пётр")
}

// A removed device's id added again would inherit the old device's
// records (the provenance index keys them by id, never pruned) and every
// trust naming it: `device add` of a removed id is refused unless
// --reuse-removed-id says so, and the config remembers removed ids.
func TestGatewayDeviceAddOfARemovedIDNeedsAFlag(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "bob-02", "--label", "bob", "--read", "*", "--agents", "pi@bob")
	cli(0, "device", "remove", "bob-02")
	before, _ := os.ReadFile(cfg)
	_, errOut := cli(1, "device", "add", "bob-02", "--label", "bob", "--read", "*", "--agents", "pi@bob")
	for _, w := range []string{"bob-02 was removed", "records", "trust", "(fix: add the new machine under another id: '", "device add NEW-ID ...'; or, if it is the same machine, '", "device add bob-02 --reuse-removed-id ...')"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("add of a removed id does not say %q:\n%s", w, errOut)
		}
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("the refused add changed the config")
	}
	// Nor in another case: Bob-02 beside removed bob-02 reads as it in the
	// mailbox's "removed" mark and trust lists (attack85 F7).
	_, errOut = cli(1, "device", "add", "Bob-02", "--label", "bob2", "--read", "*", "--agents", "pi@bob2", "--reuse-removed-id")
	if !strings.Contains(errOut, "differs only in case from the removed device bob-02") || !strings.Contains(errOut, "(fix: add it under another id: '") || !strings.Contains(errOut, "device add NEW-ID ...'; or, if it is the removed machine, '") || !strings.Contains(errOut, "device add bob-02 --reuse-removed-id ...')") {
		t.Errorf("add of a removed id in another case:\n%s", errOut)
	}
	cli(0, "device", "add", "bob-02", "--label", "bob", "--read", "*", "--agents", "pi@bob", "--reuse-removed-id")
	c, err := gateway.LoadConfig(cfg)
	if after, _ := os.ReadFile(cfg); err != nil || c.Device("bob-02") == nil || strings.Contains(string(after), "removed_devices") {
		t.Errorf("after --reuse-removed-id (the id is no longer a removed one): %v\n%s", err, after)
	}
}

// A removed device's agents are remembered too: a device under a new id
// given one of them would read every ask ever addressed to it, old ones
// included, and could answer them as the removed device. `device add` and
// `device set` of such an agent are refused, naming the removed device
// and --take-removed-agents, which takes it over on purpose (a machine
// that replaces a lost one); the same id taken back with
// --reuse-removed-id keeps its agents without it. Before, the id was
// guarded and its agent free at once (outside tester, attack78 F6).
func TestGatewayDeviceTakingARemovedDevicesAgentNeedsAFlag(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "echo1", "--label", "echo", "--read", "shared", "--write", "shared", "--agents", "claude@echo")
	cli(0, "device", "remove", "echo1")
	before, _ := os.ReadFile(cfg)
	_, errOut := cli(1, "device", "add", "foxtrot", "--label", "echo", "--read", "shared", "--write", "shared", "--agents", "claude@echo")
	for _, w := range []string{"--agents", `"claude@echo"`, "removed device echo1", "every ask", "--take-removed-agents"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("add of a removed device's agent does not say %q:\n%s", w, errOut)
		}
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("the refused add changed the config")
	}
	cli(0, "device", "add", "foxtrot", "--label", "echo", "--read", "shared", "--write", "shared", "--agents", "pi@echo")
	_, errOut = cli(1, "device", "set", "foxtrot", "--agents", "pi@echo,claude@echo")
	if !strings.Contains(errOut, "removed device echo1") || !strings.Contains(errOut, "--take-removed-agents") {
		t.Errorf("set of a removed device's agent:\n%s", errOut)
	}
	out, _ := cli(0, "device", "set", "foxtrot", "--agents", "pi@echo,claude@echo", "--take-removed-agents")
	if !strings.Contains(out, "claude@echo") || !strings.Contains(out, "echo1") {
		t.Errorf("a take-over does not say whose agent it took:\n%s", out)
	}
	// foxtrot's agents are its own now: removed, they are remembered as
	// foxtrot's, and foxtrot taken back keeps them with no other flag.
	cli(0, "device", "remove", "foxtrot")
	_, errOut = cli(1, "device", "add", "golf", "--label", "echo", "--read", "shared", "--agents", "claude@echo")
	if !strings.Contains(errOut, "removed device foxtrot") {
		t.Errorf("the agent taken over and removed again:\n%s", errOut)
	}
	cli(0, "device", "add", "foxtrot", "--label", "echo", "--read", "shared", "--agents", "pi@echo,claude@echo", "--reuse-removed-id")
	if after, _ := os.ReadFile(cfg); strings.Contains(string(after), "removed_agents") {
		t.Errorf("foxtrot taken back, its agents are still remembered as a removed device's:\n%s", after)
	}
}

// An agent `device set` drops from a live device is remembered as that
// device's, as a removed device's is: a laptop relabelled (delta to
// delta2, its agents with it) and a new machine given the freed
// claude@delta would read every ask addressed to the first, old ones
// included. Another device taking it needs --take-removed-agents; the
// device that dropped it takes it back without (outside tester,
// attack79 F5: the new device took it with no flag and read the asks).
func TestGatewayDeviceTakingAnAgentAnotherDeviceDroppedNeedsAFlag(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "d2", "--label", "delta", "--read", "shared", "--agents", "claude@delta,pi@delta")
	cli(0, "device", "set", "d2", "--agents", "pi@delta")
	cli(0, "device", "set", "d2", "--agents", "pi@delta,claude@delta") // its own: taken back with no flag
	cli(0, "device", "set", "d2", "--label", "delta2", "--agents", "opencode@delta2")
	_, errOut := cli(1, "device", "add", "d3", "--label", "delta", "--read", "shared", "--agents", "claude@delta")
	for _, w := range []string{"--agents", `"claude@delta"`, "device d2, which dropped it", "every ask", "--take-removed-agents"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("add of an agent d2 dropped does not say %q:\n%s", w, errOut)
		}
	}
	out, _ := cli(0, "device", "add", "d3", "--label", "delta", "--read", "shared", "--agents", "claude@delta,pi@delta", "--take-removed-agents")
	if !strings.Contains(out, "took over claude@delta (device d2, which dropped it), pi@delta (device d2, which dropped it)") {
		t.Errorf("a take-over does not say whose agents it took:\n%s", out)
	}
}

// A removed device's agent is compared with another device's as a live
// device's is, as a look-alike (case, confusables): a new device given
// CLAUDE@echo or claudе@echo (Cyrillic е) after echo1 with claude@echo
// was removed shows on the log as the lost laptop (outside tester,
// attack79 F6: each was accepted). --take-removed-agents takes it over.
func TestGatewayDeviceRefusesALookAlikeOfARemovedDevicesAgent(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.jsonc")
	cli := gatewayCLI(t, cfg)
	cli(0, "init")
	cli(0, "device", "add", "echo1", "--label", "echo", "--read", "shared", "--agents", "claude@echo")
	cli(0, "device", "remove", "echo1")
	for _, a := range []string{"CLAUDE@echo", "c1aude@echo", "cIaude@echo", "ｃlaude@echo", "claud\u0435@echo"} {
		_, errOut := cli(1, "device", "add", "foxtrot", "--label", "echo", "--read", "shared", "--agents", a)
		if want := `looks like "claude@echo", an agent of removed device echo1`; !strings.Contains(errOut, want) || !strings.Contains(errOut, "--take-removed-agents") {
			t.Errorf("add of %+q: want %q and the flag:\n%s", a, want, errOut)
		}
	}
	out, _ := cli(0, "device", "add", "foxtrot", "--label", "echo", "--read", "shared", "--agents", "CLAUDE@echo", "--take-removed-agents")
	if !strings.Contains(out, "took over claude@echo (removed device echo1)") {
		t.Errorf("a take-over of a look-alike does not say what it took:\n%s", out)
	}
}
