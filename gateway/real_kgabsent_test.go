package gateway

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Against real MemPalace 3.11.0 (edges over real mempalace-mcp palaces,
// the gateway in front of a real serve), an end of a fact the primary
// holds none of is no silent success (attack99 F2):
//
//   - two palaces of one device: palace A's kg_add queued (its edge
//     offline), palace B's kg_invalidate of the fact reaches the primary
//     first and is refused, kept queued; once A's add has landed, B's
//     next flush closes the fact (before: B's end was answered success,
//     and A's add, landing after it, stayed current for ever);
//   - the solitary case: a fact only this palace has (written with no
//     primary URL), ended through the edge, is refused until the op is
//     dead, in words naming join, and the primary holds no such fact.
func TestRealAnEndOfAFactThePrimaryLacksWaitsForItsAdd(t *testing.T) {
	u, srv := startReal(t)
	beta := Device{ID: "beta", Label: "beta", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write", ReadRate: 1e9, WriteRate: 1e9}
	g := newGWAt(t, []Device{beta}, u)
	g.withLedger()
	url, tok := g.http.URL+"/mcp", g.tokens["beta"]
	facts := func(entity string) []any {
		res := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": entity})
		f, _ := res["facts"].([]any)
		return f
	}
	outboxOf := func(p *realpalace.Palace) *outbox.Store {
		ob, err := outbox.Open(filepath.Join(p.Dir, "edge", outbox.FileName), "", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ob.Close() })
		return ob
	}
	opOf := func(m map[string]any) string { id, _ := m["edge"].(map[string]any)["op_id"].(string); return id }

	// Two palaces: A offline (a dead port), B online.
	a, b := realpalace.New(t), realpalace.New(t)
	sa, stopA := serveEdgeStop(t, edgeConfig("http://127.0.0.1:1/mcp", tok, a))
	edgeCall(t, sa, "kg_add", map[string]any{"subject": "svc_e", "predicate": "alerts_to", "object": "pager_1", "valid_from": "2026-12-01"})
	stopA()
	sb, stopB := serveEdgeStop(t, edgeConfig(url, tok, b))
	end := opOf(edgeCall(t, sb, "kg_invalidate", map[string]any{"subject": "svc_e", "predicate": "alerts_to", "object": "pager_1", "ended": "2026-12-06"}))
	obB := outboxOf(b)
	var o outbox.Op
	waitUntil(t, "B's end refused once", func() bool {
		o, _ = obB.GetByID(context.Background(), end)
		return o.Refusals > 0
	})
	stopB()
	if o.State != outbox.Queued || !strings.Contains(string(o.Error), "holds no fact") || len(facts("svc_e")) != 0 {
		t.Fatalf("B's end before A's add: %s %s; primary %v", o.State, o.Error, facts("svc_e"))
	}
	serveEdgeStop(t, edgeConfig(url, tok, a)) // A back online: its add lands
	waitUntil(t, "A's add on the primary", func() bool { return len(facts("svc_e")) == 1 })
	serveEdgeStop(t, edgeConfig(url, tok, b)) // B's next flush
	waitUntil(t, "B's end landed", func() bool {
		obB.ClearBackoff(context.Background())
		o, _ = obB.GetByID(context.Background(), end)
		return o.State == outbox.Done
	})
	if f := facts("svc_e"); len(f) != 1 || !strings.HasPrefix(str(f[0].(map[string]any)["valid_to"]), "2026-12-06") {
		t.Errorf("svc_e on the primary after both palaces flushed: %v; want one fact, ended 2026-12-06", f)
	}

	// The solitary case.
	s := realpalace.New(t)
	solo, stopSolo := serveEdgeStop(t, edgeConfig("", "", s))
	edgeCall(t, solo, "kg_add", map[string]any{"subject": "svc_solo", "predicate": "uses", "object": "cache_9", "valid_from": "2026-10-01"})
	stopSolo()
	ss, _ := serveEdgeStop(t, edgeConfig(url, tok, s))
	soloEnd := opOf(edgeCall(t, ss, "kg_invalidate", map[string]any{"subject": "svc_solo", "predicate": "uses", "object": "cache_9", "ended": "2026-12-06"}))
	obS := outboxOf(s)
	waitUntil(t, "the solitary fact's end dead", func() bool {
		obS.ClearBackoff(context.Background())
		o, _ = obS.GetByID(context.Background(), soloEnd)
		return o.State == outbox.Dead
	})
	if msg := outbox.FailureOf(o.Error).Message; !strings.Contains(msg, "holds no fact") || !strings.Contains(msg, "devbox-config join") || len(facts("svc_solo")) != 0 {
		t.Errorf("the dead end of a fact only this palace has: %q; primary %v", msg, facts("svc_solo"))
	}
}

// edgeConfig is an edge over palace p's real mempalace-mcp, to url with
// token (url "": solitary, no primary).
func edgeConfig(url, token string, p *realpalace.Palace) edge.Config {
	return edge.Config{
		PrimaryURL: url, Token: func() string { return token }, Child: p.MCPCommand(), ChildEnv: p.Env(),
		Palace: p.Dir, Agent: "opencode", CallTimeout: 60 * time.Second, Probe: 10 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	}
}

// serveEdgeStop is serveEdge with a stop: the edge ends (its session
// closed, its child gone) when stop returns, or at the test's end.
func serveEdgeStop(t *testing.T, cfg edge.Config) (*mcp.ClientSession, func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { edge.New(cfg).Serve(ctx, inR, outW); outW.Close(); close(done) }()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "opencode", Version: "0"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			s.Close()
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return s, stop
}

// Against real MemPalace 3.11.0 (edges over real mempalace-mcp palaces,
// the gateway in front of a real serve), two devices supersede one fact
// offline (laptop alice -> bob, ops alice -> carol) and flush, laptop
// first: the primary keeps one current value, bob, and ops's op is done
// with the gateway's held note (attack105 F2: bob and carol were both
// current, and neither op said a word).
func TestRealTwoDevicesSupersedingOneFactLeaveOneCurrentValue(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, []Device{
		{ID: "laptop", Label: "laptop", Read: []string{"*"}, Write: []string{"*"}, KG: "write", ReadRate: 1e9, WriteRate: 1e9},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, ReadRate: 1e9, WriteRate: 1e9},
	}, u)
	g.withLedger()
	url, offline := g.http.URL+"/mcp", "http://127.0.0.1:1/mcp"
	current := func() []string {
		var out []string
		res := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "svc_a", "direction": "outgoing"})
		for _, x := range res["facts"].([]any) {
			if f := x.(map[string]any); f["current"] == true {
				out = append(out, str(f["object"]))
			}
		}
		return out
	}
	laptop, ops := realpalace.New(t), realpalace.New(t)
	s, stop := serveEdgeStop(t, edgeConfig(url, g.tokens["laptop"], laptop))
	edgeCall(t, s, "kg_add", map[string]any{"subject": "svc_a", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"})
	waitUntil(t, "alice on the primary", func() bool { return len(current()) == 1 })
	stop()
	s, stop = serveEdgeStop(t, edgeConfig(offline, g.tokens["laptop"], laptop))
	edgeCall(t, s, "kg_supersede", map[string]any{"subject": "svc_a", "predicate": "owner", "old_object": "alice", "new_object": "bob", "at": "2026-06-01"})
	stop()
	s, stop = serveEdgeStop(t, edgeConfig(offline, g.tokens["ops-0001"], ops))
	op, _ := edgeCall(t, s, "kg_supersede", map[string]any{"subject": "svc_a", "predicate": "owner", "old_object": "alice", "new_object": "carol", "at": "2026-07-01"})["edge"].(map[string]any)["op_id"].(string)
	stop()

	serveEdgeStop(t, edgeConfig(url, g.tokens["laptop"], laptop))
	waitUntil(t, "laptop's supersede on the primary", func() bool { c := current(); return len(c) == 1 && c[0] == "bob" })
	serveEdgeStop(t, edgeConfig(url, g.tokens["ops-0001"], ops))
	ob, err := outbox.Open(filepath.Join(ops.Dir, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	var o outbox.Op
	waitUntil(t, "ops's supersede settled", func() bool {
		o, err = ob.GetByID(context.Background(), op)
		return err == nil && o.State == outbox.Done
	})
	if f := outbox.FailureOf(o.Error); f.Kind != outbox.AlreadyCurrent || !strings.Contains(f.Message, `"carol" was not made current`) {
		t.Errorf("ops's done supersede: %s (want noted %s)", o.Error, outbox.AlreadyCurrent)
	}
	if c := current(); len(c) != 1 || c[0] != "bob" {
		t.Errorf("svc_a's current owners on the primary after both flushed: %v, want bob alone", c)
	}
}

// Against real MemPalace 3.11.0 through real edges, attack112 F1 as the
// tester ran it: offline, laptop files erin and supersedes it with frank;
// desk (not admin) files erin too and supersedes it with gina; laptop
// flushes first. Desk's add reaches a primary where erin is closed and
// frank current: held, not filed again, so desk's supersede is held in
// turn, and frank alone is current; both desk ops are done with the
// gateway's held note, for its agent (before: frank and gina current,
// both ops done with nothing said).
func TestRealAnOfflineAddRacingAnotherDevicesSupersedeLeavesOneCurrentValue(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, []Device{
		{ID: "laptop", Label: "laptop", Read: []string{"*"}, Write: []string{"*"}, KG: "write", ReadRate: 1e9, WriteRate: 1e9},
		{ID: "desk", Label: "desk", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write", ReadRate: 1e9, WriteRate: 1e9},
	}, u)
	g.withLedger()
	g.srv.Now = time.Now // the edges' clocks: an add's made-at is compared with when a replacement landed
	url, offline := g.http.URL+"/mcp", "http://127.0.0.1:1/mcp"
	current := func(subject string) []string {
		var out []string
		res := srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": subject, "direction": "outgoing"})
		for _, x := range res["facts"].([]any) {
			if f := x.(map[string]any); f["current"] == true {
				out = append(out, str(f["object"]))
			}
		}
		return out
	}
	// svc_eps: desk's add dated now, after laptop's supersede was made
	// (attack113 F1: filed beside frank, its valid_from later than his).
	lead := func(s *mcp.ClientSession, subject, to string, dated bool) string {
		add := map[string]any{"subject": subject, "predicate": "lead", "object": "erin"}
		if dated {
			time.Sleep(1100 * time.Millisecond) // a second past laptop's supersede
			add["valid_from"] = time.Now().UTC().Format(time.RFC3339)
		}
		edgeCall(t, s, "kg_add", add)
		op, _ := edgeCall(t, s, "kg_supersede", map[string]any{"subject": subject, "predicate": "lead", "old_object": "erin", "new_object": to})["edge"].(map[string]any)["op_id"].(string)
		return op
	}
	laptop, desk := realpalace.New(t), realpalace.New(t)
	subjects := []string{"svc_delta", "svc_eps"}
	s, stop := serveEdgeStop(t, edgeConfig(offline, g.tokens["laptop"], laptop))
	for _, subj := range subjects {
		lead(s, subj, "frank", false)
	}
	stop()
	s, stop = serveEdgeStop(t, edgeConfig(offline, g.tokens["desk"], desk))
	var deskOps []string
	for _, subj := range subjects {
		deskOps = append(deskOps, lead(s, subj, "gina", subj == "svc_eps"))
	}
	stop()

	serveEdgeStop(t, edgeConfig(url, g.tokens["laptop"], laptop))
	waitUntil(t, "laptop's supersedes on the primary", func() bool {
		c, e := current("svc_delta"), current("svc_eps")
		return len(c) == 1 && c[0] == "frank" && len(e) == 1 && e[0] == "frank"
	})
	serveEdgeStop(t, edgeConfig(url, g.tokens["desk"], desk))
	ob, err := outbox.Open(filepath.Join(desk.Dir, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	waitUntil(t, "desk's ops settled", func() bool {
		n, _, err := ob.Pending(context.Background())
		return err == nil && n == 0
	})
	ops, err := ob.List(context.Background(), 20, outbox.Done)
	if err != nil {
		t.Fatal(err)
	}
	held, got := 0, []string{}
	for _, o := range ops {
		got = append(got, o.Tool+": "+string(o.Error))
		if f := outbox.FailureOf(o.Error); f.Kind == outbox.AlreadyCurrent && strings.Contains(f.Message, `"frank" current`) {
			held++
		} else if slices.Contains(deskOps, o.ID) {
			t.Errorf("desk's supersede: %s, want held naming frank", o.Error)
		}
	}
	if held != 4 {
		t.Errorf("desk's done ops %q: %d held naming frank, want its adds and its supersedes", got, held)
	}
	for _, subj := range subjects {
		if c := current(subj); len(c) != 1 || c[0] != "frank" {
			t.Errorf("%s's current leads on the primary after both flushed: %v, want frank alone", subj, c)
		}
	}
}
