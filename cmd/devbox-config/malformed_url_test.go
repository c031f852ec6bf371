package main

import (
	"strings"
	"testing"
)

// A URL without a scheme is "malformed", with its fix, not "unset" (join
// --dry-run said "MEMPALACE_REMOTE_URL is not set", edge status "not
// configured (MEMPALACE_REMOTE_URL unset)").
func TestMalformedURLIsNotUnset(t *testing.T) {
	clearLadder(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("MEMPALACE_EDGE", "1")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-SECRET-malformed-0123")
	t.Setenv("MEMPALACE_REMOTE_URL", "palace.example.org/mcp")
	says := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "unset") || strings.Contains(out, "not set") || !strings.Contains(out, "malformed") || !strings.Contains(out, "https://palace.example.org/mcp") {
			t.Errorf("%s: want malformed with the fix, not unset:\n%s", what, out)
		}
	}
	code, out, errOut := runCLI("join", "--dry-run")
	if code != 2 {
		t.Errorf("join --dry-run: exit %d, want 2", code)
	}
	says("join --dry-run", out+errOut)
	code, out, _ = runCLI("edge", "status")
	if code != 0 {
		t.Errorf("edge status: exit %d", code)
	}
	_, primary, _ := strings.Cut(out, "primary ")
	says("edge status", primary)

	t.Setenv("MEMPALACE_REMOTE_URL", "")
	if _, out, _ := runCLI("edge", "status"); !strings.Contains(out, "MEMPALACE_REMOTE_URL unset") {
		t.Errorf("edge status with no URL: %s", out)
	}
	if _, out, errOut := runCLI("join", "--dry-run"); !strings.Contains(out+errOut, "MEMPALACE_REMOTE_URL is not set") {
		t.Errorf("join with no URL: %s", out+errOut)
	}
}
