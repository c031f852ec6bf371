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
	file := filepath.Join(t.TempDir(), "g.jsonc")
	body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"devices\": [\n    {\"id\": \"d\"},\n    {\"id\": \"e\", \"kg\": \"all\"},\n  ],\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadConfig(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":6:23: devices[1].kg: \"all\" must be none, read or write") {
		t.Errorf("got %v, want %s:6:23: devices[1].kg: ...", err, file)
	}
}
