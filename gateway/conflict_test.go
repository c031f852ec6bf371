package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/testbed"
)

// switchable is a way to the gateway that can be cut (the device
// offline: connections refused) and restored on the same address.
// slowReads, when set, delays each get_drawer sent through it (until
// its sender gives up).
type switchable struct {
	t         *testing.T
	addr      string
	to        *url.URL
	srv       *http.Server
	slowReads atomic.Int64 // a time.Duration
}

func newSwitchable(t *testing.T, to string) *switchable {
	t.Helper()
	u, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	sw := &switchable{t: t, addr: "127.0.0.1:0", to: u}
	sw.up()
	t.Cleanup(sw.down)
	return sw
}

func (sw *switchable) url() string { return "http://" + sw.addr + "/mcp" }

func (sw *switchable) up() {
	sw.t.Helper()
	ln, err := net.Listen("tcp", sw.addr)
	if err != nil {
		sw.t.Fatal(err)
	}
	sw.addr = ln.Addr().String()
	proxy := httputil.NewSingleHostReverseProxy(sw.to)
	sw.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(sw.slowReads.Load()); d > 0 && r.Body != nil {
			body, _ := io.ReadAll(r.Body) // a body cut short is the proxy's to refuse
			if bytes.Contains(body, []byte(`get_drawer"`)) {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-r.Context().Done(): // the edge gave up on it: no goroutine outlives the test
					t.Stop()
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	})}
	go sw.srv.Serve(ln) // ends at down's Close
}

func (sw *switchable) down() {
	if sw.srv != nil {
		sw.srv.Close() // closing a server we started: nothing to report
		sw.srv = nil
	}
}

// primaryText is the drawer's text on the primary ("": none).
func primaryText(g *gw, id string) string {
	if d := g.primary.Dump().Drawers[id]; d != nil {
		return d.Content
	}
	return ""
}

// staleEdit is laptop's offline edit of a drawer desk edited since,
// refused as changed on the primary: its dead op o, laptop's edge on
// palace (behind sw), and the drawer id.
type staleEdit struct {
	g      *gw
	sw     *switchable
	laptop *mcp.ClientSession
	palace string
	ob     *outbox.Store
	o      outbox.Op
	id     string
}

