package main

import (
	"strings"
	"testing"
	"time"
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

// bridge reads MEMPALACE_REMOTE_URL itself: it refuses what render refuses,
// with the same words (ladder's check), rather than forwarding to a URL
// render would not have written (whitespace: a second .env assignment,
// the token, in the path the primary logs).
func TestBridgeRefusesTheURLRenderRefuses(t *testing.T) {
	clearLadder(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-SECRET-bridge-0123")
	for url, want := range map[string]string{
		"https://p.example/mcp MEMPALACE_REMOTE_TOKEN=LEAKME": "line of its own",
		"https://p.example/$MEMPALACE_REMOTE_TOKEN/mcp":       "%24",
	} {
		t.Setenv("MEMPALACE_REMOTE_URL", url)
		done := make(chan struct{})
		var code int
		var out, errOut string
		go func() { defer close(done); code, out, errOut = runCLI("bridge") }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: bridge started serving a URL render refuses", url)
		}
		if code != 2 || !strings.Contains(errOut, "malformed") || !strings.Contains(errOut, want) || strings.Contains(out+errOut, "LEAKME") {
			t.Errorf("%q: exit %d, stderr %q: want 2, malformed with the fix %q, nothing after the space", url, code, errOut, want)
		}
	}
}
