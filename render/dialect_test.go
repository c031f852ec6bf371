package render

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/harness"
)

// A trailing comma in a harness's JSON file is refused where the harness
// itself would refuse the file, with FILE:LINE:COLUMN and the fix, and the
// file is left as it was; where the harness takes it, the entry goes in.
// Before: Gemini CLI's and Qwen Code's settings.json were read as lenient
// JSONC, render said "updated", and the clients then refused the whole
// file (they strip comments, then JSON.parse). Found by an outside tester.
func TestTrailingCommaRefusedWhereTheHarnessRefusesIt(t *testing.T) {
	// What the pinned clients do with `{"k": {"s": {...},}}` (their `mcp
	// list`): these load it; Cursor, VS Code and Zed, not pinned, read
	// their files with jsonc-parser or serde_json_lenient, which take it.
	takes := map[string]bool{"opencode": true, "copilot": true, "kilo": true, "auggie": true, "amp": true, "cursor": true, "vscode": true, "zed": true}
	for _, rec := range harness.All() {
		if rec.Settings != nil || rec.Format == harness.TOML || rec.Format == harness.YAML {
			continue
		}
		t.Run(rec.Name, func(t *testing.T) {
			src := fmt.Sprintf("{\n  %q: {\n    \"mine\": {\"command\": \"x\"},\n  }\n}\n", rec.Key[0])
			r, file, got := renderRemoteOver(t, rec, src)
			if takes[rec.Name] {
				if r.Action != "insert" || !strings.Contains(string(got), `"mempalace"`) {
					t.Errorf("%s takes a trailing comma, but render did %q: %v\n%s", rec.Title, r.Action, r.Warnings, got)
				}
				return
			}
			comma := strings.Index(src, "},\n  }") + 1
			where := fmt.Sprintf("%s:3:%d: a comma before \"}\"", file, comma-strings.Index(src, `    "mine"`)+1)
			warn := strings.Join(r.Warnings, "\n")
			if r.Action != ActionSkipped || !strings.Contains(warn, where) || !strings.Contains(warn, "(fix: remove the comma") {
				t.Errorf("%s refuses a trailing comma, but render did %q, saying:\n%s\nwant %q and its fix", rec.Title, r.Action, warn, where)
			}
			if string(got) != src {
				t.Errorf("the file changed:\n%s", got)
			}
		})
	}
}

// A config starting with a UTF-8 byte order mark is refused where the
// harness refuses or ignores the file for it, at FILE:1:1 with the fix,
// and left as it was; where the harness takes it, the entry goes in and
// the mark stays. Before, render wrote its entry into Gemini CLI's, Amp's
// and Auggie's files with the mark, and the clients then refused the file
// (Gemini: "Unexpected token", Amp: "Invalid JSON in settings file") or
// read no server from it (Auggie). Found by an outside tester.
func TestByteOrderMarkRefusedWhereTheHarnessRefusesIt(t *testing.T) {
	// What the pinned clients' `mcp list` did with a file starting with
	// one: these list its server (Claude Code, Copilot, Qwen, Kilo,
	// opencode); Gemini and Amp refuse it, Auggie lists none. Cline, not
	// checked, is taken as before.
	refuses := map[string]bool{"gemini": true, "amp": true, "auggie": true}
	for _, rec := range harness.All() {
		if rec.Settings != nil || rec.Format == harness.TOML || rec.Format == harness.YAML {
			continue
		}
		t.Run(rec.Name, func(t *testing.T) {
			src := fmt.Sprintf("\ufeff{\n  %q: {\n    \"mine\": {\"command\": \"x\"}\n  }\n}\n", rec.Key[0])
			r, file, got := renderRemoteOver(t, rec, src)
			warn := strings.Join(r.Warnings, "\n")
			if !refuses[rec.Name] {
				if r.Action != "insert" || !strings.HasPrefix(string(got), "\ufeff{") || !strings.Contains(string(got), `"mempalace"`) {
					t.Errorf("%s takes a byte order mark, but render did %q: %v\n%q", rec.Title, r.Action, warn, got)
				}
				return
			}
			if r.Action != ActionSkipped || !strings.Contains(warn, file+":1:1: it starts with a UTF-8 byte order mark, which "+rec.Title) || !strings.Contains(warn, "(fix: save it without one") {
				t.Errorf("%s refuses a byte order mark, but render did %q, saying:\n%s", rec.Title, r.Action, warn)
			}
			if string(got) != src {
				t.Errorf("the file changed:\n%q", got)
			}
		})
	}
}

