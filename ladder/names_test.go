package ladder

import (
	"strings"
	"testing"
)

// An environment's names: a misspelled ladder variable is never silently
// ignored, and the names devbox-config, the gateway or MemPalace read are
// never reported.
func TestCheckNames(t *testing.T) {
	for _, c := range []struct {
		name, want string // want: "" for no warning, else the suggestion
	}{
		{"MEMPALACE_REMOTE_ULR", EnvRemoteURL},
		{"MEMPALACE_REMOTE_TOKNE", EnvRemoteToken},
		{"MEMPALACE_EGDE", EnvEdge},
		{"MEMPALCE_REMOTE_URL", EnvRemoteURL}, // the prefix itself misspelled
		{"MEMPALACE_EDGE_TIMOUT", EnvEdgeTimeout},
		{"PI_SETTING_MERGE", EnvPiSettingsMrg},
		{"MEMPALACE_FROBNICATE", "-"}, // unknown, nothing near
		{EnvRemoteURL, ""},
		{EnvUpstreamToken, ""},
		{EnvFromParent, ""},
		{"MEMPALACE_ENV_FROM_PARNT", EnvFromParent},
		{EnvPalacePath, ""},
		{"MEMPALACE_MCP_HTTP_TOKEN", ""},
		{"MEMPALACE_EMBEDDING_MODEL", ""},
		{"MEMPALACE_CONTRACT_CMD", "-"}, // the contract suite's old hook: gone
		{"DEVBOX_MEMPALACE_VENV", ""},
		{"HOME", ""},
		{"PATH", ""},
		{"MEMPAL_PALACE_PATH", ""},
	} {
		w := CheckNames([]string{c.name})
		switch {
		case c.want == "" && len(w) != 0:
			t.Errorf("%s: warned %v, want nothing (it is read)", c.name, w)
		case c.want == "":
		case len(w) != 1 || w[0].Var != c.name || w[0].Fix == "":
			t.Errorf("%s: warnings %+v, want one about it with a fix", c.name, w)
		case c.want == "-" && strings.Contains(w[0].Message, "did you mean"):
			t.Errorf("%s: %s suggests a name, none is near", c.name, w[0].Message)
		case c.want != "-" && (!strings.Contains(w[0].Message, "did you mean "+c.want+"?") || !strings.Contains(w[0].Fix, c.want)):
			t.Errorf("%s: %q / fix %q, want did you mean %s", c.name, w[0].Message, w[0].Fix, c.want)
		}
	}
}

// Every warning names its fix, and a refused URL is told apart from an
// unset one (join --dry-run and edge status said "unset" for both).
func TestWarningsNameTheFix(t *testing.T) {
	for _, c := range []struct {
		env        map[string]string
		fix        string // substring of the URL warning's fix
		urlProblem string // substring of Settings.URLProblem, "" for none
	}{
		{map[string]string{EnvRemoteURL: "palace.example.org/mcp"}, "MEMPALACE_REMOTE_URL=https://palace.example.org/mcp", "no scheme"},
		{map[string]string{EnvRemoteURL: "palace.example.org:8765"}, "MEMPALACE_REMOTE_URL=https://palace.example.org:8765", "no scheme"},
		{map[string]string{EnvRemoteURL: "127.0.0.1:8765/mcp"}, "MEMPALACE_REMOTE_URL=http://127.0.0.1:8765/mcp", "no scheme"},
		{map[string]string{EnvRemoteURL: "https://me:s3cret-value@palace.example.org/mcp"}, EnvRemoteToken, "credentials"},
		{map[string]string{EnvRemoteURL: "https://palace.example.org/mcp?access_token=s3cret-value"}, EnvRemoteToken, "credentials"},
		{map[string]string{EnvRemoteURL: "https://palace.example.org/{env:MEMPALACE_REMOTE_TOKEN}"}, "%7B", "{env:MEMPALACE_REMOTE_TOKEN}"},
		{map[string]string{EnvRemoteURL: "ftp://palace.example.org/mcp"}, "https://", "scheme"},
		{map[string]string{EnvEdge: "yes", EnvRemoteURL: "https://p/mcp", EnvRemoteToken: "t"}, "MEMPALACE_EDGE=1", ""},
		{map[string]string{EnvEdge: "1"}, EnvRemoteURL, ""},
	} {
		s, warns := resolve(c.env, true)
		if len(warns) == 0 {
			t.Errorf("%v: no warning", c.env)
			continue
		}
		fixes := ""
		for _, w := range warns {
			if w.Fix == "" {
				t.Errorf("%v: warning without a fix: %s", c.env, w)
			}
			fixes += w.Fix + "\n"
		}
		if !strings.Contains(fixes, c.fix) {
			t.Errorf("%v: fixes %q lack %q", c.env, fixes, c.fix)
		}
		if (c.urlProblem == "") != (s.URLProblem == "") || !strings.Contains(s.URLProblem, c.urlProblem) {
			t.Errorf("%v: URLProblem %q, want one containing %q", c.env, s.URLProblem, c.urlProblem)
		}
		if strings.Contains(fmtAll(s, warns)+fixes+s.URLProblem, "s3cret-value") {
			t.Errorf("%v: a credential from the URL is repeated: %v", c.env, warns)
		}
	}
	if s, _ := resolve(nil, true); s.URLProblem != "" {
		t.Errorf("unset: URLProblem %q", s.URLProblem)
	}
}

// Misspelt, render's warning at every start (attack73 F7), is CheckNames'
// "did you mean" of a MEMPALACE_* name alone, pointing at doctor: never a
// name devbox-config or MemPalace reads, a MEMPALACE_* name near none, or
// a name outside MEMPALACE_*.
func TestMisspelt(t *testing.T) {
	w := Misspelt([]string{"MEMPALACE_EGDE", "MEMPALACE_FROBNICATE", "MEMPALACE_MCP_HTTP_TOKEN", "MEMPALACE_EMBEDDING_MODEL", EnvEdge, "MEMPALCE_REMOTE_URL", "PI_SETTING_MERGE", "HOME"})
	if len(w) != 1 || w[0].Var != "MEMPALACE_EGDE" || !strings.Contains(w[0].String(), "did you mean MEMPALACE_EDGE?") || !strings.Contains(w[0].Fix, "devbox-config doctor") {
		t.Errorf("got %q, want MEMPALACE_EGDE's did you mean MEMPALACE_EDGE alone, pointing at doctor", w)
	}
	// the case is the name's: lower case is read by nothing (attack114 F6)
	w = Misspelt([]string{"mempalace_remote_url", "Mempalace_Palace", "mempalace_frobnicate"})
	if len(w) != 2 || !strings.Contains(w[0].String(), "Mempalace_Palace: is not a variable devbox-config or MemPalace reads; did you mean MEMPALACE_PALACE?") ||
		!strings.Contains(w[1].String(), "mempalace_remote_url: is not a variable devbox-config or MemPalace reads; did you mean MEMPALACE_REMOTE_URL?") {
		t.Errorf("got %q, want did you mean MEMPALACE_PALACE and MEMPALACE_REMOTE_URL", w)
	}
	if w := Misspelt(nil); w != nil {
		t.Errorf("no names: %q", w)
	}
}
