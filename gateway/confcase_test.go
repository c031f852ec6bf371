package gateway

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A key that differs from the config's only in case is refused, at every
// load and at a live reload, which keeps the previous config in force
// (attack73 F1: encoding/json ignores case, so "Admin": true made the
// laptop an admin, a "READ": ["*"] after its "read" list won over it, and
// a trailing "Devices" replaced the device list, each reloaded silently).
// So is a key or a grant with an escaped plain character (attack75 F1:
// "\u0061dmin": true made an admin, "\u002a" read every wing, unseen by a
// reader grepping for "admin": true or "*").
func TestAKeyInAnotherCaseIsRefusedAndTheOldConfigStays(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := g.tokens["laptop-7f3a"]
	good, err := os.ReadFile(g.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"Admin", `"label": "laptop",`, `"label": "laptop", "Admin": true,`, `unknown key "Admin" in devices[0] (fix: did you mean "admin"?`},
		{"READ and Write", `"kg": "read",`, `"kg": "read", "READ": ["*"], "Write": ["*"],`, `unknown key "READ" in devices[0] (fix: did you mean "read"?`},
		{"Devices", `"devices": [`, `"Devices": [{"id": "laptop-7f3a", "read": ["*"], "write": ["*"], "admin": true}], "devices": [`, `unknown key "Devices" at the top level (fix: did you mean "devices"?`},
		{"escaped admin", `"label": "laptop",`, `"label": "laptop", "\u0061dmin": true,`, `"admin" is written with \u0061 for "a" (fix: write the character itself, "admin"`}, // attack75 F1
		{"escaped star", `"shared"`, `"\u002a"`, `"*" is written with \u002a for "*" (fix: write the character itself, "*"`},                                                  // the laptop's read[0]
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("%s: %q not in the config:\n%s", c.name, c.from, good)
		}
		if err := os.WriteFile(g.cfgFile, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadConfig(g.cfgFile); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: LoadConfig: %v\nwant %s", c.name, err, c.want)
		}
		if err := g.srv.Reload(); err == nil || !strings.HasPrefix(err.Error(), g.cfgFile+":") {
			t.Errorf("%s: reloaded: %v", c.name, err)
		}
		if _, rpc, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "secret", "room": "r", "content": "x"}); rpc == nil {
			t.Errorf("%s: the laptop wrote outside its write list after the reload", c.name)
		}
		if d := g.srv.cfg.Load().Devices; len(d) != len(devices) || d[0].Admin || !slices.Equal(d[0].Read, devices[0].Read) {
			t.Errorf("%s: the config in force changed: %+v", c.name, d)
		}
	}
}

// The state file's keys are read only as written: a "First_Used" after
// "first_used" does not replace its first uses (which would end a rotated
// token's grace at another time).
func TestStateKeyInAnotherCaseIsIgnored(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	os.WriteFile(file, []byte(`{"first_used": {"a": "2026-11-30T12:00:00Z"}, "First_Used": {"b": "2026-12-01T12:00:00Z"}}`), 0o600)
	st, err := LoadState(file)
	if err != nil || len(st.FirstUsed) != 1 || st.FirstUsed["a"].IsZero() {
		t.Errorf("got %v %v, want token a's first use alone", st, err)
	}
}
