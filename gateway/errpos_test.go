package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A state file that does not parse names its line and column and the fix,
// and is left as it was.
func TestStateErrorNamesLineColumnAndFix(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "gateway.jsonc.state.json")
	body := "{\n  \"first_used\": {\"t1\": \"2026-01-01T00:00:00Z\",}\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadState(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":2:46: ") || !strings.Contains(err.Error(), "(fix: remove the comma") {
		t.Errorf("got %v, want %s:2:46: ... (fix: remove the comma...", err, file)
	}
	if b, _ := os.ReadFile(file); string(b) != body {
		t.Error("the state file changed")
	}
}

// A config value that parses but is refused names its line and column too.
func TestConfigValidationNamesLineColumn(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n    {\"id\": \"d\"},\n    {\"id\": \"e\", \"kg\": \"all\"},\n  ],\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadConfig(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":6:23: devices[1].kg: \"all\" must be none, read or write") {
		t.Errorf("got %v, want %s:6:23: devices[1].kg: ...", err, file)
	}
}

// A wing glob with whitespace MemPalace never leaves in a wing name (at
// its start or end, or a tab or control character anywhere: a hand-edited
// " wing_alice") can never match: the device would silently lose the
// wing. It is refused like the empty glob, at its line and column, with
// the glob to write instead. A space inside a glob stays: wing names may
// hold one.
func TestConfigRefusesWhitespaceInGlobs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range []struct{ glob, want string }{
		{` wing_alice`, `5:36: devices[0].read[1]: device d: " wing_alice" has whitespace at its start or end, which no wing name has, so it can never match a wing; write "wing_alice"`},
		{`wing_alice\t`, `5:36: devices[0].read[1]: device d: "wing_alice\t" has whitespace at its start or end, which no wing name has, so it can never match a wing; write "wing_alice"`},
		{`wing\nalice`, `5:36: devices[0].read[1]: device d: "wing\nalice" holds a control character or whitespace other than a space, which no wing name has, so it can never match a wing`},
		{`wing one`, ``},
	} {
		body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n    {\"id\": \"d\", \"read\": [\"shared\", \"" + c.glob + "\"]},\n  ],\n}\n"
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.glob, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), file+":"+c.want) {
			t.Errorf("%q: got %v, want %s:%s", c.glob, err, file, c.want)
		}
	}
}
