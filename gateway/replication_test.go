package gateway

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// palaceSide is one palace's outbox, its primary supervisor and flusher,
// all sending as device dev1.
type palaceSide struct {
	t  *testing.T
	st *outbox.Store
	p  *edge.Primary
	f  *outbox.Flusher
}

func (s palaceSide) enqueue(tool string, args map[string]any) outbox.Op {
	s.t.Helper()
	b, _ := json.Marshal(args)
	op, err := s.st.Enqueue(context.Background(), outbox.Write{Name: tool, Payload: b})
	if err != nil {
		s.t.Fatal(err)
	}
	return op
}

// drain sends until nothing is queued, riding out the breaker.
func (s palaceSide) drain() {
	s.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if !s.p.Up() {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		s.st.Resume(ctx)
		s.f.Drain(ctx)
		st, _ := s.st.Stats(ctx)
		if st.ByState[outbox.Queued]+st.ByState[outbox.Inflight] == 0 {
			return
		}
	}
	st, _ := s.st.Stats(ctx)
	s.t.Fatalf("the outbox did not drain: %+v", st)
}

func sideAt(t *testing.T, path, url, tok string) palaceSide {
	t.Helper()
	st, err := outbox.Open(path, "dev1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := edge.NewPrimary(url, func() string { return tok }, nil, edge.PrimaryOptions{Timeout: 3 * time.Second, Probe: 10 * time.Millisecond, OnUp: func() { st.Resume(context.Background()) }})
	t.Cleanup(p.Close)
	return palaceSide{t: t, st: st, p: p, f: &outbox.Flusher{S: st, P: edge.FlushTarget(p), BaseDelay: time.Millisecond}}
}

func openFacts(d *fakepalace.State, subject, object string) (open, closed int) {
	for _, tr := range d.Triples {
		if tr.Subject != subject || tr.Object != object {
			continue
		}
		if tr.ValidTo != nil && *tr.ValidTo != "" {
			closed++
		} else {
			open++
		}
	}
	return open, closed
}

// Issue 26, point 1: two palaces that share a device id and its token (a
// second palace on the host, an outbox moved aside and started anew, a
// copied or restored outbox) never share an op id, so the gateway's
// ledger never answers one palace's write from the other's record. Before
// op ids covered the outbox's own identity, palace B's first op (the same
// fact palace A had asserted, then closed, as its first op) was answered
// from A's record and never applied: the fact stayed closed.
func TestTwoPalacesOneDeviceNeverShareAnOpID(t *testing.T) {
	g := newGW(t, []Device{{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@lab"}}})
	g.withLedger()
	url, tok := g.http.URL+"/mcp", g.tokens["dev1"]
	dir := t.TempDir()
	fact := map[string]any{"subject": "ada", "predicate": "works_at", "object": "acme"}
	closeFact := map[string]any{"subject": "ada", "predicate": "works_at", "object": "acme", "ended": "2026-01-01"}

	a := sideAt(t, filepath.Join(dir, "a", outbox.FileName), url, tok)
	opA := a.enqueue("mempalace_kg_add", fact)
	a.enqueue("mempalace_kg_invalidate", closeFact)
	a.drain()

	b := sideAt(t, filepath.Join(dir, "b", outbox.FileName), url, tok)
	opB := b.enqueue("mempalace_kg_add", fact)
	b.drain()
	if opA.ID == opB.ID {
		t.Errorf("two palaces' first ops share op id %s", opA.ID)
	}
	if open, _ := openFacts(g.primary.Dump(), "ada", "acme"); open != 1 {
		t.Errorf("palace B asserted the fact again; the primary holds %d open copies of it, want 1", open)
	}

	// A copy of palace A's outbox (a backup restored beside it, or copied
	// into a second container) goes on with local_seq 3 in both files.
	bob := map[string]any{"subject": "bob", "predicate": "works_at", "object": "acme"}
	a.st.Close()
	copied := filepath.Join(dir, "copy", outbox.FileName)
	copyFile(t, filepath.Join(dir, "a", outbox.FileName), copied)
	a = sideAt(t, filepath.Join(dir, "a", outbox.FileName), url, tok)
	c := sideAt(t, copied, url, tok)
	a3 := a.enqueue("mempalace_kg_add", bob)
	a.enqueue("mempalace_kg_invalidate", map[string]any{"subject": "bob", "predicate": "works_at", "object": "acme", "ended": "2026-01-01"})
	a.drain()
	c3 := c.enqueue("mempalace_kg_add", bob)
	c.drain()
	if a3.LocalSeq != c3.LocalSeq {
		t.Fatalf("the copy's op is %d, the original's %d: the test needs equal sequence numbers", c3.LocalSeq, a3.LocalSeq)
	}
	if a3.ID == c3.ID {
		t.Errorf("an outbox and its copy share op id %s", a3.ID)
	}
	if open, _ := openFacts(g.primary.Dump(), "bob", "acme"); open != 1 {
		t.Errorf("the copy asserted bob's fact again; the primary holds %d open copies of it, want 1", open)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