// renderRemoteOver renders rec's remote entry over its config holding src:
// render's result for it, the config's path and its bytes after.
func renderRemoteOver(t *testing.T, rec harness.Record, src string) (Result, string, []byte) {
	t.Helper()
	home := t.TempDir()
	file := rec.Location.Path(harness.Env{Home: home, HomeFromFlag: true})
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{rec.Name}
	res, _, err := Run(o, false)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	return res[0], file, got
}

// A config saved as UTF-16 or UTF-32 (PowerShell's Out-File, Notepad's
// "Unicode") is refused at FILE:1:1 as what it is, with the fix to save
// it as UTF-8, in every format render reads, and nothing is written.
// Before: JSON's "invalid character 'ÿ' ... (fix: correct the JSON here:
// a missing or extra comma ...)", TOML's "invalid character at start of
// key", and a YAML file was read and then refused "(please report)".
// Found by an outside tester.
func TestWideEncodingRefusedAsWhatItIs(t *testing.T) {
	for _, rec := range harness.All() {
		t.Run(rec.Name, func(t *testing.T) {
			src := "{\"theme\": \"dark\"}\n" // pi's settings.json
			switch {
			case rec.Settings != nil:
			case rec.Format == harness.TOML:
				src = "[" + rec.Key[0] + ".mine]\ncommand = \"x\"\n"
			case rec.Format == harness.YAML:
				src = rec.Key[0] + ":\n  mine: {}\n"
			default:
				src = fmt.Sprintf("{%q: {}}\n", rec.Key[0])
			}
			for _, enc := range []struct {
				name, bytes, from string
			}{
				{"UTF-16 (byte order mark FF FE)", "\xff\xfe" + widen(src, 2, false), "UTF-16"},
				{"UTF-16BE", widen(src, 2, true), "UTF-16BE"},
				{"UTF-32 (byte order mark 00 00 FE FF)", "\x00\x00\xfe\xff" + widen(src, 4, true), "UTF-32"},
				{"UTF-32LE", widen(src, 4, false), "UTF-32LE"},
			} {
				r, file, got := renderRemoteOver(t, rec, enc.bytes)
				warn := strings.Join(r.Warnings, "\n")
				want := file + ":1:1: the file is " + enc.name + ", not UTF-8"
				if r.Action != ActionSkipped || !strings.Contains(warn, want) || !strings.Contains(warn, "(fix: save it as UTF-8 (iconv -f "+enc.from+" -t UTF-8") {
					t.Errorf("%s, %s: render did %q, saying:\n%s\nwant %q and the fix to save it as UTF-8", rec.Title, enc.name, r.Action, warn, want)
				}
				if string(got) != enc.bytes {
					t.Errorf("%s, %s: the file changed:\n%q", rec.Title, enc.name, got)
				}
				if _, err := os.Stat(file + ".proposed"); err == nil {
					t.Errorf("%s, %s: a .proposed was written", rec.Title, enc.name)
				}
			}
		})
	}
}

// widen is ASCII s in n bytes a character, big- or little-endian.
func widen(s string, n int, big bool) string {
	var b []byte
	for _, c := range []byte(s) {
		w := make([]byte, n)
		if big {
			w[n-1] = c
		} else {
			w[0] = c
		}
		b = append(b, w...)
	}
	return string(b)
}