func aStaleEdit(t *testing.T, devs []Device) staleEdit {
	t.Helper()
	g := newGW(t, devs)
	g.withLedger()
	sw := newSwitchable(t, g.http.URL)
	palace := filepath.Join(t.TempDir(), "palace")
	laptop := edgeAt(t, sw.url(), g.tokens["laptop-7f3a"], palace)
	id, _ := edgeCall(t, laptop, "add_drawer", map[string]any{"wing": "shared", "room": "c63", "content": "drawer ten: first text"})["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return primaryText(g, id) != "" })

	sw.down()
	queued := edgeCall(t, laptop, "update_drawer", map[string]any{"drawer_id": id, "content": "drawer ten: LAPTOP version"})
	op, _ := queued["edge"].(map[string]any)["op_id"].(string)
	if replication(queued) != "queued" || op == "" {
		t.Fatalf("laptop's offline edit: %v", queued)
	}
	desk := edgeAt(t, g.http.URL+"/mcp", g.tokens["desk-9b21"], filepath.Join(t.TempDir(), "palace"))
	if res := edgeCall(t, desk, "update_drawer", map[string]any{"drawer_id": id, "content": "drawer ten: DESK version"}); res["success"] != true {
		t.Fatalf("desk's online edit: %v", res)
	}
	waitUntil(t, "desk's edit on the primary", func() bool { return primaryText(g, id) == "drawer ten: DESK version" })
	g.advance(1) // the stamps tell desk's edit apart

	sw.up()
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	o := settledOp(t, ob, op, "laptop's edit settled")
	return staleEdit{g: g, sw: sw, laptop: laptop, palace: palace, ob: ob, o: o, id: id}
}

// Dropping laptop's refused edit keeps desk's text, on laptop too: its
// edge gives its palace desk's text (laptop's reads show it), and
// laptop's next edit of the drawer, made from it, lands without a
// conflict. Before, laptop's palace kept its own text and every later
// edit from laptop was refused alike until one was retried, overwriting.
func TestADroppedConflictTakesThePrimarysText(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	if f := outbox.FailureOf(st.o.Error); st.o.State != outbox.Dead || f.Kind != outbox.ChangedOnPrimary {
		t.Fatalf("laptop's stale edit: %s %s", st.o.State, st.o.Error)
	}
	dropped, _, err := st.ob.Drop(context.Background(), st.o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if msg := outbox.FailureOf(dropped.Error).Message; !strings.Contains(msg, outbox.TakesTheirs) {
		t.Errorf("the drop does not say laptop takes the primary's text: %s", msg)
	}
	waitUntil(t, "laptop's palace showing desk's text", func() bool {
		return tookDesk(t, st.laptop, st.id)
	})
	next := edgeCall(t, st.laptop, "update_drawer", map[string]any{"drawer_id": st.id, "content": "drawer ten: LAPTOP builds on DESK"})
	op, _ := next["edge"].(map[string]any)["op_id"].(string)
	o := settledOp(t, st.ob, op, "laptop's next edit settled")
	if o.State != outbox.Done || primaryText(st.g, st.id) != "drawer ten: LAPTOP builds on DESK" {
		t.Fatalf("laptop's edit after the drop: %s %s; the primary holds %q", o.State, o.Error, primaryText(st.g, st.id))
	}
	if notes, err := st.ob.Theirs(context.Background()); err != nil || len(notes) != 0 {
		t.Errorf("the drop's note stays: %v %v", notes, err)
	}
}

// The text laptop's palace takes after the drop is desk's, and laptop's
// reads say so with the primary out of reach too: get_drawer, search and
// list_drawers name desk as its writer, trusted as laptop's trusted set
// says now (desk untrusted once laptop trusts only itself), until
// laptop's own next edit of the drawer (attack70 F3). Before, they
// showed desk's words as laptop's own, trusted (get_drawer's local
// answer with no origin at all).
func TestATakenTextKeepsItsWriter(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	settledNotes(t, st.ob)
	st.g.configure(t, func(c *Config) {
		for i := range c.Devices {
			if c.Devices[i].ID == "laptop-7f3a" {
				c.Devices[i].Trusts = []string{"laptop-7f3a"}
			}
		}
	})
	edgeCall(t, st.laptop, "status", map[string]any{}) // laptop's edge hears its trusted set
	st.sw.down()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"get_drawer", map[string]any{"drawer_id": st.id}},
		{"search", map[string]any{"query": "drawer ten", "wing": "shared"}},
		{"list_drawers", map[string]any{"wing": "shared"}},
		{"check_duplicate", map[string]any{"content": "drawer ten: DESK version", "threshold": 0.5}},
	} {
		rec := recordOf(edgeCall(t, st.laptop, c.tool, c.args), st.id)
		o, _ := rec["origin"].(map[string]any)
		if o["device"] != "desk-9b21" || o["trusted"] != false || o["palace"] != "local" {
			t.Errorf("%s of the taken drawer, primary unreachable: %v (want desk's origin, untrusted, palace local)", c.tool, rec)
		}
	}
	edgeCall(t, st.laptop, "update_drawer", map[string]any{"drawer_id": st.id, "content": "drawer ten: LAPTOP again"})
	if rec := edgeCall(t, st.laptop, "get_drawer", map[string]any{"drawer_id": st.id}); rec["origin"] != nil {
		t.Errorf("get_drawer of laptop's own edit of the taken drawer: %v (want it relayed as the local palace answered: no origin)", rec)
	}
	rec := recordOf(edgeCall(t, st.laptop, "search", map[string]any{"query": "drawer ten", "wing": "shared"}), st.id)
	if o, _ := rec["origin"].(map[string]any); o["device"] != "laptop-7f3a" || o["trusted"] != true {
		t.Errorf("search after laptop's own edit of the taken drawer: %v (want laptop's origin)", rec)
	}
}

