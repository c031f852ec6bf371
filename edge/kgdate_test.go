package edge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// kgEnds makes the facts of attack99 F4 as the agent wrote them (a
// supersede and an invalidate naming no date) through h, and answers
// each fact of job_9 as object: from..to.
func kgEnds(t *testing.T, h *harness) {
	t.Helper()
	for _, w := range []struct {
		tool string
		args map[string]any
	}{
		{"kg_add", map[string]any{"subject": "job_9", "predicate": "state", "object": "running", "valid_from": "2020-01-01"}},
		{"kg_supersede", map[string]any{"subject": "job_9", "predicate": "state", "old_object": "running", "new_object": "done"}},
		{"kg_add", map[string]any{"subject": "job_9", "predicate": "host", "object": "h1", "valid_from": "2020-01-01"}},
		{"kg_invalidate", map[string]any{"subject": "job_9", "predicate": "host", "object": "h1"}},
	} {
		if m, _ := h.call(w.tool, w.args); m["success"] != true {
			t.Fatalf("%s: %v", w.tool, m)
		}
	}
}

// factDates is a kg_query answer's facts, each as object: from..to.
func factDates(m map[string]any) map[string]string {
	out := map[string]string{}
	facts, _ := m["facts"].([]any)
	for _, f := range facts {
		fm, _ := f.(map[string]any)
		out[fmt.Sprint(fm["object"])] = fmt.Sprintf("%v..%v", fm["valid_from"], fm["valid_to"])
	}
	return out
}

// localFacts is the local palace's kg_query of entity, asked directly.
func localFacts(t *testing.T, h *harness, entity string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h.edge.localServer.Call(ctx, &mcp.CallToolParams{Name: "mempalace_kg_query", Arguments: map[string]any{"entity": entity}})
	if err != nil {
		t.Fatal(err)
	}
	return factDates(resultJSON(res))
}

// A kg_supersede, or a kg_invalidate without "ended", that reaches the
// primary a day after the agent made it (the primary's clock a day
// ahead stands for a day's outage) is dated there as in the local
// palace, when the agent made it: the edge sends both palaces the
// instant. Before, the primary dated the boundary and the end by its own
// clock at delivery, a day late (attack99 F4).
func TestAKGEndReachingThePrimaryLateIsDatedWhenTheAgentMadeIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryNow: func() time.Time { return time.Now().Add(24 * time.Hour) }})
	kgEnds(t, h)
	h.drained()
	local, primary := localFacts(t, h, "job_9"), factDates(h.onPrimary("kg_query", map[string]any{"entity": "job_9"}))
	if len(local) != 3 || fmt.Sprint(local) != fmt.Sprint(primary) {
		t.Fatalf("job_9's facts: local palace %v, primary %v; want the same dates on both", local, primary)
	}
	if today := time.Now().Format(time.DateOnly); local["h1"] != "2020-01-01.."+today {
		t.Errorf("the invalidated fact: %s, want it ended today (%s), when the agent ended it", local["h1"], today)
	}
}

// The same against real MemPalace 3.11.0: local mempalace-mcp, a serve
// primary the supersede reaches 1.5 s late (its boundary is to the
// second). Before, the primary's boundary was its own, a second or two
// after the local palace's.
func TestRealAKGEndReachingThePrimaryLateIsDatedWhenTheAgentMadeIt(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	t.Parallel()
	srv := realpalace.New(t).Serve(t, testToken)
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: lateLink(t, srv.URL, "mempalace_kg_supersede", 1500*time.Millisecond), timeout: 30 * time.Second})
	kgEnds(t, h)
	waitFor(t, 60*time.Second, "the outbox drained", func() bool {
		n, _, err := h.edge.outbox.Pending(context.Background())
		return err == nil && n == 0
	})
	local, primary := localFacts(t, h, "job_9"), factDates(srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "job_9"}))
	if len(local) != 3 || fmt.Sprint(local) != fmt.Sprint(primary) {
		t.Fatalf("job_9's facts: local palace %v, primary %v; want the same dates on both", local, primary)
	}
}

// lateLink passes every request to target, a request naming tool late
// by delay (a write that reaches the primary after the local palace).
func lateLink(t *testing.T, target, tool string, delay time.Duration) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.URL.Path = r.In.URL.Path }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"`+tool+`"`)) {
			time.Sleep(delay)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// A device the gateway grants --kg read has its knowledge-graph writes
// refused by the edge up front, as the gateway would refuse them: nothing
// in the local palace, nothing queued. Before, each was answered success
// and queued, went dead at the gateway, and meanwhile this device's
// entity-less KG reads were its local palace's (attack99 F7). Granted the
// write, the next one is taken: the refusal asks the gateway again.
func TestAKGWriteWithoutTheKGWriteGrantIsRefusedUpFront(t *testing.T) {
	t.Parallel()
	url, tokens, gw := testGatewayServer(t, func() string { _, srv := startPrimary(t); return srv.URL() }(),
		gateway.Device{ID: "reader-1", Label: "edge-test", Read: []string{"*"}, Write: []string{"wing_rd"}, KG: "read", Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["reader-1"]})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	for tool, args := range map[string]map[string]any{
		"kg_add":        {"subject": "r1", "predicate": "p", "object": "o"},
		"kg_invalidate": {"subject": "r1", "predicate": "p", "object": "o"},
		"kg_supersede":  {"subject": "r1", "predicate": "p", "old_object": "o", "new_object": "o2"},
	} {
		m, res := h.call(tool, args)
		if msg := refusalText(res); !res.IsError || m["success"] == true || !strings.Contains(msg, "refused by the edge") || !strings.Contains(msg, "no knowledge-graph write grant") {
			t.Errorf("%s on a --kg read device: %v", tool, m)
		}
	}
	if ops, err := h.edge.outbox.List(context.Background(), 10); err != nil || len(ops) != 0 {
		t.Errorf("refused KG writes were queued: %d (%v)", len(ops), err)
	}
	if facts := localFacts(t, h, "r1"); len(facts) != 0 {
		t.Errorf("refused KG writes are in the local palace: %v", facts)
	}
	if r, _ := h.call("kg_stats", nil); r["edge"].(map[string]any)["source"] != "primary" {
		t.Errorf("kg_stats after refused KG writes: %v, want the primary's", r)
	}

	c, err := gateway.LoadConfig(gw.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	c.Devices[0].KG = gateway.KGWrite
	if err := c.Save(gw.ConfigFile); err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
	if m, res := h.call("kg_add", map[string]any{"subject": "r1", "predicate": "p", "object": "o"}); res.IsError || m["success"] != true {
		t.Errorf("kg_add once the operator granted the KG write: %v", m)
	}
}
