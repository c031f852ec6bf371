package gateway

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/testbed"
)

// One device must not pass as another on the coordination log: a
// hand-edited config that gives a second device an agent name another
// device has (exactly, in another case, or with a Cyrillic or Greek
// look-alike letter), the label of another device, or a label or agent
// name holding a control, bidi or zero-width character is refused at its
// line and column, with the fix. Names in other scripts that look like no
// other device's stay legal: MemPalace takes any printable from_agent.
func TestConfigRefusesDevicesPassingAsAnother(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ label, agent, want string }{
		{"carol", `claude@alice`, `6:53: devices[1].agents[0]: "claude@alice" is also an agent of device alice-01 (devices[0])`},
		{"carol", `Claude@Alice`, `6:53: devices[1].agents[0]: "Claude@Alice" looks like "claude@alice", an agent of device alice-01 (devices[0])`},
		{"carol", `claude@аlice`, `6:53: devices[1].agents[0]: "claude@\u0430lice" looks like "claude@alice", an agent of device alice-01 (devices[0])`},
		{"carol", `claude@αlice`, `6:53: devices[1].agents[0]: "claude@\u03b1lice" looks like "claude@alice"`},
		{"carol", `claude@ａlice`, `6:53: devices[1].agents[0]: "claude@\uff41lice" looks like "claude@alice"`},
		{"Alice", `pi@carol`, `6:33: devices[1].label: "Alice" looks like "alice", the label of device alice-01 (devices[0])`},
		{"аlice", `pi@carol`, `6:33: devices[1].label: "\u0430lice" looks like "alice", the label of device alice-01 (devices[0])`},
		{"carol\u202e", `pi@carol`, `6:33: devices[1].label: "carol\u202e" holds a control, bidi or zero-width character (U+202E)`},
		{"carol\x1b[2J", `pi@carol`, `6:33: devices[1].label: "carol\x1b[2J" holds a control, bidi or zero-width character (U+001B)`},
		{"carol", `pi@car\u200bol`, `6:53: devices[1].agents[0]: "pi@car\u200bol" holds a control, bidi or zero-width character (U+200B)`},
		{"carol", "pi@car\u2800ol", `6:53: devices[1].agents[0]: "pi@car\u2800ol" holds a control, bidi or zero-width character (U+2800)`},
		{"carol", "claude@alice.", `6:53: devices[1].agents[0]: "claude@alice." looks like "claude@alice", an agent of device alice-01 (devices[0])`},
		{"carol", "claude@alic\u00e9", `6:53: devices[1].agents[0]: "claude@alic\u00e9" looks like "claude@alice"`},
		{"carol", `pi@alice`, `6:53: devices[1].agents[0]: "pi@alice" names "alice", the label of device alice-01 (devices[0])`},
		{"carol", `pi@a1ice`, `6:53: devices[1].agents[0]: "pi@a1ice" names "alice", the label of device alice-01 (devices[0]), or one that looks like it`},
		{"a1ice", `pi@carol`, `6:33: devices[1].label: "a1ice" looks like "alice", the label of device alice-01 (devices[0])`},
		{"carol", `claude@aIice`, `6:53: devices[1].agents[0]: "claude@aIice" looks like "claude@alice", an agent of device alice-01 (devices[0])`},
		{"aIice", `pi@carol`, `6:33: devices[1].label: "aIice" looks like "alice", the label of device alice-01 (devices[0])`},
		{"alice ", `pi@carol`, `6:33: devices[1].label: "alice " is not a valid label`},
		{"al ice", `pi@carol`, `6:33: devices[1].label: "al ice" looks like "alice", the label of device alice-01 (devices[0])`},
		{"carol", `pi@carol`, ``},
		{"", `pi@carol`, ``}, // loaded, and told: UnreachableAgents
		{"кэрол", `pi@кэрол`, ``},
	} {
		quote := func(s string) string {
			return strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(s, "\x1b", `\u001b`), "\u202e", `\u202e`), "\u200b", `\u200b`)
		}
		body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n" +
			"    {\"id\": \"alice-01\", \"label\": \"alice\", \"agents\": [\"claude@alice\"]},\n" +
			"    {\"id\": \"carol-03\", \"label\": \"" + quote(c.label) + "\", \"agents\": [\"" + quote(c.agent) + "\"]},\n  ],\n}\n"
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q %q: %v", c.label, c.agent, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), file+":"+c.want) || !strings.Contains(err.Error(), "fix") {
			t.Errorf("%q %q:\n got %v\nwant %s:%s... and the fix", c.label, c.agent, err, file, c.want)
		}
	}
}

