package ladder

import (
	"log/slog"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func lookupOf(env map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestResolveEdge(t *testing.T) {
	home := t.TempDir()
	found := func(string) (string, error) { return "/usr/bin/x", nil }
	s, warns, err := ResolveEdge(lookupOf(map[string]string{"HOME": home, EnvRemoteURL: "https://p/mcp", EnvRemoteToken: "t", EnvEdge: "1"}), found)
	if err != nil || len(warns) != 0 {
		t.Fatalf("defaults: %v %v", err, warns)
	}
	if !reflect.DeepEqual(s.Child, []string{"mempalace-mcp"}) || s.Timeout != 10*time.Second || s.LogLevel != slog.LevelInfo || s.Palace != filepath.Join(home, ".config", "mempalace", "palace") {
		t.Errorf("defaults: %+v", s)
	}

	env := map[string]string{"HOME": home, EnvRemoteURL: "https://p/mcp", EnvRemoteToken: "t", EnvEdge: "1",
		EnvEdgeChild: "fake-palace --quiet", EnvEdgeTimeout: "3s", EnvEdgeLease: "500ms", EnvEdgeLog: "debug", EnvEdgeHarness: "opencode", EnvPalacePath: "/p"}
	var looked []string
	s, _, err = ResolveEdge(lookupOf(env), func(f string) (string, error) { looked = append(looked, f); return f, nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Child, []string{"fake-palace", "--quiet"}) || s.Timeout != 3*time.Second || s.Lease != 500*time.Millisecond || s.LogLevel != slog.LevelDebug || s.Palace != "/p" || s.Agent() != "opencode" {
		t.Errorf("overrides: %+v", s)
	}
	if !slices.Contains(looked, "fake-palace") || slices.Contains(looked, LocalServer) {
		t.Errorf("looked for %q on PATH, want the child the edge will start", looked)
	}
	env[EnvAgentName] = "claude"
	if s, _, _ = ResolveEdge(lookupOf(env), found); s.Agent() != "claude" {
		t.Errorf("agent name wins over the harness: %q", s.Agent())
	}

	_, warns, _ = ResolveEdge(lookupOf(map[string]string{"HOME": home, EnvEdgeLog: "loud", EnvEdgeHarness: "../x"}), found)
	if len(warns) != 2 {
		t.Errorf("want a warning each for MEMPALACE_EDGE_LOG and MEMPALACE_EDGE_HARNESS: %v", warns)
	}
}

func TestTokenIsReadAfreshAndKeptFromTheChild(t *testing.T) {
	env := map[string]string{EnvRemoteToken: " one "}
	tok := TokenSource(lookupOf(env))
	if tok() != "one" {
		t.Fatal(tok())
	}
	env[EnvRemoteToken] = "two"
	if tok() != "two" {
		t.Error("a rotated token is not picked up")
	}
	got := ChildEnviron([]string{"A=1", EnvRemoteToken + "=secret", "MEMPALACE_REMOTE_TOKENX=2"}, "/p")
	if !reflect.DeepEqual(got, []string{"A=1", "MEMPALACE_REMOTE_TOKENX=2", EnvPalacePath + "=/p"}) {
		t.Errorf("child env: %v", got)
	}
	// The palace the edge resolved is the child's, whatever the edge's
	// environment says (one MEMPALACE_PALACE_PATH, so no getenv can pick another).
	got = ChildEnviron([]string{EnvPalacePath + "=~/p", "MEMPALACE_PALACE=/q", "B=2"}, "/home/u/p")
	if !reflect.DeepEqual(got, []string{"MEMPALACE_PALACE=/q", "B=2", EnvPalacePath + "=/home/u/p"}) {
		t.Errorf("child env with a palace set: %v", got)
	}
}

// The coordination identity is <agent>@<label> (RFC 003 §3.2), the agent
// being Agent() (MEMPALACE_AGENT_NAME, else MEMPALACE_EDGE_HARNESS); no
// label leaves it bare.
func TestEdgeIdentity(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvEdgeHarness: "opencode", EnvOriginLabel: "build-box"}, "opencode@build-box"},
		{map[string]string{EnvEdgeHarness: "pi", EnvAgentName: "claude", EnvOriginLabel: "laptop"}, "claude@laptop"},
		{map[string]string{EnvEdgeHarness: "pi"}, "pi"},
		{map[string]string{EnvOriginLabel: "laptop"}, ""},
		{map[string]string{EnvEdgeHarness: "pi@desk", EnvOriginLabel: "laptop"}, ""},
	}
	for _, c := range cases {
		c.env["HOME"] = home
		s, _, err := ResolveEdge(lookupOf(c.env), func(f string) (string, error) { return f, nil })
		if err != nil || s.Identity() != c.want {
			t.Errorf("%v: identity %q (%v), want %q", c.env, s.Identity(), err, c.want)
		}
	}
}

// A missing local server is one warning, about it: the edge does not also
// say devbox-config is not on PATH when it is (it did: the look-up for
// devbox-config asked for the child instead; attack13 07).
func TestResolveEdgeMissingChildBlamesOnlyTheChild(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir(), EnvRemoteURL: "https://p/mcp", EnvRemoteToken: "t", EnvEdge: "1"}
	onPath := func(f string) (string, error) {
		if f == EdgeCommand {
			return "/usr/local/bin/" + f, nil
		}
		return "", exec.ErrNotFound
	}
	_, warns, err := ResolveEdge(lookupOf(env), onPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, LocalServer) || strings.Contains(warns[0].Message, EdgeCommand+" is not on PATH") {
		t.Fatalf("want only the %s warning: %+v", LocalServer, warns)
	}
}
