package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every file render leaves alone is named as every config mistake is,
// FILE[:LINE:COLUMN]: what (fix: how), with a plain cause and a fix that
// fits it, not a Go error ("lstat …", "EvalSymlinks: …"), and the file
// stays as it was. attack77 F1 (the multi-document and depth fixes: F3).
func TestRefusalsSayTheCauseAndTheFix(t *testing.T) {
	for _, c := range []struct {
		name, target, file string
		set                func(t *testing.T, path string)
		at                 string   // ":LINE:COLUMN" or ""
		says               []string // in the warning, cause and fix
	}{
		{"a directory", TargetClaudeCode, ".claude.json", func(t *testing.T, p string) { os.Mkdir(p, 0o755) },
			"", []string{"a directory, not a regular file", "(fix: move it aside (mv "}},
		{"a dangling link", TargetClaudeCode, ".claude.json", func(t *testing.T, p string) { os.Symlink("/nonexistent/x.json", p) },
			"", []string{"a link to /nonexistent/x.json, which does not exist", "volume", "(fix: mount the volume"}},
		{"a loop of links", TargetCodex, ".codex/config.toml", func(t *testing.T, p string) { os.Symlink("config.toml", p) },
			"", []string{"a loop of links", "(fix: point the link at a regular file"}},
		{"a read-only file", TargetClaudeCode, ".claude.json", func(t *testing.T, p string) { os.WriteFile(p, []byte("{}\n"), 0o444) },
			"", []string{"read-only (mode 0444)", "(fix: chmod u+w "}},
		{"codex's inline table", TargetCodex, ".codex/config.toml", func(t *testing.T, p string) {
			os.WriteFile(p, []byte("model = \"o3\"\nmcp_servers = { mine = { command = \"x\" } }\n"), 0o644)
		}, ":2:1", []string{"mcp_servers is set as an inline table", "(fix: write each entry of it as its own [mcp_servers.NAME] table"}},
		{"continue's flow style", "continue", ".continue/config.yaml", func(t *testing.T, p string) {
			os.WriteFile(p, []byte("name: a\nversion: 0.0.1\nmcpServers: [{name: x, command: y}]\n"), 0o644)
		}, ":3:13", []string{"mcpServers is written in flow style", "(fix: rewrite it as a block"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, c.file)
			os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
			os.MkdirAll(filepath.Dir(path), 0o755)
			c.set(t, path)
			before, _ := os.Lstat(path)
			o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
			o.Targets = []string{c.target}
			res, _, err := Run(o, false)
			if err != nil || len(res) != 1 || res[0].Action != ActionSkipped || len(res[0].Warnings) == 0 {
				t.Fatalf("%v %+v, want the target skipped with a warning", err, res)
			}
			w := res[0].Warnings[len(res[0].Warnings)-1]
			if !strings.HasPrefix(w, path+c.at+": ") || !strings.HasSuffix(w, ")") || strings.Count(w, "(fix: ") != 1 {
				t.Errorf("warning %q\nis not %s%s: what (fix: how)", w, path, c.at)
			}
			for _, s := range c.says {
				if !strings.Contains(w, s) {
					t.Errorf("warning %q\ndoes not say %q", w, s)
				}
			}
			for _, internal := range []string{"lstat ", "EvalSymlinks", "too many links"} {
				if strings.Contains(w, internal) {
					t.Errorf("warning %q shows Go's %q", w, internal)
				}
			}
			if after, _ := os.Lstat(path); after.Mode() != before.Mode() || after.Size() != before.Size() {
				t.Errorf("%s changed: %v -> %v", path, before.Mode(), after.Mode())
			}
		})
	}
}

// Gemini CLI and Qwen Code read settings.json with JSON.parse once its
// comments are stripped, at any depth, as Claude Code's ~/.claude.json is
// read: render edits one nested deeper than encoding/json's 10,000 levels
// (it refused it as "exceeded max depth" with a missing-comma fix), and
// still refuses a trailing comma there. attack77 F3.
func TestDeepCommentedJSONIsEdited(t *testing.T) {
	const depth = 10_001
	deep := "{\n  // mine\n  \"x\": " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + ",\n  \"mcpServers\": {}\n}\n"
	for target, file := range map[string]string{TargetGemini: ".gemini/settings.json", "qwen": ".qwen/settings.json"} {
		for in, want := range map[string]string{deep: "insert", strings.Replace(deep, "]]],", "],]],", 1): ActionSkipped} {
			home := t.TempDir()
			path := filepath.Join(home, file)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(in), 0o644)
			o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
			o.Targets = []string{target}
			res, _, err := Run(o, false)
			if err != nil || len(res) != 1 || res[0].Action != want {
				t.Fatalf("%s, trailing comma %v: %v %+v, want %s", target, want == ActionSkipped, err, res, want)
			}
			out, _ := os.ReadFile(path)
			if written := strings.Contains(string(out), `"mempalace"`); written != (want == "insert") || !strings.Contains(string(out), strings.Repeat("[", depth)) {
				t.Errorf("%s: the entry written %v, want %v, or the nesting lost", target, written, want == "insert")
			}
		}
	}
}

// A second YAML document is refused with a fix for that cause, not the
// parse errors' "indentation, a tab, or a value … that needs quotes".
// attack77 F3.
func TestASecondYAMLDocumentGetsItsOwnFix(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".continue", "config.yaml")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte("name: a\nversion: 0.0.1\n---\nname: b\n"), 0o644)
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{"continue"}
	res, _, err := Run(o, false)
	if err != nil || len(res) != 1 || res[0].Action != ActionSkipped || len(res[0].Warnings) == 0 {
		t.Fatalf("%v %+v", err, res)
	}
	w := res[0].Warnings[len(res[0].Warnings)-1]
	if !strings.HasPrefix(w, path+":3:1: a second YAML document") || !strings.Contains(w, "(fix: keep one document") || strings.Contains(w, "indentation") {
		t.Errorf("warning %q\nwant %s:3:1, a second document, and a fix that keeps one", w, path)
	}
}

// attack88 F7: with no MEMPALACE_* variables render writes nothing for an
// opt-in harness it never managed (Zed), so ~/.config/zed being a file is
// nothing to warn of at every start; named with --target, it still is.
func TestSolitaryWarnsOfNoHarnessItWouldNotWrite(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".config"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "zed"), []byte("x\n"), 0o644)
	res, _, err := Run(opts(home, nil), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Target == "zed" && (r.Action == ActionSkipped || len(r.Warnings) > 0) {
			t.Errorf("solitary, zed: %s %q", r.Action, r.Warnings)
		}
	}
	o := opts(home, nil)
	o.Targets = []string{"zed"}
	if res, _, _ := Run(o, true); len(res) != 1 || res[0].Action != ActionSkipped {
		t.Errorf("--target zed: %+v, want it skipped, with what is in the way", res)
	}
}
