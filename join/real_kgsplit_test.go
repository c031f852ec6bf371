package join

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// attack30 f2: the palace's facts are in <palace>/knowledge_graph.sqlite3
// (written by mempalace-mcp --palace, mine, serve), and the local server
// the join starts (mempalace-mcp without --palace) reads
// ~/.mempalace's: the join does not pass "facts 0" as everything; it
// fails the facts with doctor's kg-split finding and its fix, sending
// none.
func TestRealJoinRefusesASplitKnowledgeGraph(t *testing.T) {
	t.Parallel()
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
