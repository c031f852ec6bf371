package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// Outside tester attack74 F3: an op a killed edge left in flight, which
// `edge flush` then settled, was reported as "sent 0": read as nothing
// went out. Now the flush says it settled it. (It failed before: "sent 1"
// here, with no word that it had been in flight.)
func TestEdgeFlushSaysItSettledAnOpLeftInFlight(t *testing.T) {
	primary, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	queueOne(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(os.Getenv("MEMPALACE_PALACE_PATH"), "edge", outbox.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// as a process killed mid-send leaves it
	if _, err := db.Exec(`UPDATE ops SET state='inflight', attempts=1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	out := runOK(t, "edge", "flush")
	if !strings.HasPrefix(out, "sent 0, settled 1 left in flight; left: queued 0, inflight 0") {
		t.Errorf("flush of an op left in flight says:\n%s", out)
	}
	if n := len(primary.Dump().Drawers); n != 1 {
		t.Errorf("the primary holds %d drawers, want the op's one", n)
	}
}

// Outside tester attack74 F4: a flush its --timeout ended listed the ops
// it had no time for as "not tried yet", which after a minute's run reads
// as a stuck queue. Now it says the timeout ended it and how to give it
// longer. (It failed before.)
func TestEdgeFlushSaysItsTimeoutEndedIt(t *testing.T) {
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	target, _ := url.Parse(strings.TrimSuffix(srv.URL(), "/mcp"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("slow write")) {
			time.Sleep(700 * time.Millisecond) // past --timeout, within the send's 1 s grace
		}
		r.Body, r.Host = io.NopCloser(bytes.NewReader(body)), target.Host // the primary pins its Host
		proxy.ServeHTTP(w, r)
	}))
	defer slow.Close()
	s := edgeOutbox(t)
	t.Setenv("MEMPALACE_REMOTE_URL", slow.URL+"/mcp")
	for _, content := range []string{"slow write", "the next one"} {
		if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"` + content + `"}`), Wing: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	code, out, errs := runCLI("edge", "flush", "--timeout", "300ms")
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"sent 1; left: queued 1", "--timeout 300ms ran out", "`devbox-config edge flush --timeout 5m` gives it longer", "(queued): not tried before --timeout ran out"} {
		if !strings.Contains(out, want) {
			t.Errorf("flush ended by its timeout lacks %q:\n%s", want, out)
		}
	}
}

// Outside tester attack76 F4: an op a flush had in flight when its
// --timeout (and the send's grace) ran out was listed as "not tried
// before --timeout ran out", which invites a drop and a write by hand of
// what may be on the primary already. Now it says it may have landed and
// the next flush settles it, which that flush does: one drawer. (It
// failed before: "(inflight): not tried before --timeout ran out".)
func TestEdgeFlushSaysAnOpInFlightAtItsTimeoutMayHaveLanded(t *testing.T) {
	primary, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	target, _ := url.Parse(strings.TrimSuffix(srv.URL(), "/mcp"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	landed := make(chan struct{})
	var first atomic.Bool
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body, r.Host = io.NopCloser(bytes.NewReader(body)), target.Host // the primary pins its Host
		if !bytes.Contains(body, []byte(`"content":"slow write"`)) || !first.CompareAndSwap(false, true) {
			proxy.ServeHTTP(w, r)
			return
		}
		defer close(landed)
		time.Sleep(1600 * time.Millisecond) // past --timeout and the send's 1 s grace: the flush gives up on its answer
		// The write lands all the same (the proxy would cancel it with the
		// flush's hang-up, so it is sent as it came).
		req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}))
	defer slow.Close()
	s := edgeOutbox(t)
	t.Setenv("MEMPALACE_REMOTE_URL", slow.URL+"/mcp")
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"slow write"}`), Wing: "w"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// 300 ms: time for a loaded machine to open the outbox and send
	// before --timeout runs out (at 100 ms, CI 124's flush sent nothing,
	// and the wait for the write below hung the package).
	code, out, errs := runCLI("edge", "flush", "--timeout", "300ms")
	if want := "(inflight): in flight when --timeout ran out: may have landed; the next flush settles it"; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want 1 and %q:\n%s%s", code, want, out, errs)
	}
	select {
	case <-landed:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow write never reached the primary")
	}
	if out := runOK(t, "edge", "flush"); !strings.Contains(out, "settled 1 left in flight") || primary.Dump().CountContent("slow write") != 1 {
		t.Errorf("the next flush:\n%s", out)
	}
}

// The timeout a flush suggests reads as an operator types it: 5m, not
// 5m0s, and 10s stays 10s.
func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", time.Hour: "1h", 10 * time.Second: "10s", 90 * time.Second: "1m30s", 300 * time.Millisecond: "300ms", 2*time.Hour + 30*time.Minute: "2h30m"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// Review26 O2: an op in flight when --timeout ran out reads "may have
// landed", but not where more is known of it: another process's lease
// (it sends it) or an op it waits behind. (The lease and the wait were
// replaced by the timeout's words before.)
func TestAFlushsTimeoutKeepsWhatIsKnownOfAnOpLeft(t *testing.T) {
	t.Parallel()
	inflight, queued := outbox.Op{State: outbox.Inflight}, outbox.Op{State: outbox.Queued}
	const landed = "in flight when --timeout ran out: may have landed; the next flush settles it"
	lease, behind := "another edge process holds the flush lease; it sends it", "waits behind 0123abcd (mempalace_add_drawer, queued) on the same object"
	for _, c := range []struct {
		why      string
		o        outbox.Op
		timedOut bool
		want     string
	}{
		{"", inflight, true, landed},
		{lease, inflight, true, lease},
		{behind, inflight, true, behind},
		{"", queued, true, "not tried before --timeout ran out"},
		{"", inflight, false, "not tried yet"},
	} {
		if got := leftWhy(c.why, c.o, c.timedOut); got != c.want {
			t.Errorf("leftWhy(%q, %s, timed out %v) = %q, want %q", c.why, c.o.State, c.timedOut, got, c.want)
		}
	}
}
