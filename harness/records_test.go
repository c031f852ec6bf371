package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/templates"
)

// Every record is complete and consistent: a unique name, a file to write,
// and for a managed entry a key path and, at every rung, an entry that is a
// JSON object holding no literal token; a remote entry that references the
// token does so in the record's own syntax, and one that cannot runs the
// bridge.
func TestRecordsAreConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range All() {
		if r.Name == "" || seen[r.Name] || r.Title == "" || len(r.Location.Write) == 0 {
			t.Fatalf("record %q: empty or repeated name, no title or no file", r.Name)
		}
		seen[r.Name] = true
		if r.Settings != nil {
			continue
		}
		if len(r.Key) == 0 || r.Format == "" || r.Scope == "" {
			t.Fatalf("%s: no key path, format or scope", r.Name)
		}
		ref, _ := r.TokenRef()
		for _, mode := range []ladder.Mode{ladder.Solitary, ladder.Remote, ladder.Edge} {
			s := ladder.Settings{Mode: mode, URL: "https://p.example.org/mcp", TokenSet: true, LocalServerFound: true}
			b, err := templates.Entry(r.Name, r.Entries.For(mode), s, ref)
			if err != nil {
				t.Fatalf("%s %s: %v", r.Name, mode, err)
			}
			var e map[string]any
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%s %s: not a JSON object: %s", r.Name, mode, b)
			}
			if r.ListKey != "" && e[r.ListKey] != Server {
				t.Errorf("%s %s: a list item must be named %q by %q: %s", r.Name, mode, Server, r.ListKey, b)
			}
			text := string(b)
			switch {
			case mode == ladder.Edge && !strings.Contains(text, `"edge"`):
				t.Errorf("%s: the edge entry does not run devbox-config edge: %s", r.Name, b)
			case mode == ladder.Edge && !strings.HasPrefix(r.Name, edgeHarness(e)):
				t.Errorf("%s: the edge entry does not name its harness (pi-mcp's is pi): %s", r.Name, b)
			case mode == ladder.Remote && ref != "" && !strings.Contains(text, ref) && !strings.Contains(text, `"bridge"`):
				t.Errorf("%s: the remote entry does not use the record's reference %s: %s", r.Name, ref, b)
			case mode == ladder.Remote && ref == "" && !strings.Contains(text, "MEMPALACE_REMOTE_TOKEN") && !strings.Contains(text, `"bridge"`):
				t.Errorf("%s: no way to the token in the remote entry: %s", r.Name, b)
			}
		}
	}
}

func TestLocation(t *testing.T) {
	env := func(m map[string]string, flag bool) Env {
		return Env{Home: "/h", HomeFromFlag: flag, Lookup: func(k string) (string, bool) { v, ok := m[k]; return v, ok }}
	}
	vars := map[string]string{"XDG_CONFIG_HOME": "/x", "CODEX_HOME": "/c", "GEMINI_CLI_HOME": "/g"}
	for _, c := range []struct {
		name      string
		flag      bool
		path, dir string
	}{
		{"codex", false, "/c/config.toml", "/c"},
		{"codex", true, "/h/.codex/config.toml", "/h/.codex"},
		{"gemini", false, "/g/.gemini/settings.json", "/g/.gemini"},
		{"amp", false, "/x/amp/settings.json", "/x/amp"},
		{"amp", true, "/h/.config/amp/settings.json", "/h/.config/amp"},
		{"claude-code", false, "/h/.claude.json", "/h/.claude"},
		{"cline", false, "/h/.cline/data/settings/cline_mcp_settings.json", "/h/.cline"},
	} {
		r, _ := ByName(c.name)
		e := env(vars, c.flag)
		if got := r.Location.Path(e); got != c.path {
			t.Errorf("%s (--home %v): file %s, want %s", c.name, c.flag, got, c.path)
		}
		if got := r.Location.MarkerPath(e); got != c.dir {
			t.Errorf("%s (--home %v): set up when %s exists, want %s", c.name, c.flag, got, c.dir)
		}
	}
}

// edgeHarness is MEMPALACE_EDGE_HARNESS in an entry's env map, whatever
// the harness calls that map ("-" when there is none).
func edgeHarness(e map[string]any) string {
	for _, k := range []string{"env", "environment", "envs"} {
		if m, ok := e[k].(map[string]any); ok {
			if h, ok := m["MEMPALACE_EDGE_HARNESS"].(string); ok && h != "" {
				return h
			}
		}
	}
	return "-"
}