// recordOf is the record of drawer id anywhere in an answer (nil: none):
// its drawer_id, or a check_duplicate match's id.
func recordOf(v any, id string) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		if x["drawer_id"] == id || x["id"] == id {
			return x
		}
		for _, e := range x {
			if r := recordOf(e, id); r != nil {
				return r
			}
		}
	case []any:
		for _, e := range x {
			if r := recordOf(e, id); r != nil {
				return r
			}
		}
	}
	return nil
}

// A drop made while no edge runs on the palace (the CLI touches only the
// outbox) is taken by the next edge at its start.
func TestADropWhileNoEdgeRunsIsTakenAtTheNextStart(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	st.laptop.Close() // its edge stops: stdin closed
	waitUntil(t, "laptop's edge stopped (its doorbell gone)", func() bool {
		bells, _ := filepath.Glob(filepath.Join(st.palace, "edge", "doorbell", "*.sock"))
		return len(bells) == 0
	})
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	next := edgeAt(t, st.sw.url(), st.g.tokens["laptop-7f3a"], st.palace)
	waitUntil(t, "the next edge giving laptop's palace desk's text", func() bool {
		return tookDesk(t, next, st.id)
	})
}

// The next edge's take of a drop made while no edge ran comes before it
// answers its first tool call: a session of one get_drawer, of another
// drawer too, ends with the take done, and a read of the drawer shows
// desk's text, not the dropped one (attack68 F1). Before, the first
// reads could show the dropped text (an edit made from them carried
// desk's base once the take ran, and landed over it), and a short
// session ended before the take; and later a get_drawer the fast lane
// relayed to the local palace, once the tools were ready, skipped the
// wait for the take (a CI failure). The calls come once the edge
// answers tools/list, that is once its tools are ready (waitTools), so
// the fast lane takes them (review36 R4: a sleep stood for that).
func TestADropIsTakenBeforeTheNextEdgesFirstAnswer(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	other, _ := edgeCall(t, st.laptop, "add_drawer", map[string]any{"wing": "shared", "room": "c63", "content": "drawer eleven: no drop"})["drawer_id"].(string)
	st.stopLaptop(t)
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	st.sw.slowReads.Store(int64(2 * time.Second)) // the first take's read of the primary ends after the tools are ready (within edgeAt's 3 s call timeout)
	next := edgeAt(t, st.sw.url(), st.g.tokens["laptop-7f3a"], st.palace)
	if _, err := next.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if res := edgeCall(t, next, "get_drawer", map[string]any{"drawer_id": other}); res["content"] != "drawer eleven: no drop" {
		t.Errorf("the next edge's first read, of another drawer: %v", res)
	}
	if notes, err := st.ob.Theirs(context.Background()); err != nil || len(notes) != 0 {
		t.Errorf("the drop's note after the first answer: %v %v (want taken)", notes, err)
	}
	if res := edgeCall(t, next, "get_drawer", map[string]any{"drawer_id": st.id}); res["content"] != "drawer ten: DESK version" {
		t.Errorf("the next edge's read of the drop's drawer: %v (want desk's text)", res)
	}
}

// Reads of a dropped edit's drawer made before its take say so: with
// the primary down at the next edge's start, get_drawer and get_drawers
// answer laptop's local text marked (edge.local: an edit the operator
// dropped, desk's text not taken yet; degraded), and once the primary is
// back they answer desk's text, no read in between unmarked (attack117
// F1). Before, they answered the dropped text as laptop's current one,
// with nothing to say so.
func TestAnUntakenDropIsMarkedUntilThePrimaryAnswers(t *testing.T) {
	t.Parallel()
	st := aDropWhileDown(t)
	next, log := st.loggedEdge(t)
	reads := func() []map[string]any {
		one := edgeCall(t, next, "get_drawer", map[string]any{"drawer_id": st.id})
		many := edgeCall(t, next, "get_drawers", map[string]any{"drawer_ids": []any{st.id}})
		return []map[string]any{one, many}
	}
	for _, res := range reads() {
		mark, _ := res["edge"].(map[string]any)
		local, _ := mark["local"].(string)
		if !strings.Contains(local, st.id+" is an edit the operator dropped (edge outbox drop keeps theirs): the primary's text is not taken yet") || res["degraded"] != true {
			t.Errorf("a read of the dropped edit's drawer, primary down: %v (want it marked: edge.local, degraded)", res)
		}
		if got := recordOf(res, st.id)["content"]; got != "drawer ten: LAPTOP version" {
			t.Errorf("a read of the dropped edit's drawer, primary down, holds %q (want the local text)", got)
		}
	}
	if !strings.Contains(log.String(), "until then its reads ask the primary first, and a local answer of it is marked (edge.local)") {
		t.Errorf("the log does not say reads of the untaken drawer are marked:\n%s", log)
	}
	st.sw.up()
	waitUntil(t, "desk's text read once the primary is back", func() bool {
		desk := true
		for _, res := range reads() {
			mark, _ := res["edge"].(map[string]any)
			if got := recordOf(res, st.id)["content"]; got != "drawer ten: DESK version" {
				desk = false
				if mark["local"] == nil {
					t.Fatalf("a read of the dropped edit's drawer before its take, unmarked: %v", res)
				}
			}
		}
		return desk
	})
}

