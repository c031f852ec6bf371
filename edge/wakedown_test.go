package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/mailbox"
)

// refusingLate is a primary whose connect is under way when it is first
// asked, and refused (the breaker open) from its second look on: the
// refusal comes within the wake-up's wait, after its 30 ms.
type refusingLate struct {
	inProcessPrimary
	looks *atomic.Int32
}

func (r refusingLate) Up() bool        { return r.looks.Add(1) == 1 }
func (r refusingLate) Connected() bool { return false }
func (r refusingLate) Device() (deviceinfo.Info, bool) {
	return deviceinfo.Info{}, false
}
func (r refusingLate) State() string {
	if r.looks.Load() > 1 {
		return "down: connection refused"
	}
	return "up"
}

// With the primary refusing, the session start says the view is an
// earlier session's and the primary is not reachable now, also when the
// refusal comes after the wake-up's own wait (its 30 ms) ended; never
// that this session's read is under way and newer asks come as notes,
// which with the primary down cannot come. With no view at all, it says
// the log could not be read, not that asks come as notes. Before, the
// header said which came first, the refusal or the 30 ms (4 session
// starts in 6 the latter, outside tester attack70 F2).
func TestAWakeWithThePrimaryRefusingLateSaysItIsNotReachable(t *testing.T) {
	t.Parallel()
	for _, kept := range []bool{true, false} {
		e := &Edge{cfg: Config{Identity: "opencode@edge-test"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			wk: newWake(0, 0), remote: refusingLate{looks: new(atomic.Int32)}}
		if kept {
			e.wk.view = owedView{At: time.Now().Add(-time.Hour), Asks: []owedAsk{}}
		}
		in := e.wakeInstructions(context.Background())
		if want := map[bool]string{true: "not reachable now", false: "could not be read"}[kept]; !strings.Contains(in, want) || strings.Contains(in, "notes") {
			t.Errorf("kept view %v, the primary refusing after the wait: the session start says\n%s", kept, in)
		}
	}
}

// heldThenRefused is a primary that holds every connection it accepts
// until hold has passed, then closes them and refuses from then on.
func heldThenRefused(t *testing.T, hold time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed: from then on, connections are refused
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	stop := time.AfterFunc(hold, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	t.Cleanup(func() { stop.Stop(); ln.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// The same through the edge: a primary whose refusal comes 300 ms after
// the edge connects (well past the 30 ms wake-up wait), behind a kept
// view with an ask and one with none.
func TestAWakeBehindAPrimaryThatRefusesLate(t *testing.T) {
	t.Parallel()
	for _, owed := range []bool{true, false} {
		_, srv := startPrimary(t)
		palace := t.TempDir() + "/palace"
		if owed {
			askVia(t, srv.URL(), testToken, "pi@laptop", "opencode@edge-test", "kept from the last session")
		}
		keptSession(t, palace, srv.URL())
		h := start(t, harnessOpts{palace: palace, primaryURL: heldThenRefused(t, 300*time.Millisecond)})
		if in := instructionsOf(h); !strings.Contains(in, "read by an earlier session: the primary is not reachable now") || strings.Contains(in, "notes") {
			t.Errorf("owed %v: the session start behind a primary refusing late says\n%s", owed, in)
		}
	}
}

// failedBehindGateway is a gateway whose primary failed: it answered the
// connect with 503 and its device header, which the edge has read, and
// the breaker opens from the third look on (the failure is being taken
// in meanwhile).
type failedBehindGateway struct {
	inProcessPrimary
	looks *atomic.Int32
}

func (r failedBehindGateway) Up() bool        { return r.looks.Add(1) < 3 }
func (r failedBehindGateway) Connected() bool { return false }
func (r failedBehindGateway) LastStatus() int { return 503 }
func (r failedBehindGateway) Device() (deviceinfo.Info, bool) {
	return deviceinfo.Info{ID: "desk-9b21", Label: "edge-test", Agents: []string{"opencode@edge-test"}}, true
}
func (r failedBehindGateway) State() string {
	if r.looks.Load() >= 3 {
		return "down: the gateway answered, but the primary behind it failed: upstream unreachable: not sent"
	}
	return "up"
}

// A gateway whose primary failed answers at once with 503, its device
// header on it: the header heard is no answer of the primary, so the
// session start waits for the failure to open the breaker and says the
// primary is not reachable now, never that this session's read is under
// way with newer asks to come as notes, which cannot come. Before, the
// header on the 503 ended the wait before the breaker opened (the first
// session after each outage, 3 in 3, outside tester attack93 F4).
func TestAWakeBehindAGatewayAnswering503SaysThePrimaryIsNotReachable(t *testing.T) {
	t.Parallel()
	e := &Edge{cfg: Config{Identity: "opencode@edge-test"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		wk: newWake(0, 0), remote: failedBehindGateway{looks: new(atomic.Int32)}}
	e.wk.view = owedView{At: time.Now().Add(-time.Hour), Asks: []owedAsk{}}
	if in := e.wakeInstructions(context.Background()); !strings.Contains(in, "not reachable now") || strings.Contains(in, "notes") {
		t.Errorf("the session start behind a gateway answering 503 says\n%s", in)
	}
}

// Two sessions of one agent on one devbox, the primary down: an ask
// session B answers (its reply queued) leaves the view kept in the outbox
// at once, and session A's mempalace_mailbox, answering from the kept
// view, no longer offers it. Before, A answered from its own copy, read
// at its start, and offered the ask B had answered (outside tester,
// attack93 F5).
func TestAKeptViewIsReadAgainForEachAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	session := func() *Edge {
		ob, err := outbox.Open(path, "desk-9b21", "edge-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ob.Close() })
		e := &Edge{cfg: Config{Identity: "opencode@edge-test"}, log: slog.New(slog.DiscardHandler), wk: newWake(0, 0), outbox: ob}
		e.loadOwed(ctx)
		return e
	}
	first := session()
	first.wk.view = owedView{At: time.Now().Add(-time.Minute), Asks: []owedAsk{
		{ID: "evt_a", Line: "evt_a: task.request from pi@laptop: shared-c", Stream: "devbox", Sender: "pi@laptop"},
		{ID: "evt_b", Line: "evt_b: task.request from pi@laptop: still owed", Stream: "devbox", Sender: "pi@laptop"},
	}}
	first.keepView(ctx)
	a, b := session(), session()
	b.answered(ctx, newCall(&mcp.CallToolParams{Name: "mempalace_event_ack", Arguments: map[string]any{"event_id": "evt_a", "from_agent": "opencode@edge-test", "status": "applied"}}))
	kept := a.keptView(ctx, "", 0)
	if got := fmt.Sprint(kept["asks"]); strings.Contains(got, "evt_a") || !strings.Contains(got, "evt_b") {
		t.Errorf("session A's kept view after session B answered evt_a: %v", got)
	}
}

// downSource is a primary the mailbox cannot read.
type downSource struct{}

func (downSource) EventList(context.Context, map[string]any) (json.RawMessage, error) {
	return nil, errors.New("primary down")
}

// An ask this session answers stays answered in a mailbox answer from
// the kept view while the primary is down, whatever the order: the
// answer read the kept view before this session's reply was kept there
// (its keepView waits behind another), and a read of the log that began
// after the reply failed. Before, the kept view, as old as the session's
// own (the same at), was taken as it was: the answer listed the ask
// again, and the reply's keepView kept it again (review31 F3).
func TestAKeptViewDoesNotTakeBackAnAskThisSessionAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ob, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "desk-9b21", "edge-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	e := &Edge{cfg: Config{Identity: "opencode@edge-test"}, log: slog.New(slog.DiscardHandler), wk: newWake(0, 0), outbox: ob,
		box: &mailbox.Mailbox{Src: downSource{}}}
	e.wk.view = owedView{At: time.Now().Add(-time.Minute), Asks: []owedAsk{
		{ID: "evt_a", Line: "evt_a: task.request from pi@laptop: answered", Stream: "devbox", Sender: "pi@laptop"},
		{ID: "evt_b", Line: "evt_b: task.request from pi@laptop: still owed", Stream: "devbox", Sender: "pi@laptop"},
	}}
	e.keepView(ctx)
	e.wk.keep.Lock() // another keepView under way: the reply's waits
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		e.answered(ctx, newCall(&mcp.CallToolParams{Name: "mempalace_event_ack", Arguments: map[string]any{"event_id": "evt_a", "from_agent": "opencode@edge-test", "status": "applied"}}))
	}()
	for cleared := false; !cleared; runtime.Gosched() { // until the reply took evt_a out of the view in memory
		e.wk.mu.Lock()
		cleared = len(e.wk.view.Asks) == 1
		e.wk.mu.Unlock()
	}
	e.refreshOwed(ctx) // the next read, begun after the reply: the primary is down
	kept := e.keptView(ctx, "", 0)
	e.wk.keep.Unlock()
	<-replied
	if got := fmt.Sprint(kept["asks"]); strings.Contains(got, "evt_a") || !strings.Contains(got, "evt_b") {
		t.Errorf("the mailbox answer from the kept view after this session answered evt_a: %v", got)
	}
	if v, _ := e.readKept(ctx); len(v.Asks) != 1 || v.Asks[0].ID != "evt_b" {
		t.Errorf("the view kept for the next session after this session answered evt_a: %v", v.Asks)
	}
}

// attack95 F4: a real gateway whose primary stopped answers the client's
// discovery request (server/discover, which the gateway answers itself)
// 200 with its device header, and the initialize that follows 503. The
// 200 is no answer of the primary: the session start still waits for the
// 503 to open the breaker and says the primary is not reachable now.
// Before, the 200 ended the wait (about half the sessions of a real
// gateway said "newer asks come as notes"); here the 503 comes 100 ms
// later, so it did every time.
func TestAWakeBehindAGatewayAnsweringDiscovery200AndInitialize503(t *testing.T) {
	t.Parallel()
	header := deviceinfo.Info{ID: "desk-9b21", Label: "edge-test", Agents: []string{"opencode@edge-test"}}.HeaderValue()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set(deviceinfo.Header, header)
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || !bytes.Contains(body, []byte(`"initialize"`)) {
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Unknown method"}}`))
			return
		}
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"upstream unreachable: not sent"}}`))
	}))
	defer srv.Close()
	p := NewPrimary(srv.URL+"/mcp", func() string { return "tok" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Minute, Quiet: true})
	defer p.Close()
	e := &Edge{cfg: Config{Identity: "opencode@edge-test"}, log: slog.New(slog.DiscardHandler), wk: newWake(0, 0), remote: p}
	e.wk.view = owedView{At: time.Now().Add(-time.Hour), Asks: []owedAsk{{ID: "evt_a", Line: "evt_a: task.request from pi@laptop: x", Sender: "pi@laptop"}}}
	go p.Call(context.Background(), &mcp.CallToolParams{Name: "mempalace_event_list"}, false) // the first read
	if in := e.wakeInstructions(context.Background()); !strings.Contains(in, "not reachable now") || strings.Contains(in, "notes") {
		t.Errorf("the session start behind a gateway answering discovery 200 and initialize 503 says\n%s", in)
	}
}
