package gateway

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// TestRealEventCursorOfAHiddenEvent: the gateway in front of real
// MemPalace 3.11.0 serve, a coordination log written in one burst (many
// events share a timestamp) with the laptop's and the desk's agents'
// events interleaved, some hidden from one device, some from the other,
// the log's first event hidden from the laptop and its last from the
// desk. For every event as since_event_id or before_event_id (default
// order and both explicit ones): a device that cannot see it gets an
// empty page; one that can gets the coordinator's page cut to its agents,
// which is the log strictly after (before) the event in append order.
// An event_wait after a hidden event waits from the end of the log.
func TestRealEventCursorOfAHiddenEvent(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	proxy := realpalace.NewProxy(t, srv.URL)
	devs := []Device{
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, Agents: []string{"opencode@laptop"}, ReadRate: 1e9, WriteRate: 1e9},
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Agents: []string{"pi@desk"}, ReadRate: 1e9, WriteRate: 1e9},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Admin: true, Coordinator: true, Agents: []string{"opencode@ops"}, ReadRate: 1e9, WriteRate: 1e9},
	}
	g := newGWAt(t, devs, &upstream{name: "proxy", url: proxy.URL})
	type ev struct{ id, from, to, at string }
	var log []ev
	for _, p := range [][2]string{
		{"pi@desk", "someone@else"}, // first: hidden from the laptop
		{"opencode@laptop", "pi@desk"},
		{"opencode@laptop", "other@x"},
		{"pi@desk", "*"},
		{"pi@desk", "someone@else"},
		{"pi@desk", "someone@else"},
		{"opencode@laptop", "other@x"},
		{"pi@desk", "opencode@laptop"},
		{"opencode@laptop", "*"},
		{"pi@desk", "someone@else"},
		{"opencode@laptop", "other@x"}, // last: hidden from the desk
	} {
		r, err := srv.Call("mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": p[0], "to_agent": p[1]})
		e, _ := r["event"].(map[string]any)
		if err != nil || e == nil {
			t.Fatalf("event_append: %v %v", r, err)
		}
		log = append(log, ev{e["id"].(string), p[0], p[1], e["created_at"].(string)})
	}
	if !slices.ContainsFunc(log[1:], func(e ev) bool { return e.at == log[0].at }) {
		t.Fatalf("the burst shares no timestamp (created_at %v): the test no longer shows ties", log)
	}
	ids := func(res map[string]any) []string {
		var out []string
		for _, e := range res["events"].([]any) {
			out = append(out, e.(map[string]any)["id"].(string))
		}
		return out
	}
	// model is the log strictly after (since) or before the event at i,
	// in the order asked (since: oldest first by default; before: newest).
	model := func(cursor string, i int, order string, d *Device) []string {
		var out []string
		for j, e := range log {
			if (cursor == "since_event_id" && j > i || cursor == "before_event_id" && j < i) && eventVisible(d, e.to, e.from) {
				out = append(out, e.id)
			}
		}
		if order == "desc" || order == "" && cursor == "before_event_id" {
			slices.Reverse(out)
		}
		return out
	}
	for di := range devs {
		d := &devs[di]
		for i, e := range log {
			for _, cursor := range []string{"since_event_id", "before_event_id"} {
				for _, order := range []string{"", "asc", "desc"} {
					args := map[string]any{cursor: e.id, "limit": 50}
					if order != "" {
						args["order"] = order
					}
					n := proxy.Calls("mempalace_event_list")
					res, rpc, _ := g.call(g.tokens[d.ID], "event_list", args)
					if got := proxy.Calls("mempalace_event_list") - n; got > 3 {
						t.Errorf("%s event_list %v took %d event_list calls upstream: the two look-ups fell back to a scan", d.ID, args, got)
					}
					if rpc != nil || res["error"] != nil || res["events"] == nil {
						t.Fatalf("%s event_list %v: %v %v", d.ID, args, res, rpc)
					}
					want := model(cursor, i, order, d)
					if !eventVisible(d, e.to, e.from) {
						want = nil
					}
					if got := ids(res); !slices.Equal(got, want) || res["count"] != float64(len(want)) {
						t.Errorf("%s, %s of event %d (%s -> %s) order %q: %s, want %s", d.ID, cursor, i, e.from, e.to, order, strings.Join(got, ","), strings.Join(want, ","))
					}
				}
			}
		}
	}
	if res, _, _ := g.call(g.tokens["laptop-7f3a"], "event_list", map[string]any{"since_event_id": "evt_nope"}); !strings.Contains(res["error"].(string), "not found") {
		t.Errorf("a cursor that does not exist: %v", res)
	}

	// event_wait: after an event the device sees, the visible events
	// after it (or a time-out when none); after one it cannot see,
	// nothing that is already in the log.
	for di := range devs[:2] {
		d := &devs[di]
		for i, e := range log {
			want := model("since_event_id", i, "asc", d)
			if !eventVisible(d, e.to, e.from) {
				want = nil
			}
			res, rpc, _ := g.call(g.tokens[d.ID], "event_wait", map[string]any{"since_event_id": e.id, "timeout_ms": 200})
			if got := ids(res); rpc != nil || !slices.Equal(got, want) || res["timed_out"] != (len(want) == 0) {
				t.Errorf("%s, event_wait after event %d (%s -> %s): %v %v, want %s", d.ID, i, e.from, e.to, res, rpc, strings.Join(want, ","))
			}
		}
	}
	// A wait after a hidden event is woken by a visible event appended
	// while it waits, not by a hidden one.
	waits := proxy.Calls("mempalace_event_wait")
	got := make(chan map[string]any)
	go func() {
		res, _, _ := g.call(g.tokens["laptop-7f3a"], "event_wait", map[string]any{"since_event_id": log[0].id, "timeout_ms": 10000})
		got <- res
	}()
	for deadline := time.Now().Add(5 * time.Second); proxy.Calls("mempalace_event_wait") == waits && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // until the wait has reached serve
	}
	var woke string
	for _, to := range []string{"someone@else", "opencode@laptop"} {
		r := srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": to})
		woke = r["event"].(map[string]any)["id"].(string)
	}
	if res := <-got; !slices.Equal(ids(res), []string{woke}) {
		t.Errorf("a wait after a hidden event, then a hidden and a visible event appended: %v, want %s", res, woke)
	}
}