// Command reads every record's stdio entries (doctor's entry-command
// checks what they start): the solitary one starts mempalace-mcp, the
// edge one `devbox-config edge`.
func TestCommandReadsEveryRecord(t *testing.T) {
	for _, r := range All() {
		if r.Settings != nil {
			continue
		}
		if cmd, args := Command([]byte(r.Entries.Solitary)); cmd != ladder.LocalServer || len(args) != 0 {
			t.Errorf("%s: solitary entry starts %q %q", r.Name, cmd, args)
		}
		if cmd, args := Command([]byte(r.Entries.Edge)); cmd != "devbox-config" || len(args) != 1 || args[0] != "edge" {
			t.Errorf("%s: edge entry starts %q %q", r.Name, cmd, args)
		}
	}
	if cmd, _ := Command([]byte(`{"url": "https://palace.example.org/mcp"}`)); cmd != "" {
		t.Errorf("a remote entry starts %q", cmd)
	}
	// keys as the harness reads them: a "Command" is none of its keys
	if cmd, args := Command([]byte(`{"Command": "mempalace-mcp", "ARGS": ["x"], "url": "https://palace.example.org/mcp"}`)); cmd != "" || len(args) != 0 {
		t.Errorf("an entry whose keys differ in case starts %q %q", cmd, args)
	}
}

// A relative XDG_CONFIG_HOME is ignored, as the XDG base directory spec
// says ("all paths set in these environment variables must be absolute;
// if an implementation encounters a relative path it should consider the
// path invalid and ignore it"): render wrote rel/opencode/ under whatever
// directory the container start ran in (an outside tester, attack12).
func TestARelativeXDGConfigHomeIsIgnored(t *testing.T) {
	e := Env{Home: "/h", Lookup: func(k string) (string, bool) {
		if k == "XDG_CONFIG_HOME" {
			return "rel", true
		}
		return "", false
	}}
	r, _ := ByName("opencode")
	if got := r.Location.DirPath(e); got != "/h/.config/opencode" {
		t.Errorf("XDG_CONFIG_HOME=rel: opencode's directory is %s, want /h/.config/opencode", got)
	}
}

