package edge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// memPrimary is a primary held in memory only: the 510 events a test
// here appends do not each rewrite its whole state file.
func memPrimary(t *testing.T) (*fakepalace.Palace, *fakepalace.HTTPServer) {
	t.Helper()
	return testbed.Primary(t, fakepalace.Options{}, fakepalace.HTTPOptions{Token: testToken})
}

// appendDirect appends an event to the double pl in process (fast: a
// log longer than a page in well under a second); its id.
func appendDirect(t testing.TB, pl *fakepalace.Palace, args map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_event_append", "arguments": args}})
	out, err := pl.Handle(b)
	if err != nil {
		t.Fatal(err)
	}
	id := gjson.Get(gjson.GetBytes(out, "result.content.0.text").String(), "event.id").String()
	if id == "" {
		t.Fatalf("event_append: %s", out)
	}
	return id
}

// Once the log the edge reads holds more than a page (500) of events to
// its agent, the session start still tells the asks owed, the newest
// included. Before, the edge's first read ran before it had listed the
// primary's tools, so it sent no order=asc; the primary listed newest
// first, the pager refused a long log listed so, and the view never
// formed (outside tester, attack31 p13: nothing told, a DEBUG line only).
func TestTheWakeViewReadsALogLongerThanAPage(t *testing.T) {
	t.Parallel()
	pl, srv := memPrimary(t)
	ask := func(body string) string {
		return appendDirect(t, pl, map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": "opencode@edge-test", "status": "open", "body": body})
	}
	first := ask("the first ask")
	for i := range 510 {
		appendDirect(t, pl, map[string]any{"type": "note", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": "*", "body": fmt.Sprint("broadcast ", i)})
	}
	last := ask("the last ask")
	h := start(t, harnessOpts{primaryURL: srv.URL(), wakeWait: 10 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, "owes 2 asks") || !strings.Contains(in, first) || !strings.Contains(in, last) {
		t.Errorf("instructions with %d events to the agent:\n%s", 512, in)
	}
}

// refusingListProxy stands in front of url and passes every request on
// but event_list's, which it answers with a refusal: the primary is up
// and the log cannot be read.
func refusingListProxy(t *testing.T, url string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), "mempalace_event_list") {
			passOn(w, r, url, body, nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"{\"error\": \"database is locked\"}"}]}}`, gjson.GetBytes(body, "id").Raw)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// A session start whose read of the log failed, the primary up, says
// so, and the edge logs it at WARN: a view kept from an earlier read is
// told as not fresh, and with none nothing reads as "nothing owed".
// Before, the failure was a DEBUG line, the kept view was told with its
// old "as of" as if it were current (an ask answered since told again,
// a new one never), and with no view the instructions were empty
// (outside tester, attack31 p13).
func TestAWakeViewTheLogCouldNotRefreshSaysSo(t *testing.T) {
	t.Parallel()
	srv, palace, id := toldOnce(t)
	proxy := refusingListProxy(t, srv.URL())
	next := start(t, harnessOpts{palace: palace, primaryURL: proxy, wakeWait: 10 * time.Second})
	if in := instructionsOf(next); !strings.Contains(in, id) || !strings.Contains(in, "could not be read") {
		t.Errorf("the kept view is told as fresh though the log could not be read:\n%s", in)
	}
	if !strings.Contains(next.logs.String(), "level=WARN msg=\"owed asks not refreshed") {
		t.Errorf("the failed read is not logged at WARN:\n%s", next.logs.String())
	}
	fresh := start(t, harnessOpts{primaryURL: proxy, wakeWait: 10 * time.Second})
	if in := instructionsOf(fresh); !strings.Contains(in, "could not be read") || !strings.Contains(in, "mempalace_mailbox") {
		t.Errorf("no view and the log unreadable, the session start says nothing:\n%q", in)
	}
}

// Against real MemPalace 3.11.0 serve behind the gateway: a device that
// withholds what it does not trust (desk trusts ops) with more than a
// page (510) of asks to its agent from unknown senders between ops's
// two asks is told both at session start, and its mailbox lists both.
// Before, the session start told nothing (no order=asc, attack31 p13)
// and the gateway's page of 500 held ask A and untrusted_withheld 499,
// which the mailbox took for the log's end (attack31 p16).
func TestRealTheWakeViewAndTheMailboxReadPastAFlood(t *testing.T) {
	srv := realpalace.New(t).Serve(t, testToken)
	url, tokens := testGateway(t, srv.URL,
		gateway.Device{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@ops"}},
		gateway.Device{ID: "desk-9b21", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}, Trusts: []string{"ops-0001"}, Untrusted: gateway.UntrustedWithhold})
	a := askVia(t, url, tokens["ops-0001"], "pi@ops", "opencode@edge-test", "ask A")
	for i := range 510 {
		if r, err := srv.Call("mempalace_event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "codex@mal", "to_agent": "opencode@edge-test", "status": "open", "body": fmt.Sprint("flood ", i)}); err != nil || r["success"] != true {
			t.Fatalf("event_append: %v %v", r, err)
		}
	}
	b := askVia(t, url, tokens["ops-0001"], "pi@ops", "opencode@edge-test", "ask B")
	h := start(t, harnessOpts{primaryURL: url, token: tokens["desk-9b21"], wakeWait: 20 * time.Second, timeout: 30 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, "owes 2 asks") || !strings.Contains(in, a) || !strings.Contains(in, b) {
		t.Errorf("instructions:\n%s", in)
	}
	m, _ := h.call("mailbox", map[string]any{})
	var owed []string
	items, _ := m["owed"].([]any)
	for _, it := range items {
		owed = append(owed, it.(map[string]any)["id"].(string))
	}
	if fmt.Sprint(owed) != fmt.Sprint([]string{a, b}) {
		t.Errorf("mailbox owes %v, want [%s %s]", owed, a, b)
	}
}

// The wake-up view holds every owed ask from a trusted sender, however
// many untrusted asks come before it: more than 500 owed in all, the
// trusted ask after them is told. Before, the view was made from the
// oldest 500 owed asks, then cut to the trusted ones, and a trusted ask
// past them was never told (outside tester, attack31 p13: 520 asks from
// mal, then ops's).
func TestTheWakeViewHoldsATrustedAskPastFiveHundredOwed(t *testing.T) {
	t.Parallel()
	pl, srv := memPrimary(t)
	url, tokens := testGateway(t, srv.URL(),
		gateway.Device{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@ops"}},
		gateway.Device{ID: "desk-9b21", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}, Trusts: []string{"ops-0001"}})
	a := askVia(t, url, tokens["ops-0001"], "pi@ops", "opencode@edge-test", "ask A")
	for i := range 510 {
		appendDirect(t, pl, map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "codex@mal", "to_agent": "opencode@edge-test", "status": "open", "body": fmt.Sprint("flood ", i)})
	}
	b := askVia(t, url, tokens["ops-0001"], "pi@ops", "opencode@edge-test", "ask B")
	h := start(t, harnessOpts{primaryURL: url, token: tokens["desk-9b21"], wakeWait: 10 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, "owes 2 asks") || !strings.Contains(in, a) || !strings.Contains(in, b) {
		t.Errorf("instructions:\n%s", in)
	}
}

// secondPageProxy stands in front of url and passes every request on;
// an event_list asking for a page after the first (since_event_id) is
// announced on reached, then held until release is closed: a read of a
// log longer than a page that began before whatever the test does next
// and ends after it.
func secondPageProxy(t *testing.T, url string) (proxy string, reached <-chan struct{}, release chan struct{}) {
	t.Helper()
	at, rel := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "mempalace_event_list") && strings.Contains(string(body), "since_event_id") {
			select {
			case at <- struct{}{}:
			default: // announced already
			}
			<-rel
		}
		passOn(w, r, url, body, nil)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", at, rel
}

// An ask the agent acks while the session's first read of a long log
// (two pages) is still out is not told again at the next session start:
// the read, begun before the ack, does not put the ask back into the
// view kept. Before, the read ended after the ack and its view, the ask
// in it, replaced the one the ack had cleared (outside tester, attack48
// F2: 620 owed, the acked ask listed first with "Answer each").
func TestAnAskAckedWhileALongReadIsOutIsNotToldAgain(t *testing.T) {
	t.Parallel()
	pl, srv := memPrimary(t)
	id := appendDirect(t, pl, map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": "opencode@edge-test", "status": "open", "body": "the oldest ask"})
	for i := range 510 {
		appendDirect(t, pl, map[string]any{"type": "note", "stream": "devbox", "room": "r", "from_agent": "pi@laptop", "to_agent": "*", "body": fmt.Sprint("broadcast ", i)})
	}
	proxy, reached, release := secondPageProxy(t, srv.URL())
	palace := t.TempDir() + "/palace"
	h := start(t, harnessOpts{palace: palace, primaryURL: proxy, wakeWait: 50 * time.Millisecond})
	<-reached // the first page, the ask in it, is read; the second is held
	if m, res := h.call("event_ack", map[string]any{"event_id": id, "from_agent": "opencode@edge-test", "status": "applied"}); res.IsError || m["success"] != true {
		t.Fatalf("event_ack: %v", m)
	}
	close(release)
	<-h.edge.wk.first // the read begun before the ack has ended
	h.s.Close()
	<-h.done
	next := start(t, harnessOpts{palace: palace, stopGrace: 100 * time.Millisecond, primaryURL: testbed.HungPrimary(t), wakeWait: 50 * time.Millisecond, timeout: 30 * time.Second})
	if in := instructionsOf(next); strings.Contains(in, id) {
		t.Errorf("the next session is told the ask acked during the long read:\n%s", in)
	}
}

// Offline, the mailbox tool answers its error with the view kept at the
// session's start, narrowed to the stream asked for as the online answer
// narrows it (the exact name), naming it and counting what is owed on the
// other streams, and holding to the limit asked for. Before, a call with a
// stream got the error alone (attack59 B1); then a misspelled stream ("S1"
// for "s1") got an empty view, no stream named, no count of the others,
// and a note that no ask was owed (attack105 F3), and a limit was not
// applied.
func TestTheMailboxKeptViewFollowsTheStreamAskedFor(t *testing.T) {
	t.Parallel()
	pl, srv := memPrimary(t)
	ask := func(stream, body string) string {
		return appendDirect(t, pl, map[string]any{"type": "task.request", "stream": stream, "room": "r", "from_agent": "pi@laptop", "to_agent": "opencode@edge-test", "status": "open", "body": body})
	}
	one, two, three := ask("s1", "the first ask on s1"), ask("s2", "the ask on s2"), ask("s1", "the second ask on s1")
	h := start(t, harnessOpts{primaryURL: srv.URL(), wakeWait: 10 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, one) || !strings.Contains(in, two) || !strings.Contains(in, three) {
		t.Fatalf("the session was not told of the three asks:\n%s", in)
	}
	h.s.Close()
	h2 := start(t, harnessOpts{palace: h.palace, primaryDown: true})
	for _, c := range []struct {
		args   map[string]any
		asks   []string
		others any    // other_streams (nil: absent)
		more   any    // more (nil: absent)
		note   string // in the note
	}{
		{map[string]any{}, []string{one, two, three}, nil, nil, "these are the asks"},
		{map[string]any{"stream": "s1"}, []string{one, three}, 1.0, nil, `owed on stream "s1"`},
		{map[string]any{"stream": "S1"}, nil, 3.0, nil, `no ask from trusted senders was owed on stream "S1" as last read, at as_of, but 3 on other streams`},
		{map[string]any{"stream": "s3", "limit": 1}, nil, 3.0, nil, "but 3 on other streams"},
		{map[string]any{"limit": 2}, []string{one, two}, nil, 1.0, "1 more"},
	} {
		m, res := h2.call("mailbox", c.args)
		edge, _ := m["edge"].(map[string]any)
		kept, _ := edge["kept_view"].(map[string]any)
		if !res.IsError || kept == nil {
			t.Fatalf("%v: offline, not an error with a kept view: %v", c.args, m)
		}
		asks, _ := kept["asks"].([]any)
		if len(asks) != len(c.asks) {
			t.Errorf("%v: the kept view lists %d asks, want %d: %v", c.args, len(asks), len(c.asks), kept)
		}
		for i, id := range c.asks {
			if i < len(asks) && !strings.Contains(fmt.Sprint(asks[i]), id) {
				t.Errorf("%v: ask %d of the kept view is not %s: %v", c.args, i, id, kept)
			}
		}
		if kept["stream"] != c.args["stream"] || kept["other_streams"] != c.others || kept["more"] != c.more {
			t.Errorf("%v: the kept view says stream %v, other_streams %v, more %v; want %v, %v, %v", c.args,
				kept["stream"], kept["other_streams"], kept["more"], c.args["stream"], c.others, c.more)
		}
		if note := fmt.Sprint(kept["note"]); !strings.Contains(note, c.note) {
			t.Errorf("%v: the kept view's note does not say %q: %s", c.args, c.note, note)
		}
	}
}
