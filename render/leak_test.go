package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// attack12: a URL holding $MEMPALACE_REMOTE_TOKEN was written into
// gemini's settings, which expands it and sent the token to the primary in
// the URL path; and a .env line with two assignments made render's warning
// print the token. Neither reaches a config or a warning.
func TestRenderWritesNoExpandableURLAndRepeatsNoSecret(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".gemini"), 0o755)
	env := map[string]string{
		"MEMPALACE_REMOTE_URL":   "http://127.0.0.1:30511/$MEMPALACE_REMOTE_TOKEN/mcp",
		"MEMPALACE_REMOTE_TOKEN": "SECRETTOK_0123456789",
		"MEMPALACE_EDGE":         "1 MEMPALACE_REMOTE_TOKEN=LEAKME",
		"MEMPALACE_AGENT_NAME":   "a MEMPALACE_REMOTE_TOKEN=LEAKME",
		"PI_SETTINGS_MERGE":      "1 MEMPALACE_REMOTE_TOKEN=LEAKME",
	}
	o := opts(home, env)
	o.Targets = []string{TargetGemini, TargetOpencode}
	res, lw, err := Run(o, false)
	if err != nil {
		t.Fatal(err)
	}
	said := ""
	for _, r := range res {
		said += strings.Join(r.Warnings, "\n") + "\n"
	}
	for _, w := range lw {
		said += w.Fix + "\n"
	}
	if strings.Contains(said, "LEAKME") || !strings.Contains(said, "%24") {
		t.Errorf("render's warnings repeat a value or lack the fix for '$':\n%s", said)
	}
	b, _ := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	if strings.Contains(string(b), "$MEMPALACE") || strings.Contains(string(b), "30511") {
		t.Errorf("gemini's settings hold the URL gemini would expand:\n%s", b)
	}
}

// A user's own server in gemini's settings holds MEMPALACE_REMOTE_TOKEN's
// value literally: the .bak render keeps of that file before inserting its
// entry is owner-only (0600), though the file is 0644; a .bak of a file
// without the token keeps the file's mode. Found by an outside tester.
func TestBackupHoldingTheTokenIsOwnerOnly(t *testing.T) {
	const tok = "primary-secret-0123456789"
	env := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": tok}
	for held, want := range map[string]os.FileMode{"Bearer " + tok: 0o600, "Bearer other": 0o644} {
		home := t.TempDir()
		file := filepath.Join(home, ".gemini", "settings.json")
		os.MkdirAll(filepath.Dir(file), 0o755)
		os.WriteFile(file, []byte(`{"mcpServers":{"other":{"httpUrl":"https://p.example.org/mcp","headers":{"Authorization":"`+held+`"}}}}`+"\n"), 0o644)
		os.Chmod(file, 0o644)
		o := opts(home, env)
		o.Targets = []string{TargetGemini}
		if _, _, err := Run(o, false); err != nil {
			t.Fatal(err)
		}
		baks, _ := filepath.Glob(file + ".bak.*")
		if len(baks) != 1 {
			t.Fatalf("%q: backups %v, want one", held, baks)
		}
		bi, _ := os.Stat(baks[0])
		fi, _ := os.Stat(file)
		if bi.Mode().Perm() != want || fi.Mode().Perm() != 0o644 {
			t.Errorf("%q: the .bak is %04o, the file %04o; want %04o and 0644", held, bi.Mode().Perm(), fi.Mode().Perm(), want)
		}
	}
}

// A .proposed is a whole copy of the config: of one holding
// MEMPALACE_REMOTE_TOKEN's value literally it is owner-only (0600), as its
// .bak is, though the config is 0644; one without the token keeps the
// config's mode (attack77 F2).
func TestProposedHoldingTheTokenIsOwnerOnly(t *testing.T) {
	const tok = "primary-secret-0123456789"
	env := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": tok}
	for held, want := range map[string]os.FileMode{"Bearer " + tok: 0o600, "Bearer other": 0o644} {
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
		file := filepath.Join(home, ".claude.json")
		os.WriteFile(file, []byte(`{"mcpServers": {"mempalace": {"type": "stdio", "command": "my-mempalace"}, "other": {"type": "http", "url": "http://x/mcp", "headers": {"Authorization": "`+held+`"}}}}`+"\n"), 0o644)
		os.Chmod(file, 0o644)
		o := opts(home, env)
		o.Targets = []string{TargetClaudeCode}
		if _, _, err := Run(o, false); err != nil {
			t.Fatal(err)
		}
		pi, err := os.Stat(file + ".proposed")
		if err != nil {
			t.Fatalf("%q: no .proposed: %v", held, err)
		}
		if pi.Mode().Perm() != want {
			t.Errorf("%q: the .proposed is %04o; want %04o", held, pi.Mode().Perm(), want)
		}
	}
}

