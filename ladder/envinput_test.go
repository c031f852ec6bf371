package ladder

import (
	"github.com/joakimp/devbox-config/redact"
	"strings"
	"testing"
	"time"
)

// The token percent-encoded in the URL's path (as a URL copied from a
// ?token= link carries it) is the token in the URL all the same: render
// would write it into every harness config. Found by an outside tester.
func TestURLCarryingTheTokenPercentEncodedStaysSolitary(t *testing.T) {
	const tok = "Ab+cd/ef=gh_0123456789xyzXYZ"
	for _, u := range []string{
		"http://127.0.0.1:19031/Ab+cd%2Fef=gh_0123456789xyzXYZ/mcp",
		"http://127.0.0.1:19031/Ab%2Bcd%2Fef%3Dgh_0123456789xyzXYZ/mcp",
		"http://127.0.0.1:19031/Ab%2bcd%2fef%3dgh_0123456789xyzXYZ/mcp",
		"http://127.0.0.1:19031/mcp;Ab+cd%2Fef=gh_0123456789xyzXYZ",
	} {
		s, w := resolve(map[string]string{EnvRemoteURL: u, EnvRemoteToken: tok}, true)
		if s.Mode != Solitary || s.URL != "" || len(w) != 1 || !strings.Contains(w[0].Message, "carries the token itself") {
			t.Errorf("%s: mode %s, URL %q, warnings %v; want solitary, the token named", u, s.Mode, s.URL, w)
		}
	}
}

// A timeout or lease without its unit (10) or not positive is the default,
// with a warning render gives when it writes the edge entry, saying the
// fix; the edge starts with the default instead of refusing to start and
// leaving the harness without MemPalace's tools. Found by an outside
// tester.
func TestEdgeDurationWithoutUnitIsTheDefaultWithAWarning(t *testing.T) {
	for _, c := range []struct{ name, val, fix string }{
		{EnvEdgeTimeout, "10", EnvEdgeTimeout + "=10s"},
		{EnvEdgeTimeout, "-5s", EnvEdgeTimeout + "=10s"},
		{EnvEdgeLease, "500", EnvEdgeLease + "=500s"},
		{EnvEdgeLease, "1ms", EnvEdgeLease + "=10s"},
		// a bare 0 is no duration with "s" added either (attack93 F6: the
		// fix proposed 0s, which the next run refused too)
		{EnvEdgeTimeout, "0", EnvEdgeTimeout + "=10s"},
		{EnvEdgeLease, "0", EnvEdgeLease + "=10s"},
		{EnvEdgeLease, "50", EnvEdgeLease + "=50s"},
	} {
		env := map[string]string{"HOME": t.TempDir(), EnvRemoteURL: "https://p/mcp", EnvRemoteToken: "t", EnvEdge: "1", c.name: c.val}
		s, w := resolve(env, true)
		if s.Mode != Edge || len(w) != 1 || w[0].Var != c.name || !strings.Contains(w[0].Message, "default") || !strings.Contains(w[0].Fix, c.fix) {
			t.Errorf("render, %s=%s: mode %s, warnings %+v; want edge, one warning naming the default, fix %q", c.name, c.val, s.Mode, w, c.fix)
		}
		es, ew, err := ResolveEdge(lookupOf(env), func(string) (string, error) { return "/usr/bin/x", nil })
		if err != nil || es.Timeout != DefaultEdgeTimeout || es.Lease != 0 || len(ew) != 1 || ew[0].Fix != w[0].Fix {
			t.Errorf("edge, %s=%s: %v, timeout %s, lease %s, warnings %+v; want the defaults and render's warning", c.name, c.val, err, es.Timeout, es.Lease, ew)
		}
		// the fix, applied, is accepted
		fix := w[0].Fix
		name, val, _ := strings.Cut(strings.Fields(fix)[0], "=")
		env[name] = val
		if _, again := resolve(env, true); len(again) != 0 {
			t.Errorf("%s=%s, the fix %q applied: warnings %+v", c.name, c.val, fix, again)
		}
	}
	s, _, _ := ResolveEdge(lookupOf(map[string]string{"HOME": t.TempDir(), EnvEdgeTimeout: "3s", EnvEdgeLease: "500ms"}), func(string) (string, error) { return "/usr/bin/x", nil })
	if s.Timeout != 3*time.Second || s.Lease != 500*time.Millisecond {
		t.Errorf("3s and 500ms: got %s and %s", s.Timeout, s.Lease)
	}
}

// A short token (a loopback primary's) pasted into the wrong variable is
// not repeated either: it is MEMPALACE_REMOTE_TOKEN's value. Found by an
// outside tester.
func TestWarningsDoNotRepeatTheToken(t *testing.T) {
	const tok = "pw7Qx9Zk2"
	for _, v := range []string{EnvEdge, EnvEdgeTimeout, EnvEdgeLease, EnvAgentName, EnvPiSettingsMrg, EnvEdgeLog, EnvEdgeHarness} {
		env := map[string]string{"HOME": t.TempDir(), EnvRemoteURL: "https://p/mcp", EnvRemoteToken: tok, EnvEdge: "1", v: tok + "/"}
		if v == EnvEdge {
			env[v] = tok
		}
		_, warns, err := ResolveEdge(lookupOf(env), func(string) (string, error) { return "/usr/bin/x", nil })
		all := ""
		for _, w := range warns {
			all += w.String() + " | " + w.Fix + "\n"
		}
		if err != nil {
			all += err.Error()
		}
		if !strings.Contains(all, v) || strings.Contains(strings.ToLower(all), strings.ToLower(tok)) {
			t.Errorf("%s holding the token: want a warning that does not repeat it:\n%s", v, all)
		}
	}
}

