package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// splitRig is a palace whose facts are in <palace>/knowledge_graph.sqlite3
// (written by mempalace-mcp --palace, mine, serve), joined by a local
// server started as the edge starts it (mempalace-mcp without --palace,
// which reads ~/.mempalace's), and a primary.
func splitRig(t *testing.T) (*realpalace.Palace, Config) {
	t.Helper()
	local := realpalace.New(t)
	s := local.Stdio(t) // --palace: the palace's own knowledge graph
	s.Seed(t, realpalace.Drawer("project", "notes", "a drawer so the palace has one"), realpalace.Fact("Alice", "works_on", "devbox", "", ""))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-join-split")
	cfg := realConfig(local, srv)
	cfg.Child = []string{local.Bin("mempalace-mcp")}
	cfg.ChildEnv = append(local.Env(), "MEMPALACE_PALACE_PATH="+local.Dir)
	return local, cfg
}

// attack30 f2: ~/.mempalace holds a knowledge graph of its own beside the
// palace's: the join does not pass "facts 0" as everything; it fails the
// facts with doctor's kg-split finding and its fix, sending none.
func TestRealJoinRefusesASplitKnowledgeGraph(t *testing.T) {
	t.Parallel()
	local, cfg := splitRig(t)
	home := filepath.Join(local.Home, ".mempalace", "knowledge_graph.sqlite3")
	os.MkdirAll(filepath.Dir(home), 0o700)
	if err := os.WriteFile(home, nil, 0o600); err != nil { // as a server without --palace leaves it
		t.Fatal(err)
	}
	rep := run(t, cfg, Options{Verify: All})
	var why string
	for _, f := range rep.Failed {
		if f.Kind == Facts {
			why = f.Error
		}
	}
	if rep.OK() || !strings.Contains(why, doctor.IDKGSplit) || !strings.Contains(why, "doctor --fix") || rep.Sent[Facts] != 0 {
		t.Fatalf("join of a split knowledge graph: ok %v, sent %v, facts failure %q (all %+v)", rep.OK(), rep.Sent, why, rep.Failed)
	}
	if rep.Sent[Drawers] != 1 {
		t.Fatalf("the drawers do not depend on the knowledge graph: sent %v", rep.Sent)
	}
}

// attack118 F3: with no knowledge graph in ~/.mempalace, the join's local
// server reads the palace's own: a dry run creates no empty one there
// (it did, then failed on the kg-split it made), and the real run sends the
// palace's facts and creates none either.
func TestRealJoinReadsThePalacesOwnKnowledgeGraph(t *testing.T) {
	t.Parallel()
	local, cfg := splitRig(t)
	home := filepath.Join(local.Home, ".mempalace", "knowledge_graph.sqlite3")
	dry := run(t, cfg, Options{DryRun: true})
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Fatalf("the dry run made %s (%v)", home, err)
	}
	if !dry.OK() || dry.Pending[Facts] != 1 {
		t.Fatalf("dry run: to send %v, failed %+v", dry.Pending, dry.Failed)
	}
	rep := run(t, cfg, Options{Verify: All})
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Fatalf("the join made %s (%v)", home, err)
	}
	if !rep.OK() || rep.Sent[Facts] != 1 || rep.Sent[Drawers] != 1 {
		t.Fatalf("join: sent %v, failed %+v, mismatches %+v", rep.Sent, rep.Failed, rep.Mismatches)
	}
}
