package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// hugeHome writes an opencode.jsonc of the given bytes into a fresh HOME
// and returns the HOME and a function that puts the file back as it was
// (and forgets the record), so every iteration is a first insert.
func hugeHome(b *testing.B, data []byte) (string, func()) {
	home := b.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	os.MkdirAll(dir, 0o755)
	file := filepath.Join(dir, "opencode.jsonc")
	reset := func() {
		if err := os.WriteFile(file, data, 0o644); err != nil {
			b.Fatal(err)
		}
		os.Remove(filepath.Join(dir, ".devbox-config.json"))
		baks, _ := filepath.Glob(file + ".bak.*")
		for _, p := range baks {
			os.Remove(p)
		}
	}
	return home, reset
}

// benchInsert runs a whole render (read, parse, decide, splice, backup,
// write, record) of a first insert into data.
func benchInsert(b *testing.B, data []byte) {
	b.Run("write", func(b *testing.B) { benchRun(b, data, false) })
	// The same without the writes (backup, file, record, their fsyncs):
	// what render itself computes.
	b.Run("dry-run", func(b *testing.B) { benchRun(b, data, true) })
}

func benchRun(b *testing.B, data []byte, dryRun bool) {
	home, reset := hugeHome(b, data)
	o := opts(home, nil)
	o.Targets = []string{TargetOpencode}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		reset()
		b.StartTimer()
		res, _, err := Run(o, dryRun)
		if err != nil || res[0].Action != "insert" {
			b.Fatalf("%v %+v", err, res[0])
		}
	}
}

// BenchmarkRenderHugeMinified is issue 15's linear-time target for size: a
// 50 MB opencode.jsonc on one line (the case that was quadratic).
func BenchmarkRenderHugeMinified(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"$schema":"https://opencode.ai/config.json","agent":{`)
	for i := 0; buf.Len() < hugeSize; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `/*a%d*/"a%d":{"model":"p/m","prompt":"be brief","tools":{"x":true,"y":false},"n":[1,2,3]}`, i, i)
	}
	buf.WriteString("}}\n")
	benchInsert(b, buf.Bytes())
}

// BenchmarkRenderDeepNesting is the target for depth: 100 000 nested
// objects beside the entry.
func BenchmarkRenderDeepNesting(b *testing.B) {
	const depth = 100_000
	data := "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"deep\": " +
		strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "\n}\n"
	benchInsert(b, []byte(data))
}

var hugeSize = 50 << 20

// BenchmarkRenderDeepNestingInMCP puts the 100 000 levels inside "mcp"
// itself, beside the entry, where the whole section is parsed.
func BenchmarkRenderDeepNestingInMCP(b *testing.B) {
	const depth = 100_000
	data := "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {\n    \"other\": " +
		strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "\n  }\n}\n"
	benchInsert(b, []byte(data))
}

// BenchmarkRenderClaudeProjects is a remote render of a ~/.claude.json
// with 2000 projects (11 MB of history): its Ignores (a local-scope
// entry, disabledMcpServers) read every project, where the entry alone
// reads only mcpServers.
func BenchmarkRenderClaudeProjects(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"mcpServers": {}, "projects": {`)
	for i := range 2000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `"/home/u/proj%d": {"history": [`, i)
		for j := range 20 {
			if j > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"display": %q, "pastedContents": {}}`, strings.Repeat("x", 200))
		}
		buf.WriteString(`], "mcpServers": {}, "disabledMcpServers": []}`)
	}
	buf.WriteString("}}\n")
	home := b.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude.json"), buf.Bytes(), 0o644)
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{TargetClaudeCode}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if res, _, err := Run(o, true); err != nil || res[0].Action != "insert" {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkRenderClaudeDeepProjects is the target for depth in what the
// Ignores read: 100 000 nested objects in one of ~/.claude.json's projects.
func BenchmarkRenderClaudeDeepProjects(b *testing.B) {
	const depth = 100_000
	data := `{"mcpServers": {}, "projects": {"/p": {"disabledMcpServers": [], "deep": ` +
		strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + `}}}`
	home := b.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(data), 0o644)
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{TargetClaudeCode}
	for b.Loop() {
		if res, _, err := Run(o, true); err != nil || res[0].Action != "insert" {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