// A mempalace entry render never wrote (no record of one: the user's own,
// a number, under an escaped key, a quoted TOML table) is kept as it is
// and the environment's value goes to the .proposed file, and the log
// says so: not "kept your edit of the managed entry", which it never was.
// An edit of an entry render wrote is still "kept your edit". Found by an
// outside tester.
func TestUsersOwnEntryIsNotCalledAnEditOfRenders(t *testing.T) {
	own := map[string]string{
		"roo":         "{\"mcpServers\": {\"mempalace\": 5}}\n",
		"claude-code": "{\"mcpServers\": {\"mem\\u0070alace\": {\"command\": \"mine\"}}}\n",
		"codex":       "[mcp_servers.\"mempalace\"]\ncommand = \"mine\"\n",
	}
	for name, src := range own {
		t.Run(name, func(t *testing.T) {
			rec, _ := harness.ByName(name)
			home := t.TempDir()
			file := rec.Location.Path(harness.Env{Home: home, HomeFromFlag: true})
			os.MkdirAll(filepath.Dir(file), 0o755)
			os.WriteFile(file, []byte(src), 0o644)
			var log strings.Builder
			o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
			o.Targets, o.Log = []string{name}, slog.New(slog.NewTextHandler(&log, nil))
			res, _, err := Run(o, false)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(file)
			if res[0].Action != "kept-user-edit" || string(got) != src || res[0].ProposedFile != file+".proposed" {
				t.Errorf("render did %q (proposed %q), the file now:\n%s", res[0].Action, res[0].ProposedFile, got)
			}
			if _, err := os.Stat(file + ".proposed"); err != nil {
				t.Errorf("no .proposed: %v", err)
			}
			want := "the file already has a mempalace entry render did not write (it has no record of one), so it is kept as it is; the environment's value is in the .proposed file"
			if !strings.Contains(log.String(), want) || strings.Contains(log.String(), "kept your edit") {
				t.Errorf("the log says:\n%s\nwant %q", log.String(), want)
			}
		})
	}
	t.Run("an edit of render's entry", func(t *testing.T) {
		home := t.TempDir()
		env := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
		o := opts(home, env)
		o.Targets = []string{"codex"}
		os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
		if _, _, err := Run(o, false); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(home, ".codex", "config.toml")
		b, _ := os.ReadFile(file)
		os.WriteFile(file, append(b, "startup_timeout_sec = 30\n"...), 0o644)
		var log strings.Builder
		env["MEMPALACE_REMOTE_URL"] = "https://q.example.org/mcp"
		o = opts(home, env)
		o.Targets, o.Log = []string{"codex"}, slog.New(slog.NewTextHandler(&log, nil))
		if _, _, err := Run(o, false); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), "kept your edit of the managed entry") {
			t.Errorf("the log says:\n%s", log.String())
		}
	})
}

// Outside tester attack73 F6: after an edit of render's remote entry,
// opting out left the edited entry with a warning naming no way out. The
// warning now ends with its fix, and that fix, run as it says, takes the
// edited entry back. (It failed before: no "(fix: ".)
func TestKeptEditWarningNamesAFixThatWorks(t *testing.T) {
	home := t.TempDir()
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "http://127.0.0.1:20103/mcp", "MEMPALACE_REMOTE_TOKEN": "x"})
	o.Targets = []string{"opencode"}
	if _, _, err := Run(o, false); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, ".config", "opencode", "opencode.jsonc")
	b, _ := os.ReadFile(file)
	os.WriteFile(file, []byte(strings.ReplaceAll(string(b), "127.0.0.1:20103", "127.0.0.1:29999")), 0o644)
	var log strings.Builder
	o = opts(home, nil) // opted out
	o.Targets, o.Log = []string{"opencode"}, slog.New(slog.NewTextHandler(&log, nil))
	if _, _, err := Run(o, false); err != nil {
		t.Fatal(err)
	}
	fix := "`devbox-config render --reclaim --target opencode`"
	if !strings.Contains(log.String(), "kept your edit") || !strings.Contains(log.String(), "(fix: ") || !strings.Contains(log.String(), fix) {
		t.Fatalf("the warning names no fix %s:\n%s", fix, log.String())
	}
	o.Reclaim = true
	if _, _, err := Run(o, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), "29999") {
		t.Errorf("after the fix the edited remote entry stays:\n%s", b)
	}
}