// A harness that starts an MCP server with a fixed set of variables
// (FixedEnv) must hand every stdio server it starts each variable a
// server reads (ladder.ServerVars: the edge's, bridge's and MemPalace's),
// by name (Codex's env_vars) or through MEMPALACE_ENV_FROM_PARENT (whose
// passing ladder's TestParentEnvironPassesEveryServerVar checks). Codex
// passed a fixed eleven: MEMPALACE_EMBEDDING_MODEL never reached its
// mempalace-mcp, which then refused every write on a palace filled with
// the fleet's embedder (attack20 f01). A variable added to the list
// reaches every such harness, or this fails.
func TestFixedEnvHarnessesPassEveryServerVar(t *testing.T) {
	fixed := 0
	for _, r := range All() {
		if !r.FixedEnv {
			continue
		}
		fixed++
		for _, mode := range []ladder.Mode{ladder.Solitary, ladder.Remote, ladder.Edge} {
			s := ladder.Settings{Mode: mode, URL: "https://p.example.org/mcp", TokenSet: true, LocalServerFound: true}
			b, err := templates.Entry(r.Name, r.Entries.For(mode), s, "")
			if err != nil {
				t.Fatal(err)
			}
			cmd, _ := Command(b)
			if cmd == "" {
				continue // a remote entry starts nothing
			}
			var e struct {
				Env     map[string]string `json:"env"`
				EnvVars []string          `json:"env_vars"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			if cmd == ladder.EdgeCommand && e.Env[ladder.EnvFromParent] == "1" {
				continue
			}
			if r.Name == "auggie" && mode == ladder.Solitary {
				continue // known gap: Auggie's plain mempalace-mcp gets no MEMPALACE_* (docs/harnesses.md)
			}
			for _, n := range ladder.ServerVars() {
				if n == ladder.EnvRemoteToken && mode == ladder.Solitary {
					if slices.Contains(e.EnvVars, n) {
						t.Errorf("%s solitary: the primary's token reaches a plain %s, which never talks to the primary (the edge keeps it from its own child): %s", r.Name, cmd, b)
					}
					continue
				}
				if !slices.Contains(e.EnvVars, n) {
					t.Errorf("%s %s: %s does not reach %s: %s", r.Name, mode, n, cmd, b)
				}
			}
		}
	}
	if fixed < 2 {
		t.Errorf("%d records say they start servers with a fixed environment; Codex and Auggie do", fixed)
	}
}

// A harness that removes variables by name from a stdio server's
// environment unless the entry's env names them (Redacts; Gemini CLI
// removes every name matching /TOKEN|SECRET|KEY|AUTH|CERT|.../i) must still
// get each ladder.ServerVars name that matches to bridge and edge: its
// entries that start them set MEMPALACE_ENV_FROM_PARENT=1, so they read
// the harness's own environment. Handing a name back as a reference
// instead (${NAME:-}) put its value in the file at the harness's next
// settings save (attack101 F2); no entry of such a harness may reference
// any variable.
func TestRedactingHarnessesReadTheirOwnEnvironmentAndReferenceNone(t *testing.T) {
	redacting := 0
	for _, r := range All() {
		if r.Redacts == nil {
			continue
		}
		redacting++
		for _, m := range []ladder.Mode{ladder.Remote, ladder.Edge} {
			s := ladder.Settings{Mode: m, URL: "https://p.example.org/mcp", TokenSet: true, LocalServerFound: true}
			ref, _ := r.TokenRef()
			b, err := templates.Entry(r.Name, r.Entries.For(m), s, ref)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Env map[string]string `json:"env"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			if e.Env[ladder.EnvFromParent] != "1" {
				t.Errorf("%s removes variables from a stdio server's environment and its %s entry does not set %s=1: %s", r.Name, m, ladder.EnvFromParent, b)
			}
			if strings.Contains(string(b), "$") {
				t.Errorf("%s's %s entry references a variable, which the harness's next settings save writes out expanded: %s", r.Name, m, b)
			}
		}
	}
	if redacting < 1 {
		t.Errorf("%d records say they remove variables by name from a stdio server's environment; Gemini CLI does", redacting)
	}
}

// Every harness directory variable is treated as XDG_CONFIG_HOME is: a
// relative value is ignored (the harness's default directory stands) with
// one warning naming the variable and the fix, however many harnesses read
// it (attack27 f_home_envdirs: a relative CLAUDE_CONFIG_DIR put
// .claude.json and a record below render's working directory, silently).
func TestARelativeDirVariableIsIgnoredWithOneWarning(t *testing.T) {
	vars := map[string]string{"XDG_CONFIG_HOME": "x", "CLAUDE_CONFIG_DIR": "claudecfg", "CODEX_HOME": "./c",
		"GEMINI_CLI_HOME": "g", "COPILOT_HOME": "~/cp", "PI_CODING_AGENT_DIR": "pi"}
	rel := Env{Home: "/h", Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	unset := Env{Home: "/h", Lookup: func(string) (string, bool) { return "", false }}
	for _, r := range All() {
		if got, want := r.Location.DirPath(rel), r.Location.DirPath(unset); got != want {
			t.Errorf("%s: directory %s, want the default %s", r.Name, got, want)
		}
		if got, want := r.Location.MarkerPath(rel), r.Location.MarkerPath(unset); got != want {
			t.Errorf("%s: set up when %s exists, want the default %s", r.Name, got, want)
		}
	}
	ws := rel.Warnings()
	if len(ws) != len(vars) {
		t.Errorf("%d warnings, want one per variable (%d): %q", len(ws), len(vars), ws)
	}
	for _, w := range ws {
		if _, ok := vars[w.Var]; !ok || !strings.HasPrefix(w.String(), w.Var+": ") || !strings.Contains(w.Message, fmt.Sprintf("%q", vars[w.Var])) ||
			!strings.Contains(w.Message, "ignored") || !strings.Contains(w.Fix, "absolute path") {
			t.Errorf("warning %q: want the variable, its value, that it is ignored, and the fix", w)
		}
	}
	abs := Env{Home: "/h", Lookup: func(k string) (string, bool) { return "/abs", k == "CLAUDE_CONFIG_DIR" }}
	if ws := abs.Warnings(); len(ws) != 0 {
		t.Errorf("an absolute value: %q", ws)
	}
	rel.HomeFromFlag = true // --home ignores the variables altogether
	if ws := rel.Warnings(); len(ws) != 0 {
		t.Errorf("--home: %q", ws)
	}
}

// A directory variable with whitespace around an absolute path is used
// as set by the harness (Claude Code took " /abs" for a relative path and
// saw no server), so render ignores it as a relative one, not trimmed into
// a directory the harness never reads, with one warning each and the path
// alone as the fix; a blank one is unset, silently (R1). attack114 F2.
func TestAPaddedDirVariableIsIgnoredWithOneWarning(t *testing.T) {
	vars := map[string]string{"XDG_CONFIG_HOME": "/x ", "CLAUDE_CONFIG_DIR": " /cc", "CODEX_HOME": "/c/ ",
		"GEMINI_CLI_HOME": "\t/g", "COPILOT_HOME": " /cp", "PI_CODING_AGENT_DIR": "/pi\n"}
	padded := Env{Home: "/h", Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	unset := Env{Home: "/h", Lookup: func(string) (string, bool) { return "", false }}
	for _, r := range All() {
		if got, want := r.Location.DirPath(padded), r.Location.DirPath(unset); got != want {
			t.Errorf("%s: directory %q, want the default %s", r.Name, got, want)
		}
	}
	ws := padded.Warnings()
	if len(ws) != len(vars) {
		t.Errorf("%d warnings, want one per variable (%d): %q", len(ws), len(vars), ws)
	}
	for _, w := range ws {
		path := strings.TrimSpace(vars[w.Var])
		if !strings.Contains(w.Message, "whitespace before or after its path") || !strings.Contains(w.Message, "ignored") ||
			w.Fix != fmt.Sprintf("set it to the path alone (%s=%s), or unset it", w.Var, path) {
			t.Errorf("warning %q: want that it is padded, ignored, and the path alone as the fix", w)
		}
	}
	blank := Env{Home: "/h", Lookup: func(k string) (string, bool) { return " \t", true }}
	if ws := blank.Warnings(); len(ws) != 0 {
		t.Errorf("blank values: %q, want none (unset)", ws)
	}
}
