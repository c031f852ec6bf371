package join

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A primary that stops answering mid-join ends the run: the join does not
// go on to verify what it sent against the primary it just found down
// (before: a verify FAILED line per record, and ~25 s more against a real
// dead primary; attack87 F3). The records left stay queued, as the
// connection failure says, and are counted in one failure with the
// command that lists them, not a FAILED line each (attack89 F2: 55), and
// so are the diary entries queued behind one of them (attack91 F3: a line
// each, "on the same record"); --json has their number.
func TestAJoinWhosePrimaryStoppedDoesNotVerify(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	up := &url.URL{Scheme: "http", Host: pr.srv.Addr()}
	fwd := httputil.NewSingleHostReverseProxy(up)
	var writes atomic.Int32 // after 3 writes, the primary is gone
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) && (bytes.Contains(body, []byte("add_drawer")) || bytes.Contains(body, []byte("diary_write"))) && writes.Add(1) > 3 ||
			writes.Load() > 3 {
			http.Error(w, "upstream unreachable", http.StatusBadGateway)
			return
		}
		r.Body, r.Host = io.NopCloser(bytes.NewReader(body)), up.Host
		fwd.ServeHTTP(w, r)
	}))
	defer front.Close()
	cfg := config(t, p, pr)
	cfg.URL = front.URL + "/mcp"
	rep := run(t, cfg, Options{Stall: time.Second, Verify: All})
	stopped, notTried := false, 0
	for _, f := range rep.Failed {
		switch {
		case f.Kind == "records" && f.Record == "not tried":
			notTried++
			if n, _, _ := strings.Cut(f.Error, ":"); n != strconv.Itoa(rep.NotTried) || rep.NotTried < 2 || !strings.Contains(f.Error, "primary was unreachable") || !strings.Contains(f.Error, "edge outbox list --join") {
				t.Errorf("the records not tried, counted: %s (not_tried %d)", f.Error, rep.NotTried)
			}
		case strings.HasPrefix(f.Error, "not tried"): // also a diary entry behind one not tried (attack91 F3)
			t.Errorf("a line for a record not tried, under the one that counts them: %s %s: %s", f.Kind, f.Record, f.Error)
		case f.Kind == "primary" && strings.Contains(f.Error, "accepted nothing") && strings.Contains(f.Error, "stay queued"):
			stopped = true
		case strings.Contains(f.Error, "verify"):
			t.Errorf("verified against the primary the run found down: %s %s: %s", f.Kind, f.Record, f.Error)
		}
	}
	if notTried != 1 {
		t.Errorf("%d counts of the records not tried, want 1: %+v", notTried, rep.Failed)
	}
	if !stopped || rep.Sampled != 0 || rep.Verified != 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "not verified") {
		t.Fatalf("want the run ended on the primary's connection, nothing verified, and a note saying so: sampled %d, verified %d, notes %q, failed %+v", rep.Sampled, rep.Verified, rep.Notes, rep.Failed)
	}
}