// edge.not_answered counts only the ids answered "not answered": with
// the primary down, a get_drawers of a dropped edit's drawer (answered
// from the local palace, marked) and a plain local one says 0, and with
// an id neither palace holds beside them, 1 (attack120 F3). Before, the
// dropped edit's drawer counted too, though its slot held its text.
func TestAnUntakenDropAnsweredLocallyIsNotCountedNotAnswered(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	plain, _ := edgeCall(t, st.laptop, "add_drawer", map[string]any{"wing": "shared", "room": "c63", "content": "a plain local drawer"})["drawer_id"].(string)
	st.stopLaptop(t)
	st.sw.down()
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	next, _ := st.loggedEdge(t)
	for _, c := range []struct {
		ids  []any
		want float64
	}{
		{[]any{st.id, plain}, 0},
		{[]any{st.id, "drawer_shared_c63_nowhere0000000000", plain}, 1},
	} {
		res := edgeCall(t, next, "get_drawers", map[string]any{"drawer_ids": c.ids})
		mark, _ := res["edge"].(map[string]any)
		if mark["not_answered"] != c.want || res["degraded"] != true || recordOf(res, st.id)["content"] != "drawer ten: LAPTOP version" {
			t.Errorf("get_drawers %v, primary down: not_answered %v (want %v, the ids answered \"not answered\"): %v", c.ids, mark["not_answered"], c.want, res)
		}
	}
}

// The same with the primary slower than the call timeout at the next
// edge's start: once calls stop waiting for the take (logged, saying
// reads of the drawer are marked until it is taken), a read answers
// desk's text or laptop's marked, never laptop's as its current one.
// Before, it answered laptop's, unmarked, and the log said only that the
// primary was unreachable.
func TestASlowTakeOfADropMarksTheReadsMeanwhile(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	st.stopLaptop(t)
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	st.sw.slowReads.Store(int64(4 * time.Second)) // past loggedEdge's call timeout, 3 s
	next, log := st.loggedEdge(t)
	res := edgeCall(t, next, "get_drawer", map[string]any{"drawer_id": st.id})
	if mark, _ := res["edge"].(map[string]any); res["content"] != "drawer ten: DESK version" && mark["local"] == nil {
		t.Errorf("a read of the dropped edit's drawer, primary slow: %v (want desk's text, or laptop's marked)", res)
	}
	if !strings.Contains(log.String(), "is marked (edge.local)") { // the pass's read of the primary timed out, or the wait for the pass did
		t.Errorf("the log does not say reads of the untaken drawers are marked:\n%s", log)
	}
	st.sw.slowReads.Store(0)
	waitUntil(t, "desk's text read once the primary answers in time", func() bool {
		return edgeCall(t, next, "get_drawer", map[string]any{"drawer_id": st.id})["content"] == "drawer ten: DESK version"
	})
}

// tookDesk reports whether laptop's palace, read through s, holds desk's
// text of drawer id: the edge answers it from the local palace (origin
// palace local), not the primary's that a read asks first until the take.
func tookDesk(t *testing.T, s *mcp.ClientSession, id string) bool {
	t.Helper()
	res := edgeCall(t, s, "get_drawer", map[string]any{"drawer_id": id})
	o, _ := res["origin"].(map[string]any)
	return res["content"] == "drawer ten: DESK version" && o["palace"] == "local"
}

