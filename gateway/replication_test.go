package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/ledger"
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
		s.st.ClearBackoff(ctx)
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
	p := edge.NewPrimary(url, func() string { return tok }, slog.New(slog.DiscardHandler), edge.PrimaryOptions{Timeout: 3 * time.Second, Probe: 10 * time.Millisecond, OnUp: func() { st.Resume(context.Background()) }})
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
	t.Parallel()
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

// crashedForward leaves in the gateway's ledger file what a gateway
// SIGKILLed mid-forward leaves: the op's row in flight, claimed by a
// process that is gone.
func crashedForward(t *testing.T, g *gw, ledgerFile, device string, op outbox.Op) {
	t.Helper()
	req, bad := parseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + op.Tool + `","arguments":` + string(op.Payload) + `}}`))
	if bad != nil {
		t.Fatal(bad.msg)
	}
	db, err := sql.Open("sqlite", "file:"+ledgerFile+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	if _, err := db.Exec(`INSERT INTO ops(device, op_id, tool, args_digest, state, claim, created_at, updated_at) VALUES(?,?,?,?,'inflight','gone-1',?,?)`,
		device, op.ID, op.Tool, ledgerDigest(g.srv.audit.digestKey, req.Args), now, now); err != nil {
		t.Fatal(err)
	}
}

// ageClaims makes the crashed claims crashedForward left as old as a
// stale one (older than the ledger's StaleAfter plus StaleGrace): the
// time a test would otherwise sleep, which a loaded machine can pass
// before the test looks.
func ageClaims(t *testing.T, ledgerFile string, by time.Duration) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+ledgerFile+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE ops SET updated_at = updated_at - ? WHERE claim = 'gone-1'`, by.Milliseconds()); err != nil {
		t.Fatal(err)
	}
}

// Issue 26, point 5: a gateway SIGKILLed while it forwarded an
// artifact_put leaves the op's ledger row in flight. After the restart a
// retry of that op is answered at once with a retryable "in flight" and
// holds no write slot, so another device's write is not held up; once
// the row is stale the op is in doubt: the artifact (which the upstream
// did apply) is never forwarded again on its own, and the edge shows the
// op in doubt until an operator settles it. An op with a look-up
// (event_append) is looked up and sent again only when it is not there.
// Before, every retry polled the row while holding the one write slot
// (another device's write waited seconds, each time), and once stale the
// artifact was forwarded again: two on the upstream.
func TestAGatewayCrashNeitherStallsNorDuplicates(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"pi@lab"}, WriteRate: 1e6, ReadRate: 1e6},
		{ID: "dev2", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"oc@desk"}},
	})
	ledgerFile := filepath.Join(t.TempDir(), ledger.FileName)
	l, err := ledger.OpenOptions(ledgerFile, ledger.Options{Retention: time.Hour, StaleAfter: time.Hour, StaleGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	g.srv.Ledger = OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}

	a := sideAt(t, filepath.Join(t.TempDir(), outbox.FileName), g.http.URL+"/mcp", g.tokens["dev1"])
	art := a.enqueue("mempalace_artifact_put", map[string]any{"kind": "note", "content": "one artifact", "created_by": "pi@lab"})
	ev := a.enqueue("mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "one event"})
	// The crashed gateway had forwarded the artifact (the upstream applied
	// it) and was about to forward the event.
	crashedForward(t, g, ledgerFile, "dev1", art)
	crashedForward(t, g, ledgerFile, "dev1", ev)
	upCall(t, g.primary, "mempalace_artifact_put", mustArgs(t, art.Payload))

	ctx := context.Background()
	a.f.BaseDelay = time.Minute // one attempt each here
	a.f.Drain(ctx)              // both answered "in flight": retried later, nothing waits
	a.f.BaseDelay = time.Millisecond
	for _, op := range []outbox.Op{art, ev} {
		got, _ := a.st.GetByID(ctx, op.ID)
		if got.State != outbox.Queued || !strings.Contains(string(got.Error), "busy") {
			t.Errorf("%s while the crashed claim is fresh: %s %s", op.Tool, got.State, got.Error)
		}
	}
	start := time.Now()
	if _, rpcErr, _ := g.call(g.tokens["dev2"], "add_drawer", map[string]any{"wing": "w", "room": "r", "content": "another device's write"}); rpcErr != nil {
		t.Fatalf("another device's write: %v", rpcErr)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("another device's write waited %s behind the crashed op's retries", d)
	}

	ageClaims(t, ledgerFile, 2*time.Hour) // the crashed claims go stale: in doubt
	a.drain()
	count := func(match func(string) bool, items []string) int {
		n := 0
		for _, s := range items {
			if match(s) {
				n++
			}
		}
		return n
	}
	d := g.primary.Dump()
	var arts, evs []string
	for _, x := range d.Artifacts {
		arts = append(arts, x.Content)
	}
	for _, e := range d.Events {
		evs = append(evs, e.Body)
	}
	if n := count(func(s string) bool { return s == "one artifact" }, arts); n != 1 {
		t.Errorf("%d artifacts on the upstream, want 1", n)
	}
	if n := count(func(s string) bool { return s == "one event" }, evs); n != 1 {
		t.Errorf("%d events on the upstream, want 1 (looked up, then sent)", n)
	}
	if got, _ := a.st.GetByID(ctx, art.ID); got.State != outbox.InDoubt {
		t.Errorf("the artifact's op: %s, want in doubt", got.State)
	}
	if got, _ := a.st.GetByID(ctx, ev.ID); got.State != outbox.Done {
		t.Errorf("the event's op: %s, want done", got.State)
	}
	if _, err := a.st.Delivered(ctx, art.Short()); err != nil {
		t.Fatal(err)
	}
}

func mustArgs(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