// Within one config: two device ids that differ only in case, and one
// device listing an agent twice in two cases, are refused too (outside
// tester, attack10 02b): either reads as the other.
func TestConfigRefusesIDsAndAgentsDifferingInCase(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ devices, want string }{
		{`{"id": "bob-02", "label": "bob"}, {"id": "BOB-02", "label": "robert"}`, `devices[1].id: "BOB-02" differs only in case from device bob-02 (devices[0])`},
		{`{"id": "carol-03", "label": "carol", "agents": ["pi@carol", "PI@carol"]}`, `devices[0].agents[1]: "PI@carol" looks like "pi@carol", listed before it`},
	} {
		os.WriteFile(file, []byte("{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": ["+c.devices+"],\n}\n"), 0o600)
		if _, err := LoadConfig(file); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fix") {
			t.Errorf("%s:\n got %v\nwant %s... and the fix", c.devices, err, c.want)
		}
	}
}

// An operator's change that makes a device look like another is refused
// naming the device changed, wherever it stands in the list. Before, the
// device listed later was named, and an operator setting carol's label
// to "a1ice" was told alice's label "alice" looked like it (an outside
// tester, attack11).
func TestAChangeThatLooksLikeAnotherDeviceNamesTheDeviceChanged(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		change func(d *Device)
		want   string
	}{
		{"label", func(d *Device) { d.Label = "a1ice" }, `devices[0].label: "a1ice" looks like "alice", the label of device alice-01 (devices[1])`},
		{"agent", func(d *Device) { d.Agents = []string{"Reviewer@alice"} }, `devices[0].agents[0]: "Reviewer@alice" looks like "reviewer@alice", an agent of device alice-01 (devices[1])`},
		{"id case", nil, `devices[0].id: "ALICE-01" differs only in case from device alice-01 (devices[1])`},
	} {
		file := filepath.Join(t.TempDir(), "g.jsonc")
		os.WriteFile(file, []byte("{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n"+
			"    {\"id\": \"carol-03\", \"label\": \"carol\", \"agents\": [\"pi@carol\"]},\n"+
			"    {\"id\": \"alice-01\", \"label\": \"alice\", \"agents\": [\"reviewer@alice\"]},\n  ],\n}\n"), 0o600)
		_, err := UpdateConfig(file, func(cf *Config) error {
			if c.change == nil {
				cf.Devices[0].ID = "ALICE-01"
				return nil
			}
			c.change(&cf.Devices[0])
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fix") {
			t.Errorf("%s:\n got %v\nwant %s... and the fix", c.name, err, c.want)
		}
	}
}