// aDropWhileDown is aStaleEdit with laptop's edge stopped, the primary
// down and laptop's refused edit dropped (edge outbox drop).
func aDropWhileDown(t *testing.T) staleEdit {
	t.Helper()
	st := aStaleEdit(t, devices)
	st.stopLaptop(t)
	st.sw.down()
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	return st
}

// stopLaptop stops laptop's edge.
func (st staleEdit) stopLaptop(t *testing.T) {
	t.Helper()
	st.laptop.Close() // its edge stops: stdin closed
	waitUntil(t, "laptop's edge stopped (its doorbell gone)", func() bool {
		bells, _ := filepath.Glob(filepath.Join(st.palace, "edge", "doorbell", "*.sock"))
		return len(bells) == 0
	})
}

// loggedEdge is another edge of laptop's on its palace, its local
// palace's environment with env, logging to the buffer returned.
func (st staleEdit) loggedEdge(t *testing.T, env ...string) (*mcp.ClientSession, *testbed.SyncBuffer) {
	t.Helper()
	log := &testbed.SyncBuffer{}
	s := serveEdge(t, edge.Config{
		PrimaryURL: st.sw.url(), Token: func() string { return st.g.tokens["laptop-7f3a"] }, Child: []string{testbed.Self(t, fakepalace.ProgramName)},
		ChildEnv: append(append(os.Environ(), "MEMPALACE_PALACE_PATH="+st.palace), env...),
		Palace:   st.palace, Agent: "opencode", CallTimeout: 3 * time.Second, Probe: 10 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return s, log
}

// settledNotes waits until the outbox holds no note of a dropped edit.
func settledNotes(t *testing.T, ob *outbox.Store) {
	t.Helper()
	waitUntil(t, "the drop's note settled", func() bool {
		notes, err := ob.Theirs(context.Background())
		return err == nil && len(notes) == 0
	})
}

// A laptop that trusts only ops keeps its own text when the operator
// drops its edit refused for desk's: the primary's text is from a writer
// it does not trust, which local-first reads would show as laptop's own.
// The drop's message says so. Before, laptop's palace took desk's text.
func TestAnUntrustedTextIsNotTaken(t *testing.T) {
	t.Parallel()
	devs := slices.Clone(devices)
	devs[0].Trusts = []string{"admin-0001"}
	st := aStaleEdit(t, devs)
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	settledNotes(t, st.ob)
	if got := edgeCall(t, st.laptop, "get_drawer", map[string]any{"drawer_id": st.id})["content"]; got != "drawer ten: LAPTOP version" {
		t.Errorf("laptop's palace after the drop holds %q, not its own text", got)
	}
	o, err := st.ob.GetByID(context.Background(), st.o.ID)
	if msg := outbox.FailureOf(o.Error).Message; err != nil || !strings.Contains(msg, "keeps its own text of the drawer: the primary's is from a writer this device does not trust") || strings.Contains(msg, outbox.TakesTheirs) {
		t.Errorf("the dropped op's message: %q %v", msg, err)
	}
}

// A drop whose drawer has since moved to a wing laptop may not read is
// settled: the primary refuses it as not visible, which no retry
// changes. Before, its note was read on the primary after every write.
func TestADropOutOfSightIsSettled(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	if res, rpc, _ := st.g.call(st.g.tokens["desk-9b21"], "update_drawer", map[string]any{"drawer_id": st.id, "wing": "private_desk"}); rpc != nil || res["success"] != true {
		t.Fatalf("desk's move: %v %v", res, rpc)
	}
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	settledNotes(t, st.ob)
}

// A drop seen while laptop's palace answers get_drawer with an error
// (locked) keeps its note: the next edge, whose palace answers, takes
// desk's text. Before, the error answer read as "nothing to take" and the
// note was deleted for good.
func TestADropSeenLockedIsTakenLater(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	st.stopLaptop(t)
	if _, _, err := st.ob.Drop(context.Background(), st.o.ID); err != nil {
		t.Fatal(err)
	}
	locked, log := st.loggedEdge(t, "FAKEPALACE_FAIL_ON=mempalace_get_drawer")
	edgeCall(t, locked, "list_wings", map[string]any{}) // the local palace starts at the first call
	waitUntil(t, "the locked palace's answer logged", func() bool { return strings.Contains(log.String(), "not read in the local palace") })
	locked.Close()
	next := edgeAt(t, st.sw.url(), st.g.tokens["laptop-7f3a"], st.palace)
	waitUntil(t, "the next edge giving laptop's palace desk's text", func() bool {
		return tookDesk(t, next, st.id)
	})
}

// A drop seen while the primary is down is not asked of it again after
// every write, only once it is back, when laptop's palace takes desk's
// text. Before, each write's kick fetched the drawer again, on the
// goroutine that sends the kept deletes.
func TestADropSeenWhileThePrimaryIsDownWaitsForIt(t *testing.T) {
	t.Parallel()
	st := aDropWhileDown(t)
	s, log := st.loggedEdge(t)
	const asked = "not read on the primary"
	waitUntil(t, "the drop's drawer asked of the primary", func() bool { return strings.Contains(log.String(), asked) })
	for i := range 5 {
		edgeCall(t, s, "add_drawer", map[string]any{"wing": "shared", "room": "c63", "content": fmt.Sprintf("a write while the primary is down, %d", i)})
	}
	ops, _ := st.ob.List(context.Background(), 100, outbox.Queued)
	if n := strings.Count(log.String(), asked); n != 1 || len(ops) < 5 {
		t.Errorf("the drop's drawer asked of the primary %d times with %d writes queued, want once", n, len(ops))
	}
	st.sw.up()
	waitUntil(t, "laptop's palace showing desk's text once the primary is back", func() bool {
		return tookDesk(t, s, st.id)
	})
}

// Two devices edit one drawer: laptop offline (queued), desk online
// later. laptop's older edit, flushed after, is refused as changed on the
// primary since it was made, naming desk: the primary keeps desk's text,
// laptop's palace its own, laptop's agent is told at its next session;
// `edge outbox retry` then overwrites (the trash keeps desk's text).
// Before, laptop's flush overwrote desk's newer text without a word
// (outside tester attack63 F4).
func TestAStaleOfflineEditIsRefusedAndRetryOverwrites(t *testing.T) {
	t.Parallel()
	st := aStaleEdit(t, devices)
	g, laptop, sw, palace, ob, o, id := st.g, st.laptop, st.sw, st.palace, st.ob, st.o, st.id
	op, err := o.ID, error(nil)
	f := outbox.FailureOf(o.Error)
	if o.State != outbox.Dead || f.Kind != outbox.ChangedOnPrimary || o.Refusals != 0 {
		t.Fatalf("laptop's stale edit: %s refusals %d %s (want dead at once, %s)", o.State, o.Refusals, o.Error, outbox.ChangedOnPrimary)
	}
	for _, want := range []string{"changed on the primary since this edit", "desk-9b21", "kept in this device's local palace", "edge outbox retry " + o.Short(), "edge outbox drop " + o.Short()} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("the refusal lacks %q: %s", want, f.Message)
		}
	}
	if got := primaryText(g, id); got != "drawer ten: DESK version" {
		t.Fatalf("the primary's text after laptop's stale edit: %q (desk's newer edit overwritten)", got)
	}
	for _, d := range g.kept(t) { // the edit was not sent: the trash drops what it kept for it
		if d.State == trash.StateUnconfirmed {
			t.Errorf("the trash keeps the text of an edit never sent as maybe replaced: delete %d, %s, %s", d.ID, d.Tool, d.State)
		}
	}
	if got := edgeCall(t, laptop, "get_drawer", map[string]any{"drawer_id": id}); got["content"] != "drawer ten: LAPTOP version" {
		t.Errorf("laptop's edit is gone from its palace: %v", got)
	}
	next := edgeAt(t, sw.url(), g.tokens["laptop-7f3a"], palace) // laptop's next session
	if in := next.InitializeResult().Instructions; !strings.Contains(in, "changed on the primary since this edit (desk-9b21") || !strings.Contains(in, "retry "+o.Short()) {
		t.Errorf("the next session start does not tell of the refused edit:\n%s", in)
	}

	if _, err := ob.Retry(context.Background(), o.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the retried edit done", func() bool {
		o, err = ob.GetByID(context.Background(), op)
		return err == nil && o.State == outbox.Done
	})
	if got := primaryText(g, id); got != "drawer ten: LAPTOP version" {
		t.Fatalf("the retry did not overwrite: %q", got)
	}
	replaced := false
	for _, d := range g.kept(t) {
		replaced = replaced || d.Tool == "update_drawer" && d.State == trash.StateDeleted && d.Drawers[0].Content == "drawer ten: DESK version"
	}
	if !replaced {
		t.Errorf("the trash does not keep desk's replaced text: %+v", g.kept(t))
	}
}

