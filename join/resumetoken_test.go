package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A resumed join whose token the primary refuses counts the records it
// left queued, says why, and names the command that lists them: before,
// its lines read "drawers  →  → : not tried: the primary was unreachable"
// (attack41 N6), the wrong reason for a primary that answered 401, and
// then one line per record (attack89 F2).
func TestAResumeWithARefusedTokenNamesWhatStaysQueued(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	cfg := config(t, p, pr)
	addr := pr.srv.Addr()
	pr.srv.Stop()
	if rep := run(t, cfg, Options{Stall: 300 * time.Millisecond}); rep.OK() { // the primary refuses at once: nothing to wait for
		t.Fatalf("a join to a stopped primary reported success: %+v", rep)
	}
	if err := pr.srv.Start(addr); err != nil {
		t.Fatal(err)
	}
	cfg.Token = func() string { return "not-the-token" }
	rep := run(t, cfg, Options{Resume: true, Stall: time.Second})
	counted := false
	for _, f := range rep.Failed {
		switch f.Kind {
		case "records": // the records left, counted (attack89 F2)
			counted = true
			if !strings.Contains(f.Error, "refused the token") || strings.Contains(f.Error, "unreachable") || !strings.Contains(f.Error, "edge outbox list --join") {
				t.Errorf("the records left queued: %+v", f)
			}
		case Drawers:
			t.Errorf("a drawer left queued has a line of its own, beside their count: %+v", f)
		}
	}
	if !counted {
		t.Fatalf("nothing says what stays queued: %+v", rep.Failed)
	}
}

// --resume sends what the join outbox bootstrap.json names for the target
// holds, also where an earlier build named that file otherwise: before,
// it looked only for the name it computes and refused "no join to ... was
// started on this palace" (attack41 N5).
func TestAResumeOpensTheOutboxTheCheckpointNames(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	cfg := config(t, p, pr)
	addr := pr.srv.Addr()
	pr.srv.Stop()
	rep := run(t, cfg, Options{Stall: 300 * time.Millisecond}) // the primary refuses at once: nothing to wait for
	cps, err := readCheckpoint(p.dir)
	if err != nil || rep.OK() {
		t.Fatalf("a join to a stopped primary: %+v %v", rep, err)
	}
	cp := cps[rep.Target]
	const older = "join-outbox-0ld3rbu1ld00.sqlite"
	for _, sfx := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(filepath.Join(p.dir, "edge", cp.Outbox+sfx), filepath.Join(p.dir, "edge", older+sfx)); err != nil && sfx == "" {
			t.Fatal(err)
		}
	}
	cp.Outbox = older
	if err := writeCheckpoint(p.dir, rep.Target, cp); err != nil {
		t.Fatal(err)
	}
	if err := pr.srv.Start(addr); err != nil {
		t.Fatal(err)
	}
	if rep := run(t, cfg, Options{Resume: true}); !rep.OK() || rep.Sent[Drawers] == 0 {
		t.Fatalf("resume from the outbox the checkpoint names: %+v", rep)
	}
	exactlyOnce(t, pr)
}
