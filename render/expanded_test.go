package render

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/templates"
)

// expandedCase is a home where render once wrote rec's entry from src in
// mode (into a file holding the user's own "mine" server) and the
// harness then saved the file with each reference replaced by vals'
// value ("" when not in vals), as Gemini CLI's and Qwen Code's `mcp add`
// do (attack101 F2).
func expandedCase(t *testing.T, rec harness.Record, mode ladder.Mode, src string, vals map[string]string) (home, file string) {
	t.Helper()
	home = t.TempDir()
	return home, renderedOnce(t, home, rec, mode, src, func(entry string) string {
		for _, r := range references(rec) {
			entry = strings.ReplaceAll(entry, r.text, vals[r.name])
		}
		return entry
	})
}

// renderedOnce writes, in home, rec's file as render wrote it from src in
// mode beside the user's "mine" server, with its record, the entry as
// saved gives it; it returns the file.
func renderedOnce(t *testing.T, home string, rec harness.Record, mode ladder.Mode, src string, saved func(entry string) string) string {
	t.Helper()
	ref, _ := rec.TokenRef()
	entry, err := templates.Entry(rec.Name, src, ladder.Settings{Mode: mode, URL: "https://p.example.org/mcp"}, ref)
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := fingerprint.Of(entry)
	file := rec.Location.Path(harness.Env{Home: home, HomeFromFlag: true})
	os.MkdirAll(filepath.Dir(file), 0o755)
	body := `{"mcpServers": {"mine": {"command": "mcp-server-memory"}, "mempalace": ` + saved(string(entry)) + `}}` + "\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	state := fingerprint.State{Targets: map[string]fingerprint.Record{rec.Name: {
		File: filepath.Base(file), Pointer: "/mcpServers/mempalace", Fingerprint: fp, Mode: string(mode), Inserted: true}}}
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), fingerprint.StateFile), state.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

var (
	remoteVars = map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "tok-current"}
	edgeVars   = map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "tok-current", "MEMPALACE_EDGE": "1"}
)

// An entry render wrote, saved by its harness with the references
// expanded, is render's: whatever the literal (the current token, a
// rotated one, an embedding key, ""), the next start puts the entry the
// environment says back with no secret in the file, says the harness's
// save did it (not "your edit"), and makes the file owner-only, with no
// backup of the old text, when a secret was in it (when only "" was, the
// mode stays and the backup is kept).
// Before, every start kept the token in a 0644 file as "your edit".
func TestAnEntryTheHarnessSavedExpandedIsRendersAgain(t *testing.T) {
	gemini, _ := harness.ByName(TargetGemini)
	qwen, _ := harness.ByName("qwen")
	for _, c := range []struct {
		name    string
		rec     harness.Record
		mode    ladder.Mode
		src     string
		vals    map[string]string
		env     map[string]string
		secrets string // "" : only "" was in the file
	}{
		{"gemini's old remote entry, the current token", gemini, ladder.Remote, gemini.Was[0].Remote, map[string]string{"MEMPALACE_REMOTE_TOKEN": "tok-current"}, remoteVars, "MEMPALACE_REMOTE_TOKEN"},
		{"gemini's old remote entry, a rotated token", gemini, ladder.Remote, gemini.Was[0].Remote, map[string]string{"MEMPALACE_REMOTE_TOKEN": "tok-rotated-away"}, remoteVars, "MEMPALACE_REMOTE_TOKEN"},
		{"gemini's old edge entry, an embedding key", gemini, ladder.Edge, gemini.Was[0].Edge, map[string]string{"MEMPALACE_EMBEDDING_API_KEY": "sk-attack101-secret"}, edgeVars, "MEMPALACE_EMBEDDING_API_KEY"},
		{"gemini's old edge entry, every value empty", gemini, ladder.Edge, gemini.Was[0].Edge, nil, edgeVars, ""},
		{"qwen's old remote entry", qwen, ladder.Remote, qwen.Was[0].Remote, map[string]string{"MEMPALACE_REMOTE_TOKEN": "tok-current"}, remoteVars, "MEMPALACE_REMOTE_TOKEN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home, file := expandedCase(t, c.rec, c.mode, c.src, c.vals)
			o := opts(home, c.env)
			o.Targets = []string{c.rec.Name}
			res, _, err := Run(o, false)
			if err != nil || len(res) != 1 {
				t.Fatalf("render: %v %+v", err, res)
			}
			got, _ := os.ReadFile(file)
			for _, v := range c.vals {
				if v != "" && strings.Contains(string(got), v) {
					t.Errorf("%s: the literal %q is still in the file:\n%s", res[0].Action, v, got)
				}
			}
			want, _ := templates.Entry(c.rec.Name, c.rec.Entries.For(c.mode), ladder.Settings{Mode: c.mode, URL: "https://p.example.org/mcp"}, mustRef(c.rec))
			if entry, _ := Entry(c.rec, file); !sameJSON(entry, want) || res[0].Kept() {
				t.Errorf("%s: the entry is %s, want the environment's %s", res[0].Action, entry, want)
			}
			warn := strings.Join(res[0].Warnings, "\n")
			if !strings.Contains(warn, c.rec.Title+" saved this file") || !strings.Contains(warn, "not your edit") || !strings.Contains(warn, c.secrets) {
				t.Errorf("the warning does not name %s's save as the cause (and %q): %q", c.rec.Title, c.secrets, warn)
			}
			wantMode := os.FileMode(0o644)
			if c.secrets != "" {
				wantMode = 0o600
			}
			if fi, _ := os.Stat(file); fi.Mode().Perm() != wantMode {
				t.Errorf("the file's mode is %04o, want %04o", fi.Mode().Perm(), wantMode)
			}
			baks, _ := filepath.Glob(file + ".bak.*")
			if len(baks) != map[bool]int{true: 0, false: 1}[c.secrets != ""] {
				t.Errorf("%d backups of the old text (a secret in it: %v)", len(baks), c.secrets != "")
			}
			if again, _, _ := Run(o, false); again[0].Action != "unchanged" || len(again[0].Warnings) != 0 {
				t.Errorf("the next start: %s %q", again[0].Action, again[0].Warnings)
			}
		})
	}
}

