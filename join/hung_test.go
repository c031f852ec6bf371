package join

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
)

// A join against a primary that hangs (it takes the connection and never
// answers: a SIGSTOPped gateway), after one whose writes it refused, gives
// up once: one line says the primary accepted nothing. What it did not try
// says so, and is counted: the records an earlier run saw refused and this
// one requeued, not tried now, are not reported with that earlier refusal
// as if refused now, and the diary entries behind one of them are counted
// with it (attack94 F2: not_tried 0, the head "not sent yet (queued):
// refused"). How long it waits is TestAJoinAgainstAHungPrimaryWaitsOneStall's.
func TestAJoinAgainstAHungPrimaryGivesUpOnceAndCountsWhatItDidNotTry(t *testing.T) {
	t.Parallel()
	rep, _ := hungAfterRefusals(t, 3*time.Second)
	counted, gaveUp := "", 0
	for _, f := range rep.Failed {
		switch {
		case f.Kind == "records" && f.Record == "not tried":
			counted = f.Error
		case f.Kind == "primary" && f.Record == "connection":
			gaveUp++
		case strings.Contains(f.Error, "refused"):
			t.Errorf("an earlier run's refusal, as if this run's: %s %s: %s", f.Kind, f.Record, f.Error)
		default: // one not tried for the run's reason: counted, not a line each
			t.Errorf("a line of its own: %s %s: %s", f.Kind, f.Record, f.Error)
		}
	}
	if gaveUp != 1 {
		t.Errorf("want one line saying the primary accepted nothing, got %d: %+v", gaveUp, rep.Failed)
	}
	if rep.NotTried != 5 || !strings.HasPrefix(counted, "5: the primary was unreachable") {
		t.Errorf("want the 5 records not tried counted, the primary unreachable: not_tried %d, %q; failed %+v", rep.NotTried, counted, rep.Failed)
	}
}

// That join waits the stall once, not one stall in the look-ups of the
// refused records and another in the drain (attack94 F3: 55-67 s for the
// documented 30). A wall-clock bound, so the integration tier's, with a
// stall long enough that load (4.5 s seen for a 3 s stall under -short on
// two busy cores) stays well apart from a second stall.
func TestAJoinAgainstAHungPrimaryWaitsOneStall(t *testing.T) {
	testbed.Integration(t, "waits out a 10 s stall: a wall-clock bound")
	t.Parallel()
	const stall = 10 * time.Second
	rep, timeout := hungAfterRefusals(t, stall)
	// Before: a stall in the look-ups, and another in the drain (its
	// clock restarted by the refused ops it found settled): 2 stalls.
	if took, bound := rep.Seconds["queue"]+rep.Seconds["send"], (stall*3/2 + 5*timeout).Seconds(); took > bound {
		t.Errorf("the join waited %.1f s for a primary that accepts nothing, want the stall (%s) and a few call timeouts (%s), once (bound %.1f s; two stalls are %.0f s)", took, stall, timeout, bound, (2 * stall).Seconds())
	}
}

// hungAfterRefusals joins a palace of 3 diary entries and 2 drawers a
// first join saw refused, again with the primary hung, and stall; it
// returns the second run's report and its call timeout.
func hungAfterRefusals(t *testing.T, stall time.Duration) (Report, time.Duration) {
	pr, gw, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, KG: "write"}})
	up, err := url.Parse(gw)
	if err != nil {
		t.Fatal(err)
	}
	fwd := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: up.Scheme, Host: up.Host})
	var hung atomic.Bool
	release := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			select { // accept, and never answer
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		r.Host = up.Host
		fwd.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Cleanup(func() { close(release) })
	p := newPalace(t)
	for i := range 3 {
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": fmt.Sprintf("entry %d", i)})
	}
	for i := range 2 {
		p.do(t, "add_drawer", map[string]any{"wing": "other", "room": "notes", "content": fmt.Sprintf("not writable %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = front.URL+up.Path, func() string { return tokens["desk-9b21"] }
	if rep := run(t, c, Options{}); rep.NotTried != 0 || len(rep.Failed) != 5 {
		t.Fatalf("the first join, its writes refused: not tried %d, failed %+v", rep.NotTried, rep.Failed)
	}
	hung.Store(true)
	c.Timeout = 300 * time.Millisecond
	return run(t, c, Options{Stall: stall}), c.Timeout
}

// flipWriter is a progress writer that calls flip at the at'th write
// naming on: a primary that comes back at a chosen point of a phase.
type flipWriter struct {
	on   string
	n    *int
	at   int
	flip func()
}

func (w flipWriter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), w.on) {
		if *w.n++; *w.n == w.at {
			w.flip()
		}
	}
	return len(b), nil
}

// A primary that hangs while a join looks up the drawers an earlier run
// saw refused, and is back by the drain, gets the rest sent (review30 F2:
// the drain gave up at its first pass, its breaker still open): the diary
// entry refused again is reported with its refusal and why, not "not
// tried"; the drawers, not sent without their look-up, are counted not
// tried.
func TestAPrimaryBackAfterHangingThroughTheLookUpsGetsTheRestSent(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 10 s stall: the integration tier")
	}
	t.Parallel()
	rep := hungThroughLookUps(t, nil)
	refused := 0
	for _, f := range rep.Failed {
		switch {
		case f.Kind == Diaries && strings.Contains(f.Error, "the primary refused it: refused: JSON-RPC error -31003"):
			refused++
		case f.Kind == "records" && f.Record == "not tried":
		default:
			t.Errorf("failed: %s %s: %s", f.Kind, f.Record, f.Error)
		}
	}
	if refused != 1 || rep.NotTried != 2 {
		t.Errorf("want the diary entry sent and refused again, the 2 drawers not tried: refused %d, not_tried %d", refused, rep.NotTried)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "refuses this device's 1 diaries") }) {
		t.Errorf("no note says why the diary entry is refused: %q", rep.Notes)
	}
}