// postBased is an update_drawer with an op id and a base in _meta.
func (g *gw) postBased(token string, args map[string]any, opID, base string) map[string]any {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_update_drawer", "arguments": args, "_meta": map[string]any{ledger.MetaKey: opID, origin.BaseKey: base}}})
	_, m := g.post(token, string(b))
	return m
}

// A send whose answer was lost, sent again after another device's edit,
// is answered from the ledger's record, never as a conflict; and a
// primary holding the update's own text (its first send landed, with no
// record to answer from) is success too.
func TestALostAnswersResendIsNoConflict(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	laptop, desk := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"]
	a, _, _ := g.call(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "c63", "content": "first text"})
	id, _ := a["drawer_id"].(string)
	base := origin.Base("first text")
	edit := map[string]any{"drawer_id": id, "content": "laptop's text"}
	opID := strings.Repeat("ab", 32)
	if m := g.postBased(laptop, edit, opID, base); m["error"] != nil {
		t.Fatalf("the first send: %v", m)
	} // its answer lost on the way back
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": "desk's text"}); rpc != nil {
		t.Fatal(rpc)
	}
	if m := g.postBased(laptop, edit, opID, base); m["error"] != nil || !marked(encodeJSON(m), ledger.ReplayedKey) {
		t.Errorf("the resend of a landed op: %v (want the ledger's record)", m)
	}
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": id, "content": "laptop's text"}); rpc != nil {
		t.Fatal(rpc)
	}
	if m := g.postBased(laptop, edit, strings.Repeat("cd", 32), base); m["error"] != nil {
		t.Errorf("an update to the text the primary holds: %v (want success)", m)
	}
	if m := g.postBased(laptop, map[string]any{"drawer_id": id, "content": "stale"}, strings.Repeat("ef", 32), base); m["error"] == nil {
		t.Errorf("a stale update: %v (want refused)", m)
	} else if e := m["error"].(map[string]any); e["code"] != float64(ledger.CodeChangedOnPrimary) {
		t.Errorf("a stale update: %v (want code %d)", e, ledger.CodeChangedOnPrimary)
	}
	if got := primaryText(g, id); got != "laptop's text" {
		t.Errorf("the primary's text: %q", got)
	}
}

