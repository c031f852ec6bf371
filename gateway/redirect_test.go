package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// An upstream that answers a redirect to another port of its host gets
// no second request: the upstream token never reaches the address it
// names (net/http keeps Authorization across a redirect to the same host
// name). Found while fixing the devbox side of attack61 F5; before, the
// gateway followed it, token and all.
func TestTheUpstreamsRedirectIsNotFollowedWithItsToken(t *testing.T) {
	t.Parallel()
	redirecting, _, carried := testbed.Redirecting(t)
	fake := startFake(t)
	g := newGWAt(t, []Device{devices[0]}, &upstream{name: "redirecting", url: redirecting + "/mcp", palace: fake.palace})
	g.call(g.tokens[devices[0].ID], "search", map[string]any{"query": "q", "wing": "shared"})
	_, rpcErr, code := g.call(g.tokens[devices[0].ID], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "c"})
	if n := carried(); n != 0 {
		t.Fatalf("%d request(s) with the upstream token reached the redirect's target", n)
	}
	// Not applied, and said why: a 502 "answer lost" made every write in
	// doubt (the review of this fix).
	if msg := fmt.Sprint(rpcErr["message"]); code != 503 || !strings.Contains(msg, "not applied") || !strings.Contains(msg, "redirect") {
		t.Fatalf("a write through a redirecting upstream: %d %v", code, rpcErr)
	}
}

// A redirecting upstream's Location is shown as the other redirect
// messages show it: its query (a key, a token) dropped and nothing in it
// that a terminal acts on, in trash restore's error and in the start-up
// probe's log line (the review of b6e776c: both carried the raw header).
func TestTheUpstreamsRedirectShowsItsTargetRedacted(t *testing.T) {
	t.Parallel()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{"http://elsewhere.example/\u202emcp?token=s3cret-in-the-query"}
		w.WriteHeader(http.StatusFound)
	}))
	defer hostile.Close()
	shows := func(what, got string) {
		t.Helper()
		if strings.Contains(got, "s3cret") || strings.Contains(got, "\u202e") || !strings.Contains(got, "elsewhere.example") {
			t.Errorf("%s (want the target without its query or raw controls):\n%s", what, got)
		}
	}
	r := Restorer{Upstream: hostile.URL + "/mcp", Token: func() string { return "tok" }}
	_, err := r.Restore(context.Background(), []string{"1"})
	if err == nil {
		t.Fatal("restore through a redirecting upstream went on")
	}
	shows("restore's error", err.Error())
	g := newGWAt(t, devices, &upstream{url: hostile.URL + "/mcp"})
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	g.srv.ProbeUpstream(context.Background())
	shows("the probe's log", logged.String())
}

// A redirect whose Location does not parse (a control character in it)
// is refused as any redirect is: the device is told "not applied" (503),
// and no message or log line shows the Location's query. Before, net/http
// failed it while parsing the Location, ahead of the gateway's refusal:
// its error quoted the header, token and all, and the device got 502 "may
// have applied it".
func TestAnUnparsableRedirectIsRefusedAsNotAppliedAndShowsNoToken(t *testing.T) {
	t.Parallel()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{"http://x/\t?token=s3cret"}
		w.WriteHeader(http.StatusFound)
	}))
	defer hostile.Close()
	r := Restorer{Upstream: hostile.URL + "/mcp", Token: func() string { return "tok" }}
	_, err := r.Restore(context.Background(), []string{"1"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("restore's error (want the redirect refused, no token): %v", err)
	}
	g := newGWAt(t, []Device{devices[0]}, &upstream{url: hostile.URL + "/mcp", palace: startFake(t).palace})
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	g.srv.ProbeUpstream(context.Background())
	_, rpcErr, code := g.call(g.tokens[devices[0].ID], "add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "c"})
	if msg := fmt.Sprint(rpcErr["message"]); code != 503 || !strings.Contains(msg, "not applied") || strings.Contains(msg, "s3cret") {
		t.Errorf("a write through an upstream whose redirect does not parse: %d %v", code, rpcErr)
	}
	if strings.Contains(logged.String(), "s3cret") || !strings.Contains(logged.String(), "redirect") {
		t.Errorf("the gateway's log (want the redirect said, no token):\n%s", logged.String())
	}
}

// An answer whose Location holds a control character net/http will not
// read as a header at all (\x01) fails in the transport, where its error
// quotes the line: trash restore's error and the start-up probe's log say
// the answer did not read, without the line (its query, a token).
func TestAnUnreadableAnswerIsNotQuotedInRestoreOrTheProbe(t *testing.T) {
	t.Parallel()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{"http://x/\x01?token=s3cret"}
		w.WriteHeader(http.StatusFound)
	}))
	defer hostile.Close()
	r := Restorer{Upstream: hostile.URL + "/mcp", Token: func() string { return "tok" }}
	_, err := r.Restore(context.Background(), []string{"1"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "malformed header") {
		t.Errorf("restore's error (want the answer said unreadable, no token): %v", err)
	}
	g := newGWAt(t, devices, &upstream{url: hostile.URL + "/mcp"})
	var logged testbed.SyncBuffer
	g.srv.Log = slog.New(slog.NewTextHandler(&logged, nil))
	g.srv.ProbeUpstream(context.Background())
	if strings.Contains(logged.String(), "s3cret") || !strings.Contains(logged.String(), "malformed header") {
		t.Errorf("the probe's log (want the answer said unreadable, no token):\n%s", logged.String())
	}
}

// A 3xx with no Location (300, 304) is no redirect the client would
// follow: it is not refused as one "pointed at" the request's own URL
// (the review of refuseRedirects: r.URL.Parse("") is the request's URL).
func TestA3xxWithoutLocationIsNotCalledARedirect(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMultipleChoices, http.StatusNotModified, http.StatusFound} {
		odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		r := Restorer{Upstream: odd.URL + "/mcp", Token: func() string { return "tok" }}
		_, err := r.Restore(context.Background(), []string{"1"})
		odd.Close()
		if err == nil || strings.Contains(err.Error(), "redirect") {
			t.Errorf("restore from an upstream answering %d without a Location: %v (want an error, not a redirect)", code, err)
		}
	}
}