// Refused drawers an operator sends again (edge outbox retry --join)
// while a join's look-up of them finds the primary hung are sent by its
// drain once the primary is back: refused again, they are reported with
// that refusal and the grant that lets them through, not "not tried: the
// primary was unreachable" (review30 F1).
func TestDrawersRetriedWhileTheLookUpFoundThePrimaryHungAreReportedAsTheDrainFoundThem(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 10 s stall: the integration tier")
	}
	t.Parallel()
	rep := hungThroughLookUps(t, func(s *outbox.Store) {
		ops, err := s.List(context.Background(), 100, outbox.Dead)
		for _, op := range ops {
			if op.Tool == "mempalace_add_drawer" && err == nil {
				_, err = s.Retry(context.Background(), op.ID)
			}
		}
		if err != nil {
			t.Error(err)
		}
	})
	refused := 0
	for _, f := range rep.Failed {
		if strings.Contains(f.Error, "the primary refused it: refused: JSON-RPC error -31003") {
			refused++
		} else {
			t.Errorf("failed: %s %s: %s", f.Kind, f.Record, f.Error)
		}
	}
	if refused != 3 || rep.NotTried != 0 {
		t.Errorf("want the 2 drawers and the diary entry refused again, none not tried: refused %d, not_tried %d", refused, rep.NotTried)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "gateway device set desk-9b21 --write") }) {
		t.Errorf("no note names the grant that lets the drawers through: %q", rep.Notes)
	}
}

// hungThroughLookUps joins a palace whose 2 drawers and diary entry a
// first join saw refused, again with the primary hung until the look-ups
// end; then during (if any) acts on the join outbox, and the primary is
// back.
func hungThroughLookUps(t *testing.T, during func(*outbox.Store)) Report {
	pr, gw, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, KG: "write"}})
	up, err := url.Parse(gw)
	if err != nil {
		t.Fatal(err)
	}
	fwd := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: up.Scheme, Host: up.Host})
	var hung atomic.Bool
	release := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		r.Host = up.Host
		fwd.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Cleanup(func() { close(release) })
	p := newPalace(t)
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "entry 0"})
	for i := range 2 {
		p.do(t, "add_drawer", map[string]any{"wing": "other", "room": "notes", "content": fmt.Sprintf("not writable %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = front.URL+up.Path, func() string { return tokens["desk-9b21"] }
	if rep := run(t, c, Options{}); rep.NotTried != 0 || len(rep.Failed) != 3 {
		t.Fatalf("the first join, its writes refused: not tried %d, failed %+v", rep.NotTried, rep.Failed)
	}
	hung.Store(true)
	c.Timeout = 300 * time.Millisecond
	back := func() {
		if during != nil {
			s, err := outbox.Open(filepath.Join(p.dir, "edge", OutboxFile(Target(c.URL))), "desk-9b21", "lab")
			if err != nil {
				t.Error(err)
			} else {
				during(s)
				s.Close()
			}
		}
		hung.Store(false)
	}
	// The look-up phase's end draws the third line.
	pg := &Progress{W: flipWriter{on: "looking up", n: new(int), at: 3, flip: back}, Every: time.Nanosecond}
	rep := run(t, c, Options{Stall: 10 * time.Second, Progress: pg}) // 10 s: a loaded machine answered nothing for 3 s once
	if hung.Load() {
		t.Fatal("the primary was never back: the test did not reach the drain")
	}
	return rep
}
