package edge

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/ladder"
)

// RFC 001 §7.3.4/§7.3.5: the edge stamps added_by = "<agent>/<label>/<device>"
// on writes bound for the primary, and nothing at all without a device —
// never a hostname, container id or placeholder.
func TestProvenanceRows(t *testing.T) {
	t.Parallel()
	cases := []struct {
		agent, device, label string
		want                 any // nil: no added_by set
	}{
		{"opencode", "7f3a9c2e1b04", "tor-ms22", "opencode/tor-ms22/7f3a9c2e1b04"},
		{"opencode", "7f3a9c2e1b04", "", "opencode/-/7f3a9c2e1b04"},   // label withheld
		{"", "7f3a9c2e1b04", "tor-ms22", "mcp/tor-ms22/7f3a9c2e1b04"}, // no agent known: MemPalace's default
		{"pi", "", "tor-ms22", nil},                                   // a label alone is not an identity
		{"pi", "", "", nil},                                           // solitary-style: nothing
	}
	for _, c := range cases {
		cfg := Config{Agent: c.agent, OriginDevice: c.device, OriginLabel: c.label}
		for _, tool := range []string{"add_drawer", "checkpoint"} {
			args := map[string]any{"wing": "w", "room": "r", "content": "x", "items": []any{map[string]any{"wing": "w", "room": "r", "content": "x"}}}
			out, ok := replicableArgs(cfg, tool, args)
			if !ok {
				t.Fatalf("%s not replicated", tool)
			}
			if got := out["added_by"]; got != c.want {
				t.Errorf("%s agent=%q device=%q label=%q: added_by %v, want %v", tool, c.agent, c.device, c.label, got, c.want)
			}
			if _, stamped := args["added_by"]; stamped {
				t.Errorf("%s: the local call's arguments were stamped", tool)
			}
		}
		// Nothing else carries a device.
		out, _ := replicableArgs(cfg, "diary_write", map[string]any{"agent_name": "pi", "entry": "e"})
		if _, ok := out["added_by"]; ok || out["agent_name"] != "pi" {
			t.Errorf("diary_write stamped: %v", out)
		}
	}
}

// replicableArgs is the payload decide queues for a call, decoded.
func replicableArgs(cfg Config, tool string, args map[string]any) (map[string]any, bool) {
	c := newCall(&mcp.CallToolParams{Name: tool, Arguments: args})
	b, _, ok := decide(&Policy{Version: 1, Wings: map[string]Rule{}}, c.tool, c.argsMap(), c.raw(), "", cfg.Stamp())
	var out map[string]any
	json.Unmarshal(b, &out)
	return out, ok
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(s string) error {
		return writeFile(dir, PolicyFile, s)
	}
	p, err := LoadPolicy(dir)
	if err != nil || !p.Replicated("anything") || !p.KGReplicated() {
		t.Fatalf("no file: %v %v", p, err)
	}
	write(`{"version":1,"wings":{"workspace":{"replicate":"local"},"wing_*":{"replicate":"local"},"wing_pi":{"replicate":"replicated"}},"kg":{"replicate":"local"}}`)
	p, err = LoadPolicy(dir)
	if err != nil {
		t.Fatal(err)
	}
	// a padded name is the wing MemPalace files it in (sanitize_name
	// strips it): " workspace" must stay local as workspace does
	for wing, want := range map[string]bool{"workspace": false, "wing_opencode": false, "wing_pi": true, "notes": true, " workspace": false, "workspace\u00a0": false, "\twing_opencode\n": false, " wing_pi ": true} {
		if p.Replicated(wing) != want {
			t.Errorf("%s: replicated=%v, want %v (longest glob wins)", wing, !want, want)
		}
	}
	if p.KGReplicated() {
		t.Error("kg local ignored")
	}
	for body, field := range map[string]string{
		`{"version":1,"wings":{"x":{"replicate":"sometimes"}}}`: `wings["x"].replicate`,
		`{"version":1,"wings":{"[":{"replicate":"local"}}}`:     `wings["["]: bad glob`,
		`{"version":2}`:            "version",
		`{"version":1,"wingz":{}}`: "wingz",
		`{"version":1,"wings":{"x":{"replicate":"local","target":"https://p"}}}`: `wings["x"].target`,
	} {
		write(body)
		if _, err := LoadPolicy(dir); err == nil || !contains(err.Error(), field) || !contains(err.Error(), PolicyFile) {
			t.Errorf("%s: error %v does not name the file and %s", body, err, field)
		}
	}
}

// RFC 001 §7.3.5 fails closed: an origin device the ladder (and so render)
// rejects is never stamped by the edge, which reads the environment only
// through the ladder.
func TestRejectedOriginDeviceStampsNothing(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"MEMPALACE_REMOTE_URL": "https://palace.example/mcp", "MEMPALACE_EDGE": "1",
		"MEMPALACE_ORIGIN_DEVICE": "my laptop/1", "MEMPALACE_ORIGIN_LABEL": "lab", "MEMPALACE_AGENT_NAME": "opencode",
		"MEMPALACE_PALACE_PATH": t.TempDir(),
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, warns, err := ladder.ResolveEdge(lookup, func(string) (string, error) { return "/bin/true", nil })
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, w := range warns {
		warned = warned || w.Var == ladder.EnvOriginDevice
	}
	if !warned {
		t.Errorf("no warning about %s: %v", ladder.EnvOriginDevice, warns)
	}
	cfg := ConfigFrom(s, ladder.TokenSource(lookup), nil, "test", nil)
	for _, tool := range []string{"add_drawer", "checkpoint"} {
		out, ok := replicableArgs(cfg, tool, map[string]any{"wing": "w", "room": "r", "content": "x", "items": []any{map[string]any{"wing": "w", "room": "r", "content": "x"}}})
		if !ok {
			t.Fatalf("%s not replicated", tool)
		}
		if v, stamped := out["added_by"]; stamped {
			t.Errorf("%s: stamped added_by=%v from an origin device the ladder rejected", tool, v)
		}
	}
	// The same variables with a valid device do stamp (the test can fail).
	env["MEMPALACE_ORIGIN_DEVICE"] = "7f3a9c2e1b04"
	s, _, _ = ladder.ResolveEdge(lookup, func(string) (string, error) { return "/bin/true", nil })
	cfg = ConfigFrom(s, nil, nil, "test", nil)
	if out, _ := replicableArgs(cfg, "add_drawer", map[string]any{"wing": "w", "room": "r", "content": "x"}); out["added_by"] != "opencode/lab/7f3a9c2e1b04" {
		t.Errorf("valid device: added_by %v", out["added_by"])
	}
}
