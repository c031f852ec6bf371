package render

import (
	"os"
	"path/filepath"
	"testing"
)

// benchHome lays out a realistic HOME: a 215-line opencode.jsonc with
// comments, pi settings and pi's MCP adapter file.
func benchHome(b *testing.B) (string, []byte) {
	home := b.TempDir()
	oc := filepath.Join(home, ".config", "opencode")
	pi := filepath.Join(home, ".pi", "agent")
	os.MkdirAll(oc, 0o755)
	os.MkdirAll(pi, 0o755)
	cp := func(src, dst string) {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "bench", src))
		if err != nil {
			b.Fatal(err)
		}
		os.WriteFile(dst, data, 0o644)
	}
	cp("opencode.jsonc", filepath.Join(oc, "opencode.jsonc"))
	cp("pi-settings.json", filepath.Join(pi, "settings.json"))
	os.WriteFile(filepath.Join(pi, "mcp.json"), []byte("{\n  \"mcpServers\": {}\n}\n"), 0o644)
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "bench", "pi-template.json"))
	if err != nil {
		b.Fatal(err)
	}
	return home, tmpl
}

// BenchmarkRenderNoChange is every container start after the first: all
// three targets read, parsed, decided, nothing written.
func BenchmarkRenderNoChange(b *testing.B) {
	home, tmpl := benchHome(b)
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.PiTemplate = tmpl
	if _, _, err := Run(o, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, _, _ := Run(o, false)
		if len(res[0].Changes) != 0 {
			b.Fatal("steady state wrote")
		}
	}
}

// BenchmarkRenderFlip is a start after .env changed: opencode and pi-mcp
// entries replaced (atomic write, backup, record), pi settings checked.
func BenchmarkRenderFlip(b *testing.B) {
	home, tmpl := benchHome(b)
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	edge := map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp", "MEMPALACE_REMOTE_TOKEN": "t", "MEMPALACE_EDGE": "1"}
	for i := 0; i < b.N; i++ {
		env := remote
		if i%2 == 1 {
			env = edge
		}
		o := opts(home, env)
		o.PiTemplate = tmpl
		res, _, _ := Run(o, false)
		if res[0].Kept() {
			b.Fatal(res[0])
		}
	}
}
