package join

import (
	"context"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// Attack40 F1: the edge's record of writes its outbox could not queue
// (a full disk) names `devbox-config join` as their fix; a complete join
// that read the local palace after them sent them and clears it, so
// edge status and doctor stop naming them. A dry run, or a join of some
// wings only, leaves it.
func TestJoinClearsTheRecordOfWritesThatStayedLocal(t *testing.T) {
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	ctx := context.Background()
	s, err := outbox.Open(doctor.OutboxPath(p.dir), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := outbox.NoteStayedLocal(doctor.OutboxPath(p.dir), outbox.StayedLocal{N: 2, Since: time.Now().Add(-time.Minute), Last: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	recorded := func() *outbox.StayedLocal {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.StayedLocal
	}
	cfg := config(t, p, pr)
	run(t, cfg, Options{DryRun: true})
	if recorded() == nil {
		t.Fatal("a dry run cleared the record")
	}
	if rep := run(t, cfg, Options{Wings: []string{"a*"}}); !rep.OK() || recorded() == nil {
		t.Fatalf("a join of some wings cleared the record (or failed: %+v)", rep.Failed)
	}
	if rep := run(t, cfg, Options{}); !rep.OK() {
		t.Fatalf("join failed: %+v", rep)
	}
	if sl := recorded(); sl != nil {
		t.Fatalf("after a complete join the record stays: %+v", sl)
	}
}
