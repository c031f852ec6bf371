package ladder

import (
	"strings"
	"testing"
)

// A '$' or a backtick in the URL is refused like a brace: Gemini CLI and
// Qwen Code expand $VAR and ${VAR} in every settings string, Crush runs
// $(...), Claude Code expands ${VAR}, so the harness would send a
// variable's value (the token) to the primary in the URL path (attack12:
// gemini POSTed /SECRETTOK/mcp). A URL with whitespace (two .env
// assignments on one line) is refused too, and not repeated.
func TestURLWithShellExpansionStaysSolitary(t *testing.T) {
	for _, c := range []struct{ url, fix string }{
		{"http://127.0.0.1:30511/$MEMPALACE_REMOTE_TOKEN/mcp", "%24"},
		{"https://p.example/${MEMPALACE_REMOTE_TOKEN}/mcp", "%24"},
		{"https://p.example/$(cat /run/secrets/t)/mcp", "%24"},
		{"https://p.example/mcp$HOME", "%24"},
		{"https://p.example/`cat /run/secrets/t`/mcp", "%60"},
		{"https://p.example/mcp{ MEMPALACE_REMOTE_TOKEN=LEAKME", "%7B"},
		{"https://p.example/mcp MEMPALACE_REMOTE_TOKEN=LEAKME", "line of its own"},
		{"https://p.example/mcp\tLEAKME", "line of its own"},
	} {
		s, w := resolve(map[string]string{EnvRemoteURL: c.url, EnvRemoteToken: "SECRETTOK_0123456789"}, true)
		if s.Mode != Solitary || s.URL != "" || s.URLProblem == "" {
			t.Errorf("%q: mode %s URL %q problem %q, want solitary with the problem named", c.url, s.Mode, s.URL, s.URLProblem)
		}
		if len(w) != 1 || w[0].Var != EnvRemoteURL || !strings.Contains(w[0].Message, "staying solitary") || !strings.Contains(w[0].Fix, c.fix) {
			t.Errorf("%q: warnings %+v, want one about %s staying solitary with a fix holding %q", c.url, w, EnvRemoteURL, c.fix)
			continue
		}
		if all := fmtAll(s, w) + w[0].Fix + s.URLProblem; strings.Contains(all, "LEAKME") {
			t.Errorf("%q: the value after the whitespace is repeated: %s", c.url, all)
		}
	}
}

// A bad value is repeated in a warning or an error only when it is short
// and holds no whitespace and no '=': the .env line
// "MEMPALACE_EDGE=1 MEMPALACE_REMOTE_TOKEN=LEAKME" gives MEMPALACE_EDGE the
// value "1 MEMPALACE_REMOTE_TOKEN=LEAKME", and a token pasted into the
// wrong variable is long (attack12: render's warning printed the token).
func TestWarningsDoNotRepeatWhatMayBeASecret(t *testing.T) {
	vars := []string{EnvEdge, EnvAgentName, EnvOriginDevice, EnvOriginLabel, EnvPiSettingsMrg,
		EnvEdgeTimeout, EnvEdgeLease, EnvEdgeLog, EnvEdgeHarness}
	found := func(string) (string, error) { return "/usr/bin/x", nil }
	for _, v := range vars {
		for _, val := range []string{"x/1 MEMPALACE_REMOTE_TOKEN=LEAKME", "x/LEAKME=1", "x/LEAKME_0123456789abcdef"} {
			env := map[string]string{"HOME": t.TempDir(), EnvRemoteURL: "https://p/mcp", EnvRemoteToken: "t", v: val}
			_, warns, err := ResolveEdge(lookupOf(env), found)
			all := ""
			for _, w := range warns {
				all += w.String() + " | " + w.Fix + "\n"
			}
			if err != nil {
				all += err.Error()
			}
			if all == "" {
				t.Errorf("%s=%q: neither a warning nor an error", v, val)
			}
			if strings.Contains(strings.ToLower(all), "leakme") {
				t.Errorf("%s=%q: the value is repeated:\n%s", v, val, all)
			}
		}
	}
	// A short plain value is still shown: it is what the operator typed.
	_, w := resolve(map[string]string{EnvEdge: "maybe"}, true)
	if len(w) != 1 || !strings.Contains(w[0].Message, `"maybe"`) {
		t.Errorf("MEMPALACE_EDGE=maybe: %v, want the value shown", w)
	}
	_, w = resolve(map[string]string{EnvEdge: "yes please"}, true)
	if len(w) != 1 || strings.Contains(w[0].Message, "please") || !strings.Contains(w[0].Message, "not shown") {
		t.Errorf(`MEMPALACE_EDGE="yes please": %v, want the value held back and why`, w)
	}
}

// A label that holds the token, not shown, does not have its invalid
// characters listed either: they were, in order, up to five of the
// token's (attack88 F4).
func TestARefusedLabelNotShownListsNoneOfItsCharacters(t *testing.T) {
	const tok = `a!@#%^&*()+=:;,<>?~x12345678`
	for _, label := range []string{"x" + tok + "y", tok} {
		s, w := resolve(map[string]string{EnvRemoteURL: "http://127.0.0.1:1/mcp", EnvRemoteToken: tok, EnvOriginLabel: label}, true)
		if s.OriginLabel != "" || len(w) != 1 || w[0].Var != EnvOriginLabel || !strings.Contains(w[0].Message, "not shown") {
			t.Fatalf("%q: %+v", label, w)
		}
		for _, c := range "!@#%^&*()+=:;,<>?~" {
			if strings.Contains(w[0].Message, "'"+string(c)+"'") {
				t.Errorf("%q: the warning lists %q: %s", label, c, w[0].Message)
			}
		}
	}
	if _, w := resolve(map[string]string{EnvOriginLabel: "lap!top"}, true); len(w) != 1 || !strings.Contains(w[0].Message, `'!'`) {
		t.Errorf("a label shown still names its character: %+v", w)
	}
}

// A value that is a piece of the token (a truncated paste into the wrong
// variable), short enough to be shown otherwise, is not shown; a short
// value sharing fewer than 8 characters in a row with it still is
// (attack114 F7).
func TestAPieceOfTheTokenIsNotShown(t *testing.T) {
	const tok = "Abcdefgh12345678XYZ"
	for val, hidden := range map[string]bool{"Abcdefgh1234567": true, "x12345678": true, "ABCDEFGH": true, "maybe": false, "Abcdefg": false} {
		_, w := resolve(map[string]string{EnvRemoteURL: "http://127.0.0.1:1/mcp", EnvRemoteToken: tok, EnvEdge: val}, true)
		if len(w) != 1 {
			t.Fatalf("MEMPALACE_EDGE=%q: %+v, want one warning", val, w)
		}
		if got := strings.Contains(w[0].Message, `"`+val+`"`); got == hidden || hidden && !strings.Contains(w[0].Message, "MEMPALACE_REMOTE_TOKEN") {
			t.Errorf("MEMPALACE_EDGE=%q: %s; want it shown: %v, and why not", val, w[0].Message, !hidden)
		}
	}
}
