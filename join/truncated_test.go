package join

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
)

// Issue 26, point 10: a drawer the local palace holds truncated (its
// chunk count promises more than its content holds) is a finding: it is
// not replayed (the primary would get a truncated copy under another id)
// and never "verified", even where both sides hold the same text. Before,
// verification compared the two contents without the local side's chunk
// arithmetic: equal truncated texts passed.
func TestALocallyTruncatedDrawerIsAFinding(t *testing.T) {
	t.Parallel()
	c := long("x", 2000)
	truncated := map[string]any{"drawer_id": "d1", "wing": "w", "room": "r", "content": c[:1600], "chunks": float64(3), "metadata": map[string]any{}}
	if _, err := drawerRecord(drawerRead{res: truncated}, "d1", "w", ""); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("reading a truncated local drawer: %v", err)
	}
	tgt := verifyTarget{rec: Record{Kind: Drawers, LocalID: "d1"}, primaryID: "d1"}
	side := map[string]any{"content": c[:1600], "chunks": float64(3)}
	if m, ok := compare(tgt, side, side); ok || m.Verdict != "truncated locally" {
		t.Errorf("equal contents, truncated on both sides: verified %v, verdict %q", ok, m.Verdict)
	}
}

// Issue 29, point 5, for join: a record the primary refuses stays in the
// join outbox, the report names the command that shows it, and
// bootstrap.json never says "complete" after a run with failures. Before,
// the refused op was dropped, the message (and later the flusher's log
// line) pointed at the edge's outbox (empty), and the target was recorded
// complete.
func TestARefusedRecordIsNamedAndTheJoinIsNotComplete(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "refused by the primary"})
	p.do(t, "kg_add", map[string]any{"subject": "Alice", "predicate": "works_on", "object": "devbox"})
	p.save(t)
	pr.srv.FailTool("mempalace_add_drawer", 100, fakepalace.FailInternal) // -32000: refused
	cfg := config(t, p, pr)
	var logged bytes.Buffer
	cfg.Log = slog.New(slog.NewTextHandler(&logged, nil))
	rep := run(t, cfg, Options{})
	if rep.OK() || len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0].Error, "edge outbox list --join") {
		t.Fatalf("report: %+v", rep.Failed)
	}
	// The flusher's log line names the join outbox too, not the edge's.
	if l := logged.String(); !strings.Contains(l, "outbox op is dead") || !strings.Contains(l, "devbox-config edge outbox list --join)") {
		t.Errorf("the dead op's log line does not name the list command:\n%s", l)
	}
	if len(pr.pl.Dump().Triples) != 1 {
		t.Error("the fact, on another object, did not reach the primary")
	}
	cp, err := readCheckpoint(p.dir)
	if err != nil || cp[rep.Target].State == "complete" || cp[rep.Target].JoinedAt != nil {
		t.Fatalf("bootstrap.json after a join with a refused record: %+v %v", cp[rep.Target], err)
	}
	// Fixed on the primary: the next join tries it again and completes.
	pr.srv.FailTool("mempalace_add_drawer", 0, fakepalace.FailInternal)
	if rep := run(t, cfg, Options{}); !rep.OK() {
		t.Fatalf("the join after the fix: %+v", rep.Failed)
	}
	if cp, _ := readCheckpoint(p.dir); cp[rep.Target].State != "complete" || pr.pl.Dump().CountContent("refused by the primary") != 1 {
		t.Fatalf("after the fix: %+v", cp[rep.Target])
	}
}
