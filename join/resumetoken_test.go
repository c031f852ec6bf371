package join

import (
	"strings"
	"testing"
	"time"
)

// A resumed join whose token the primary refuses names each record it
// left queued by what it is, and says why: before, its lines read
// "drawers  →  → : not tried: the primary was unreachable" (attack41 N6),
// a fact's name for a drawer read back from the join outbox, and the
// wrong reason for a primary that answered 401.
func TestAResumeWithARefusedTokenNamesWhatStaysQueued(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	cfg := config(t, p, pr)
	addr := pr.srv.Addr()
	pr.srv.Stop()
	if rep := run(t, cfg, Options{Stall: time.Second}); rep.OK() {
		t.Fatalf("a join to a stopped primary reported success: %+v", rep)
	}
	if err := pr.srv.Start(addr); err != nil {
		t.Fatal(err)
	}
	cfg.Token = func() string { return "not-the-token" }
	rep := run(t, cfg, Options{Resume: true, Stall: time.Second})
	drawers := 0
	for _, f := range rep.Failed {
		if f.Kind != Drawers {
			continue
		}
		drawers++
		if strings.Contains(f.Record, "→") || f.Record == "" || !strings.Contains(f.Error, "refused the token") || strings.Contains(f.Error, "unreachable") {
			t.Errorf("a drawer left queued: %+v", f)
		}
	}
	if drawers == 0 {
		t.Fatalf("no drawer named as left queued: %+v", rep.Failed)
	}
}