// Opting out removes an entry the harness saved expanded, as it removes
// render's own: the token does not stay in the file after the opt-out.
func TestOptOutRemovesAnEntryTheHarnessSavedExpanded(t *testing.T) {
	for _, name := range []string{TargetGemini, "qwen"} {
		rec, _ := harness.ByName(name)
		home, file := expandedCase(t, rec, ladder.Remote, rec.Was[0].Remote, map[string]string{"MEMPALACE_REMOTE_TOKEN": "tok-rotated-away"})
		res, _, err := Run(opts(home, nil), false)
		if err != nil || len(res) == 0 {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(file)
		if strings.Contains(string(got), "tok-rotated-away") || strings.Contains(string(got), harness.Server) || !strings.Contains(string(got), "mine") {
			t.Errorf("%s after the opt-out:\n%s", name, got)
		}
	}
}

// Anything more than references replaced by literals is the user's edit,
// kept as before: a header added beside the expanded token.
func TestAnEditBesideTheExpansionIsStillTheUsers(t *testing.T) {
	rec, _ := harness.ByName(TargetGemini)
	home, file := expandedCase(t, rec, ladder.Remote, rec.Was[0].Remote, map[string]string{"MEMPALACE_REMOTE_TOKEN": "tok-current"})
	b, _ := os.ReadFile(file)
	edited := strings.Replace(string(b), `"headers": {`, `"headers": {"X-Mine": "1", `, 1)
	os.WriteFile(file, []byte(edited), 0o644)
	o := opts(home, remoteVars)
	o.Targets = []string{rec.Name}
	res, _, _ := Run(o, false)
	if res[0].Action != "kept-user-edit" {
		t.Errorf("an edit beside the expansion: %s, want kept-user-edit", res[0].Action)
	}
}

func mustRef(rec harness.Record) string { ref, _ := rec.TokenRef(); return ref }

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// A literal where render wrote a reference, in a harness whose own saves
// never expand references (Claude Code), is the user's edit: a token
// pasted for an app that does not see the variable stays, as before the
// Gemini/Qwen fix, with its "kept your edit" warning, and opting out keeps
// it too (review32 R1: the fix had rewritten it, and the app lost its
// login).
func TestALiteralTokenPastedIntoAnotherHarnessStaysTheUsers(t *testing.T) {
	claude, _ := harness.ByName(TargetClaudeCode)
	home, file := expandedCase(t, claude, ladder.Remote, claude.Entries.Remote, map[string]string{"MEMPALACE_REMOTE_TOKEN": "tok-pasted"})
	for _, env := range []map[string]string{remoteVars, nil} {
		o := opts(home, env)
		o.Targets = []string{claude.Name}
		res, _, err := Run(o, false)
		if err != nil || len(res) != 1 {
			t.Fatalf("render: %v %+v", err, res)
		}
		if got, _ := os.ReadFile(file); !strings.Contains(string(got), "tok-pasted") {
			t.Errorf("%s (env %v): the user's pasted token is gone:\n%s", res[0].Action, env != nil, got)
		}
		if warn := strings.Join(res[0].Warnings, "\n"); strings.Contains(warn, "not your edit") {
			t.Errorf("the warning calls the user's edit the harness's save: %q", warn)
		}
	}
}
