package join

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// Attack40 F1: the edge's record of writes its outbox could not queue
// (a full disk) names `devbox-config join` as their fix; a complete join
// that read the local palace after them sent them and clears it, so
// edge status and doctor stop naming them. A dry run, or a join of some
// wings only, leaves it; so does one to another primary, which sent them
// nowhere the edge replicates to (before, a join to any primary cleared
// the record: attack41 N2).
func TestJoinClearsTheRecordOfWritesThatStayedLocal(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	ctx := context.Background()
	s, err := outbox.Open(doctor.OutboxPath(p.dir), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := config(t, p, pr)
	other := "http://127.0.0.1:9/mcp" // the edge's own primary, not this join's
	// Written as an edge would name cfg.URL: another case, a default port
	// and a trailing slash are the same primary.
	u, err := url.Parse(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme, u.Path = "HTTP", u.Path+"/"
	for _, primary := range []string{other, u.String()} {
		if err := outbox.NoteStayedLocal(doctor.OutboxPath(p.dir), outbox.StayedLocal{Primary: primary, N: 2, Since: time.Now().Add(-time.Minute), Last: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	recorded := func() []outbox.StayedLocal {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.StayedLocal
	}
	run(t, cfg, Options{DryRun: true})
	if len(recorded()) != 2 {
		t.Fatal("a dry run cleared the record")
	}
	if rep := run(t, cfg, Options{Wings: []string{"a*"}}); !rep.OK() || len(recorded()) != 2 {
		t.Fatalf("a join of some wings cleared the record (or failed: %+v)", rep.Failed)
	}
	if rep := run(t, cfg, Options{}); !rep.OK() {
		t.Fatalf("join failed: %+v", rep)
	}
	if sl := recorded(); len(sl) != 1 || sl[0].Primary != other {
		t.Fatalf("after a complete join, the records (only the other primary's should stay): %+v", sl)
	}
}
