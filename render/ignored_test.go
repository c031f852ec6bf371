package render

import (
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
