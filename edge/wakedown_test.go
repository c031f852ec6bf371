package edge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
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
			wk: newWake(0), remote: refusingLate{looks: new(atomic.Int32)}}
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