// A token with a line break or another control character cannot go in an
// Authorization header: every call to the primary would fail. Render says
// so, naming the variable, without the value. Found by an outside tester.
func TestTokenWithAControlCharacterIsWarnedOf(t *testing.T) {
	for _, tok := range []string{"sEcReTtOkEn-0123\nX-Evil: 1", "ab\r\x01sEcReTtOkEn-0123"} {
		s, w := resolve(map[string]string{EnvRemoteURL: "https://p/mcp", EnvRemoteToken: tok}, true)
		if s.Mode != Remote || len(w) != 1 || w[0].Var != EnvRemoteToken || !strings.Contains(w[0].Message, "header") || w[0].Fix == "" {
			t.Errorf("%q: mode %s, warnings %+v; want remote and one warning on %s", tok, s.Mode, w, EnvRemoteToken)
			continue
		}
		if all := fmtAll(s, w) + w[0].Fix; strings.Contains(all, "sEcReT") {
			t.Errorf("the token is repeated: %s", all)
		}
	}
}

// A token pasted into MEMPALACE_REMOTE_URL has no scheme; the fix (which
// render prints now) does not repeat it as https://TOKEN.
func TestTokenAsURLIsNotRepeatedInTheFix(t *testing.T) {
	const tok = "sEcReTtOkEn-0123456789abcdefXYZ"
	_, w := resolve(map[string]string{EnvRemoteURL: tok, EnvRemoteToken: "x"}, true)
	if len(w) != 1 || !strings.Contains(w[0].Message, "no scheme") || strings.Contains(w[0].String(), tok) {
		t.Errorf("warnings %+v; want one, no scheme, the value not repeated", w)
	}
}

// A token as short as redact.MinTokenInText, the bound render's diff uses
// too, is looked for in the URL; a shorter one is not, since ordinary URLs
// hold it by chance.
func TestURLCheckLooksForTokensFromTheSharedBound(t *testing.T) {
	long := strings.Repeat("k", redact.MinTokenInText)
	short := long[1:]
	for tok, want := range map[string]bool{long: true, short: false} {
		s, _ := resolve(map[string]string{EnvRemoteURL: "http://127.0.0.1:19031/" + tok + "/mcp", EnvRemoteToken: tok}, true)
		if got := s.URL == ""; got != want {
			t.Errorf("token of %d characters in the URL: refused %v, want %v", len(tok), got, want)
		}
	}
}

// A device token's secret segment (dbx_<id>_<secret>_<check>) is what
// lets a call through: in the URL without the rest of the token, the
// token without dbx_, or upper-cased, render would write it into every
// harness config all the same. A URL sharing only the token's constant
// prefix, its id or the device's id with it is used. Found by an outside
// tester.
func TestURLCarryingADeviceTokensSecretStaysSolitary(t *testing.T) {
	const id, secret = "a1b2c3d4e5f6", "0123456789abcdef0123456789abcdef0123456789abcdef"
	const tok = "dbx_" + id + "_" + secret + "_9f8e7d"
	const base = "http://127.0.0.1:19820"
	for _, u := range []string{
		base + "/" + secret + "/mcp",
		base + "/mcp/" + secret,
		base + "/" + strings.TrimPrefix(tok, "dbx_") + "/mcp",
		base + "/mcp/" + strings.ToUpper(tok),
		base + "/mcp/" + strings.ToUpper(secret),
		base + "/mcp#" + secret,
		base + "/mcp?k=" + secret,
		"http://u:" + secret + "@127.0.0.1:19820/mcp",
		base + "/mcp/%" + "30" + secret[1:],
		base + "/mcp/%25" + "30" + secret[1:],
	} {
		s, w := resolve(map[string]string{EnvRemoteURL: u, EnvRemoteToken: tok}, true)
		if s.Mode != Solitary || s.URL != "" || len(w) != 1 || !strings.Contains(w[0].Message, "carries the token itself") {
			t.Errorf("%s: mode %s, URL %q, warnings %v; want solitary, the token named", u, s.Mode, s.URL, w)
		}
	}
	for _, u := range []string{
		"http://dbx.localhost:19820/dbx/mcp",
		base + "/" + id + "/laptop-1/mcp",
		base + "/mcp/9f8e7d",
	} {
		if s, w := resolve(map[string]string{EnvRemoteURL: u, EnvRemoteToken: tok}, true); s.URL != u {
			t.Errorf("%s: mode %s, warnings %v; want it used", u, s.Mode, w)
		}
	}
}
