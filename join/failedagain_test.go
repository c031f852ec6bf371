package join

import (
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
)

// A join after one whose every drawer the primary refused (the target
// failed, their ops dead), run once the drawers are on the primary by
// another way (an edge's flush), asks the primary for them by id first
// and sends no add_drawer: before, every dead op was tried again, a write
// each (attack51: 2,000 writes, 3.5 min at a gateway's write rate, for a
// palace already on the primary).
func TestAJoinAfterAFailedOneLooksUpBeforeItSendsAgain(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	contents := []string{"first drawer of the failed join", "second drawer of the failed join", "third drawer of the failed join"}
	for _, c := range contents {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": c})
	}
	p.save(t)
	pr.srv.FailTool("mempalace_add_drawer", 100, fakepalace.FailInternal) // -32000: refused
	cfg := config(t, p, pr)
	if rep := run(t, cfg, Options{}); rep.OK() || len(rep.Failed) != 3 {
		t.Fatalf("the refused join: %+v", rep.Failed)
	}
	pr.srv.FailTool("mempalace_add_drawer", 0, fakepalace.FailInternal)
	for _, c := range contents {
		call(t, pr.pl, "mempalace_add_drawer", map[string]any{"wing": "project", "room": "notes", "content": c})
	}
	before := pr.pl.Calls("mempalace_add_drawer")
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.Skipped[Drawers] != 3 || rep.Sent[Drawers] != 0 || rep.Verified != 3 {
		t.Fatalf("the join after: skipped %v sent %v verified %d failed %+v", rep.Skipped, rep.Sent, rep.Verified, rep.Failed)
	}
	if n := pr.pl.Calls("mempalace_add_drawer") - before; n != 0 {
		t.Fatalf("the join after sent %d add_drawer for drawers the primary holds", n)
	}
	if cp, _ := readCheckpoint(p.dir); cp[rep.Target].State != StateComplete {
		t.Fatalf("bootstrap.json after: %+v", cp[rep.Target])
	}
}
