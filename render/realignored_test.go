package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// The records' Ignores, against the real clients: where render warns that
// the client would not use the entry, the client shows it not used (local
// scope wins, disabled, blocked), and where it does not warn, the client
// uses it (a warning about another project's settings leaves this one's
// alone). Qwen Code, Gemini's fork, has no allow-list: the same settings
// warn nothing and qwen does not block it. All offline: the clients show
// which entry they take without connecting (Gemini's and Qwen's remote
// entry is the bridge, which references no secret: attack101 F2).
func TestRealClientsIgnoreTheEntry(t *testing.T) {
	testbed.Integration(t, "drives the real harness CLIs from npm and builds the binaries")
	remote := func(r *clientRig) clientRung { return r.rungs()[1] }
	for _, c := range []struct {
		name, target, bin, file, user string
		args                          []string
		warn, shows                   string // in render's warnings ("" : none) and in the client's answer
	}{
		{"claude local scope", TargetClaudeCode, "claude", ".claude.json",
			`{"mcpServers": {}, "projects": {"{proj}": {"mcpServers": {"mempalace": {"type": "stdio", "command": "mempalace-mcp", "args": [], "env": {}}}}}}`,
			[]string{"mcp", "get", "mempalace"}, "local-scope entry", "Scope: Local config"},
		{"claude disabled", TargetClaudeCode, "claude", ".claude.json",
			`{"mcpServers": {}, "projects": {"{proj}": {"disabledMcpServers": ["mempalace"]}}}`,
			[]string{"mcp", "get", "mempalace"}, "disabledMcpServers names mempalace", "Disabled for this project"},
		{"claude disabled by another spelling", TargetClaudeCode, "claude", ".claude.json",
			`{"mcpServers": {}, "projects": {"{proj}": {"disabledMcpServers": [" MemPalace"]}}}`,
			[]string{"mcp", "get", "mempalace"}, "", "Status: ✔ Connected"},
		{"claude another project", TargetClaudeCode, "claude", ".claude.json",
			`{"mcpServers": {}, "projects": {"/elsewhere": {"disabledMcpServers": ["mempalace"], "mcpServers": {"mempalace": {"command": "mempalace-mcp"}}}}}`,
			[]string{"mcp", "get", "mempalace"}, "in /elsewhere it wins", "Scope: User config"},
		{"gemini allow-list", TargetGemini, "gemini", ".gemini/settings.json",
			`{"mcp": {"allowed": ["memory"]}, "mcpServers": {}}`,
			[]string{"mcp", "list"}, "mcp.allowed is an allow-list without mempalace", "mempalace: devbox-config bridge (stdio) - Blocked"},
		{"gemini exclude-list", TargetGemini, "gemini", ".gemini/settings.json",
			`{"mcp": {"excluded": ["MemPalace"]}, "mcpServers": {}}`,
			[]string{"mcp", "list"}, "mcp.excluded names mempalace", "mempalace: devbox-config bridge (stdio) - Blocked"},
		{"gemini allow-list naming it", TargetGemini, "gemini", ".gemini/settings.json",
			`{"mcp": {"allowed": ["mempalace"]}, "mcpServers": {}}`,
			[]string{"mcp", "list"}, "", "mempalace: devbox-config bridge (stdio) - Connected"},
		{"qwen allow-list", "qwen", "qwen", ".qwen/settings.json",
			`{"mcp": {"allowed": ["memory"], "excluded": ["mempalace"]}, "mcpServers": {}}`,
			[]string{"mcp", "list"}, "", "mempalace: devbox-config bridge (stdio) - Connected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := realClient(t, c.bin)
			r := newClientRig(t)
			r.h.Setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
			r.h.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
			file := filepath.Join(r.h.Dir, c.file)
			os.MkdirAll(filepath.Dir(file), 0o755)
			os.MkdirAll(filepath.Join(r.h.Dir, ".claude"), 0o755)
			fill := strings.NewReplacer("{proj}", r.h.Proj, "{url}", r.primary.URL()).Replace
			if err := os.WriteFile(file, []byte(fill(c.user)), 0o644); err != nil {
				t.Fatal(err)
			}
			res := r.render(t, c.target, remote(r))
			warned := strings.Join(res.Warnings, "\n")
			if c.warn == "" && warned != "" || !strings.Contains(warned, c.warn) {
				t.Errorf("render warns %q, want %q", warned, c.warn)
			}
			out, errOut, _ := r.h.Run(t, 120*time.Second, bin, c.args...)
			got := testbedPlain(out + errOut)
			if want := fill(c.shows); !strings.Contains(got, want) {
				t.Errorf("%s %s does not show %q:\n%s", c.bin, strings.Join(c.args, " "), want, got)
			}
		})
	}
}
