package join

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary that hangs mid-join (it takes the connection and never
// answers: a SIGSTOPped gateway), after it took some of the records, ends
// the run: what it did not send is counted not tried. How long it waits
// is TestAJoinWhosePrimaryHangsMidRunGivesUpWithinTheStall's.
func TestAJoinWhosePrimaryHangsMidRunGivesUp(t *testing.T) {
	t.Parallel()
	rep, _ := hungMidRun(t, 3*time.Second)
	if rep.NotTried == 0 {
		t.Errorf("no record counted not tried: %+v", rep.Failed)
	}
}

// That join ends within the stall and a call timeout or two of the hang,
// as operator.md says: the send the hang cut, settled unanswered, is not
// progress that restarts the stall (attack98 F4: 52 s after the hang for
// a 30 s stall and a 2 s call timeout). A wall-clock bound, so the
// integration tier's, with a stall long enough that load (4.4 s seen for
// a 3 s stall under -race) stays well apart from a second stall.
func TestAJoinWhosePrimaryHangsMidRunGivesUpWithinTheStall(t *testing.T) {
	testbed.Integration(t, "waits out a 10 s stall: a wall-clock bound")
	t.Parallel()
	const stall = 10 * time.Second
	rep, took := hungMidRun(t, stall)
	if want := stall*3/2 + 2*midRunTimeout; took > want {
		t.Errorf("the join ended %.1f s after the primary hung, want within one stall and a call timeout or two (%.1f s, with slack for a loaded machine; two stalls are %.0f s)", took.Seconds(), want.Seconds(), (2 * stall).Seconds())
	}
	if rep.NotTried == 0 {
		t.Errorf("no record counted not tried: %+v", rep.Failed)
	}
}

// midRunTimeout is hungMidRun's call timeout.
const midRunTimeout = 300 * time.Millisecond

// hungMidRun joins 20 drawers to a primary that hangs at the 4th write,
// with stall; it returns the report and how long after the hang it ended.
func hungMidRun(t *testing.T, stall time.Duration) (Report, time.Duration) {
	p, pr := newPalace(t), newPrimary(t)
	for i := range 20 {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("note %d", i)})
	}
	p.save(t)
	up := &url.URL{Scheme: "http", Host: pr.srv.Addr()}
	fwd := httputil.NewSingleHostReverseProxy(up)
	var writes atomic.Int32
	var hungAt atomic.Pointer[time.Time]
	release := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte("add_drawer")) && writes.Add(1) == 4 {
			now := time.Now()
			hungAt.Store(&now)
		}
		if hungAt.Load() != nil {
			select { // accept, and never answer
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		r.Body, r.Host = io.NopCloser(bytes.NewReader(body)), up.Host
		fwd.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Cleanup(func() { close(release) })
	cfg := config(t, p, pr)
	cfg.URL, cfg.Timeout = front.URL+"/mcp", midRunTimeout
	rep := run(t, cfg, Options{Stall: stall})
	ended := time.Now()
	if hungAt.Load() == nil {
		t.Fatalf("the primary never hung: the join sent %d writes", writes.Load())
	}
	return rep, ended.Sub(*hungAt.Load())
}
