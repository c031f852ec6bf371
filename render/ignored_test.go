package render

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/merge"
)

// getSpy is a document that records the paths Get is asked for.
type getSpy struct {
	*merge.Doc
	gets []string
}

func (g *getSpy) Get(path ...string) ([]byte, error) {
	g.gets = append(g.gets, strings.Join(path, "."))
	return g.Doc.Get(path...)
}

// A large ~/.claude.json's projects are judged from the bytes as written,
// never through the whole document's parse (which cost a dry run 55 ->
// 240 ms on 11 MB of history), with the same findings as a small file's
// (a duplicate key: the last one, as Claude Code's JSON.parse reads it).
func TestIgnoredReadsLargeProjectsAsWritten(t *testing.T) {
	rec, _ := harness.ByName("claude-code")
	projects := `{"/b": {"disabledMcpServers": ["mempalace"]},
		"/a": {"mcpServers": {"mempalace": {}}, "disabledMcpServers": ["x"]},
		"/dup": {"disabledMcpServers": ["mempalace"], "disabledMcpServers": []},
		"/dup2": {"mcpServers": null, "mcpServers": {"mempalace": null}},
		"/x": {"mcpServers": {"mempalace": 1}}, "/x": {"disabledMcpServers": ["mempalace"]},
		"/esc\u002fkey\ud800\"": {"disabledMcpServers": [" mempalace", "mempalace"]},
		"/a.b c": [{"disabledMcpServers": ["mempalace"]}], "/s": "mempalace", "/n": null,
		"/deep": {"mcpServers": {"m": {"mempalace": {}}}, "disabledMcpServers": {"0": "mempalace"}},
		"/big": {"history": "` + strings.Repeat("x", 300<<10) + `"}}`
	want := []string{
		`projects["/a"].mcpServers.mempalace is a local-scope`,
		`projects["/dup2"].mcpServers.mempalace is a local-scope`,
		`projects["/b"].disabledMcpServers names mempalace`,
		`projects["/esc/key` + "\uFFFD" + `\""].disabledMcpServers names mempalace`,
		`projects["/x"].disabledMcpServers names mempalace`,
	}
	for _, c := range []struct {
		name, doc string
		raw       bool // read as written
	}{
		{"strict JSON", `{"mcpServers": {}, "projects": ` + projects + `}`, true},
		{"a comment in projects", `{"mcpServers": {}, "projects": ` + strings.Replace(projects, "{", "{ /* c */", 1) + `}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := merge.ParseDocFocused([]byte(c.doc), focus(rec)...)
			if err != nil {
				t.Fatal(err)
			}
			spy := &getSpy{Doc: d}
			var got []string
			for _, u := range ignored(OS{}, t.TempDir(), rec, "f", spy, []byte(`{}`), ladder.Remote) {
				got = append(got, strings.TrimPrefix(u.Message, "f: "))
			}
			if len(got) != len(want) {
				t.Fatalf("%d findings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
			for i, w := range want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("finding %d:\n%s\nwant it to start\n%s", i, got[i], w)
				}
			}
			if read := slices.Contains(spy.gets, "projects"); read == c.raw {
				t.Errorf("Get(projects) asked: %v, want %v", read, !c.raw)
			}
		})
	}
}

// JSON.parse reads any depth; encoding/json stops at 10,000 levels. A
// ~/.claude.json nested deeper in a project's history is Claude Code's
// and valid: render edits it. It was refused as "exceeded max depth",
// with a fix that said to correct a missing comma.
func TestDeepClaudeJSONIsEdited(t *testing.T) {
	const depth = 20_000
	data := `{"mcpServers": {}, "projects": {"/p": {"disabledMcpServers": [], "deep": ` +
		strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + `}}}`
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	file := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	o.Targets = []string{TargetClaudeCode}
	res, _, err := Run(o, false)
	if err != nil || len(res) != 1 || res[0].Action != "insert" {
		t.Fatalf("%v %+v", err, res)
	}
	out, _ := os.ReadFile(file)
	if !strings.Contains(string(out), strings.Repeat(`{"a":`, depth)+"1") || !strings.Contains(string(out), `"mempalace"`) {
		t.Fatalf("the entry is not written, or the history is not kept")
	}
	res, _, err = Run(o, true)
	if err != nil || res[0].Action != "unchanged" {
		t.Fatalf("a second run: %v %+v", err, res)
	}
}