// A config that does not parse is named by its line and column, and the
// text of it the parser quotes (a literal it could not read, a key named
// twice) is repeated only as any value is: at most 15 characters without
// whitespace, never MEMPALACE_REMOTE_TOKEN's value, with or without the
// variables set. A paste slip left a header's token in the warning
// render logs at every start (attack114 F1).
func TestAParseErrorRepeatsNoSecretOfTheFile(t *testing.T) {
	const tok, short = "SECRETtok0123456789abcdef", "Short0tok9"
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": tok}
	shortTok := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": short}
	header := "{\n  \"mcp\": {\"h\": {\"headers\": {\"Authorization\": \"Bearer " + tok + "\n\"}}}\n}\n"
	for _, c := range []struct {
		target, file, in, at, secret string
		env                          map[string]string
	}{
		{"opencode", ".config/opencode/opencode.jsonc", header, "2:46", tok, nil},
		{"opencode", ".config/opencode/opencode.jsonc", header, "2:46", tok, remote},
		{"cursor", ".cursor/mcp.json", `{"k": sk-other-secret-99999999}`, "1:7", "sk-other", nil},
		{"cursor", ".cursor/mcp.json", `{"k": ` + short + `}`, "1:7", short, shortTok},
		{"codex", ".codex/config.toml", "[x.sk-other-secret-99999999]\n[x.sk-other-secret-99999999]\n", "2:2", "sk-other", nil},
		{"goose", ".config/goose/config.yaml", "extensions:\n  sk-other-secret-99999999: 1\n  sk-other-secret-99999999: 2\n", "3:3", "sk-other", nil},
		// 15 characters, 8 of them the token's in a row (attack115 F1).
		{"cursor", ".cursor/mcp.json", `{"k": SECRETtok012345}`, "1:7", "RETtok01", remote},
		{"cursor", ".cursor/mcp.json", `{"k": xxCRETtok01xx}`, "1:7", "RETtok01", remote},
		// A token shorter than 8 characters, the literal itself (review35 R3).
		{"cursor", ".cursor/mcp.json", `{"k": s3cr3tX}`, "1:7", "s3cr3tX", map[string]string{"MEMPALACE_REMOTE_URL": "http://127.0.0.1:9/mcp", "MEMPALACE_REMOTE_TOKEN": "s3cr3tX"}},
	} {
		home := t.TempDir()
		path := filepath.Join(home, c.file)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(c.in), 0o644)
		o := opts(home, c.env)
		o.Targets = []string{c.target}
		res, _, err := Run(o, true)
		if err != nil {
			t.Fatal(err)
		}
		said := strings.Join(res[0].Warnings, "\n")
		if !strings.Contains(said, path+":"+c.at+": ") || strings.Contains(said, c.secret) || !strings.Contains(said, "(fix: ") {
			t.Errorf("%s %q: %s\nwant the place %s and the fix, without %q", c.target, c.in, said, c.at, c.secret)
		}
	}
	// A short literal is what the user typed: still shown.
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".cursor"), 0o755)
	os.WriteFile(filepath.Join(home, ".cursor", "mcp.json"), []byte(`{"k": tru}`), 0o644)
	o := opts(home, nil)
	o.Targets = []string{"cursor"}
	if res, _, _ := Run(o, true); !strings.Contains(strings.Join(res[0].Warnings, "\n"), "invalid literal: tru;") {
		t.Errorf("a short literal not shown: %q", res[0].Warnings)
	}
	// With a token set, a parse error's English stays English: "basic
	// strings" is no Basic credential (attack115 F3).
	os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("k = \"a\nb\"\n"), 0o644)
	o = opts(home, remote)
	o.Targets = []string{"codex"}
	if res, _, _ := Run(o, true); !strings.Contains(strings.Join(res[0].Warnings, "\n"), "basic strings") {
		t.Errorf("a TOML parse error with a token set: %q, want its own words", res[0].Warnings)
	}
}