// Two devices close one fact: the second end to arrive finds it closed,
// and MemPalace answers it success and changes nothing. The gateway's
// answer says so (already_closed, a note), and the edge keeps the note on
// its done op (edge outbox list --all). Before, the second device was
// answered a plain success, its end date lost without a word (attack63
// F2).
func TestTheSecondEndOfAFactIsToldItWasClosedAlready(t *testing.T) {
	t.Parallel()
	g, s, palace, _ := deskBehindTheGateway(t)
	fact := map[string]any{"subject": "att63svc2", "predicate": "runs_on", "object": "hostA"}
	edgeCall(t, s, "kg_add", map[string]any{"subject": "att63svc2", "predicate": "runs_on", "object": "hostA", "valid_from": "2026-01-01"})
	endOnPrimary := func() string {
		for _, tr := range g.primary.Dump().Triples {
			if tr.Subject == "att63svc2" && tr.ValidTo != nil {
				return *tr.ValidTo
			}
		}
		return ""
	}
	waitUntil(t, "the fact on the primary", func() bool { return len(g.primary.Dump().Triples) > 0 })
	if res, rpc, _ := g.call(g.tokens["admin-0001"], "kg_invalidate", map[string]any{"subject": "att63svc2", "predicate": "runs_on", "object": "hostA", "ended": "2026-06-01"}); rpc != nil || res["already_closed"] != nil {
		t.Fatalf("the first end: %v %v", res, rpc)
	}
	fact["ended"] = "2026-07-01"
	res, rpc, _ := g.call(g.tokens["desk-9b21"], "kg_invalidate", fact)
	if note, _ := res["note"].(string); rpc != nil || res["success"] != true || res["already_closed"] != "2026-06-01" || !strings.Contains(note, "nothing changed: its end stays 2026-06-01, not 2026-07-01") {
		t.Errorf("the second end, through the gateway: %v %v", res, rpc)
	}
	delete(fact, "ended") // MemPalace ends it today: the note names that date, never a bare "not "
	res, rpc, _ = g.call(g.tokens["desk-9b21"], "kg_invalidate", fact)
	if note, _ := res["note"].(string); rpc != nil || res["ended"] == nil || !strings.HasSuffix(note, fmt.Sprintf("its end stays 2026-06-01, not %v", res["ended"])) {
		t.Errorf("the second end without a date: %v %v", res, rpc)
	}
	if got := endOnPrimary(); got != "2026-06-01" {
		t.Errorf("the fact's end on the primary: %q", got)
	}

	fact["ended"] = "2026-08-01"
	op, _ := edgeCall(t, s, "kg_invalidate", fact)["edge"].(map[string]any)["op_id"].(string)
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	var o outbox.Op
	waitUntil(t, "the edge's end settled", func() bool {
		o, err = ob.GetByID(context.Background(), op)
		return err == nil && o.State == outbox.Done
	})
	if f := outbox.FailureOf(o.Error); f.Kind != outbox.AlreadyClosed || !strings.Contains(f.Message, "already closed on the primary (ended 2026-06-01)") {
		t.Errorf("the edge's done op: %s (want noted %s)", o.Error, outbox.AlreadyClosed)
	}
	wantToldClosed(t, g, s, palace, ob, o)
}