// What Unicode's confusables data (UTS #39) reads as a Latin letter,
// punctuation or a symbol leading or trailing a name, a second @ and
// separators inside a name no longer let a device pass as another (an
// outside tester, attack45 F1, attack46 N2): beside laptop-1's label
// laptop and agent pi@laptop, these were accepted.
func TestConfigRefusesConfusablesOfAnotherDevicesNames(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ label, agent, want string }{
		{"rogue", "pi@\ua4f2aptop", `devices[5].agents[0]: "pi@\ua4f2aptop" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"rogue", "pi@\u029faptop", `devices[5].agents[0]: "pi@\u029faptop" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"rogue", "pi@|aptop", `devices[5].agents[0]: "pi@|aptop" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"rogue", "pi@laptop\u00b7", `devices[5].agents[0]: "pi@laptop\u00b7" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"\ua4f2aptop", "pi@rogue", `devices[5].label: "\ua4f2aptop" looks like "laptop", the label of device laptop-1 (devices[0])`},
		{"\u029faptop", "pi@rogue", `devices[5].label: "\u029faptop" looks like "laptop", the label of device laptop-1 (devices[0])`},
		{"|aptop", "pi@rogue", `devices[5].label: "|aptop" holds '|', which a label may not hold`},
		{"laptop\u00b7", "pi@rogue", `devices[5].label: "laptop\u00b7" holds '·', which a label may not hold`},
		{"rogue", "codex@\u0432ox", `devices[5].agents[0]: "codex@\u0432ox" looks like "codex@box", an agent of device box-3 (devices[2])`},
		// Cyrillic п reads as n (the generator's supplement; the data maps it to π).
		{"rogue", "pi@\u043ferp", `devices[5].agents[0]: "pi@\u043ferp" looks like "pi@nerp", an agent of device nerp-6 (devices[4])`},
		// A second @, and separators inside a name (attack46 N2).
		{"rogue", "pi@@laptop", `devices[5].agents[0]: "pi@@laptop" has more than one @`},
		{"rogue", "pi@rogue@laptop", `devices[5].agents[0]: "pi@rogue@laptop" has more than one @`},
		// The message words the value given, not a fixed example (attack47 N2).
		{"rogue", "pi@rogue@x", `devices[5].agents[0]: "pi@rogue@x" has more than one @ (or a character that reads as one): an agent name is <harness>@<label>, and in "pi@rogue@x" a reader cannot tell which part is the label`},
		// Math and modifier symbols inside a name, as punctuation (attack47 N2).
		{"rogue", "pi@lap~top", `devices[5].agents[0]: "pi@lap~top" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"rogue", "pi@lap+top", `devices[5].agents[0]: "pi@lap+top" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"rogue", "codex@lap^top", `devices[5].agents[0]: "codex@lap^top" names "laptop", the label of device laptop-1 (devices[0]), or one that looks like it`},
		{"lap=top", "pi@rogue", `devices[5].label: "lap=top" holds '=', which a label may not hold`},
		{"lap~top", "pi@rogue", `devices[5].label: "lap~top" holds '~', which a label may not hold`},
		{"rogue", "pi@\uff20laptop", `devices[5].agents[0]: "pi@\uff20laptop" has more than one @`},
		{"rogue", "pi@lap-top", `devices[5].agents[0]: "pi@lap-top" looks like "pi@laptop", an agent of device laptop-1 (devices[0])`},
		{"rogue", "codex@lap-top", `devices[5].agents[0]: "codex@lap-top" names "laptop", the label of device laptop-1 (devices[0]), or one that looks like it`},
		{"rogue", "codex\uff20lap.top", `devices[5].agents[0]: "codex\uff20lap.top" names "laptop", the label of device laptop-1 (devices[0])`},
		{"lap_top", "pi@rogue", `devices[5].label: "lap_top" looks like "laptop", the label of device laptop-1 (devices[0])`},
		{"lap.top", "pi@rogue", `devices[5].label: "lap.top" looks like "laptop", the label of device laptop-1 (devices[0])`},
		{"lap\u00b7top", "pi@rogue", `devices[5].label: "lap\u00b7top" holds '·', which a label may not hold`},
		{"rogue", "claude-code@rogue", ""},
		// An agent no devbox could be: a part MEMPALACE_AGENT_NAME or
		// MEMPALACE_ORIGIN_LABEL refuses (before, only a token used around
		// the edge could write as it).
		{"rogue", "pi@rogue(home)", `devices[5].agents[0]: "pi@rogue(home)": its label "rogue(home)" holds '(', ')'`},
		{"rogue", "pi!@rogue", `devices[5].agents[0]: "pi!@rogue": its name "pi!" holds '!'`},
		{"rogue", "claude", ""}, {"rogue", "claude.code@rogue", ""}, // a bare agent: loaded, and told (UnreachableAgents)
		{"rogue", "pi@", `devices[5].agents[0]: "pi@": its label "" is not a valid label`},
		// Names in other scripts that look like no other device's stay legal.
		{"桌面", "pi@桌面", ""}, {"δέλτα", "pi@δέλτα", ""}, {"пётр", "pi@пётр", ""},
	} {
		body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n" +
			"    {\"id\": \"laptop-1\", \"label\": \"laptop\", \"agents\": [\"pi@laptop\"]},\n" +
			"    {\"id\": \"desk-2\", \"label\": \"desk\"},\n" +
			"    {\"id\": \"box-3\", \"label\": \"box\", \"agents\": [\"codex@box\"]},\n" +
			"    {\"id\": \"delta-5\", \"label\": \"delta\", \"agents\": [\"pi@delta\"]},\n" +
			"    {\"id\": \"nerp-6\", \"label\": \"nerp\", \"agents\": [\"pi@nerp\"]},\n" +
			"    {\"id\": \"rogue-4\", \"label\": \"" + c.label + "\", \"agents\": [\"" + c.agent + "\"]},\n  ],\n}\n"
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		want := c.want
		if want == "" {
			if err != nil {
				t.Errorf("%q %q: %v", c.label, c.agent, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "fix") {
			t.Errorf("%q %q:\n got %v\nwant %s... and the fix", c.label, c.agent, err, want)
		}
	}
}

// A label the gateway gives a device is one its devbox carries
// (MEMPALACE_ORIGIN_LABEL), and the reverse: one rule (ladder.LabelFault)
// decides both. An outside tester's brief (attack47): `device add --label
// "laptop (home)"` was accepted, and the devbox then refused the label.
func TestGatewayTakesTheLabelsADevboxCarries(t *testing.T) {
	t.Parallel()
	for _, label := range []string{
		"laptop", "laptop home", "lap_top", "o'brien", "dev-1", "桌面", "пётр", strings.Repeat("x", 128),
		"laptop (home)", "laptop/home", "laptop:1", "lap~top", "\U0001F680", "laptop.", "a..b", "-laptop",
		strings.Repeat("x", 129), "laptop\u3164x", "lap\u200btop",
	} {
		env := func(k string) (string, bool) {
			return map[string]string{ladder.EnvOriginLabel: label}[k], k == ladder.EnvOriginLabel
		}
		s, _ := ladder.Resolve(env, func(string) (string, error) { return "", nil })
		devbox := s.OriginLabel == label
		c := Config{SecretFile: "s", AuditLog: "a", Devices: []Device{{ID: "dev-1", Label: label}}}
		err := c.Validate()
		if gateway := err == nil; gateway != devbox {
			t.Errorf("label %+q: the gateway takes it %v (%v), a devbox carries it %v", label, gateway, err, devbox)
		}
		if err != nil && !strings.Contains(err.Error(), "fix") {
			t.Errorf("label %+q: %v, without the fix", label, err)
		}
	}
	err := (&Config{SecretFile: "s", AuditLog: "a", Devices: []Device{{ID: "dev-1", Label: "laptop (home)"}}}).Validate()
	if err == nil || !strings.Contains(err.Error(), `devices[0].label: "laptop (home)" holds '(', ')', which a label may not hold`) {
		t.Errorf("laptop (home): %v", err)
	}
}

// A config whose agent no session of its device could be (a bare
// "opencode", another label's, a device with no label), hand-edited or
// kept from before the rule, still loads: a restart after an upgrade
// must not stop the fleet over an agent that was only ever useless. The
// gateway says which, with the fix, at start and at every reload
// (attack65 F4; `device add` and `device set` refuse them).
func TestAnAgentNoSessionCouldBeIsLoadedAndTold(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "bare-1", Label: "bare", Read: []string{"shared"}, Agents: []string{"opencode", "pi@other", "claude@bare"}},
		{ID: "nolabel-2", Read: []string{"shared"}, Agents: []string{"codex@nolabel"}},
	})
	c, err := LoadConfig(g.cfgFile)
	if err != nil {
		t.Fatalf("the config is refused: %v", err)
	}
	got := strings.Join(c.UnreachableAgents(), "\n")
	for _, want := range []string{
		`devices[0].agents[0]: "opencode" has no @label`, `(fix: --agents opencode@bare)`,
		`devices[0].agents[1]: "pi@other": its label "other" is not the device's label "bare"`,
		`devices[1].agents[0]: "codex@nolabel": the device has no label`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("UnreachableAgents lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "claude@bare") {
		t.Errorf("an agent a session can be is told:\n%s", got)
	}
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	if err := g.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logged.String(), "level=WARN msg=\"an agent no session of its device could be"); n != 3 {
		t.Errorf("the reload warned of %d agents, want 3:\n%s", n, logged.String())
	}
}