// wantToldClosed fails unless the agent hears of the already-closed end o
// on its next tool answer, once, and at the next session start, and
// edge status lists it. Before, only edge outbox list --all and the log
// showed it.
func wantToldClosed(t *testing.T, g *gw, s *mcp.ClientSession, palace string, ob *outbox.Store, o outbox.Op) {
	t.Helper()
	note := toolNotes(t, s)
	for _, want := range []string{"changed nothing on the primary", "kg_invalidate of att63svc2 (op " + o.Short() + ")", "its end stays 2026-06-01, not 2026-08-01", "devbox-config edge status"} {
		if !strings.Contains(note, want) {
			t.Errorf("the next tool answer's note lacks %q:\n%q", want, note)
		}
	}
	if again := toolNotes(t, s); strings.Contains(again, o.Short()) {
		t.Errorf("the already-closed end is told again: %s", again)
	}
	if st, err := ob.Stats(context.Background()); err != nil || len(st.Closed) != 1 || st.Closed[0].ID != o.ID {
		t.Errorf("edge status's ends of facts closed already: %v %v", st.Closed, err)
	}
	in := edgeAt(t, g.http.URL+"/mcp", g.tokens["desk-9b21"], palace).InitializeResult().Instructions
	if !strings.Contains(in, "Facts closed already") || !strings.Contains(in, o.Short()) {
		t.Errorf("the next session's instructions do not tell of the already-closed end:\n%s", in)
	}
}

// settledOp waits until op is done or dead in ob, and is it then.
func settledOp(t *testing.T, ob *outbox.Store, op, what string) outbox.Op {
	t.Helper()
	var o outbox.Op
	waitUntil(t, what, func() bool {
		var err error
		o, err = ob.GetByID(context.Background(), op)
		return err == nil && (o.State == outbox.Dead || o.State == outbox.Done)
	})
	return o
}
