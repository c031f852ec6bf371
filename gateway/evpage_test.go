package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// pagingDevices: ops coordinates and is trusted; narw (claude@narw)
// trusts ops alone and withholds the rest, and sees only its own
// agent's events.
var pagingDevices = []Device{
	{ID: "ops", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true, Agents: []string{"pi@ops"}, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "narw", Label: "narw", Read: []string{"*"}, Write: []string{"*"}, Agents: []string{"claude@narw"}, Trusts: []string{"ops"}, Untrusted: UntrustedWithhold, ReadRate: 1e9, WriteRate: 1e9},
}

// floodedLog is ops's ask A to claude@narw, then n events narw may not
// see (written past the gateway to the double, so of unknown origin:
// those to claude@narw withheld, the rest between other agents), then
// ops's ask B.
func floodedLog(t *testing.T, g *gw, n int) (a, b string) {
	t.Helper()
	return floodedLogVia(t, g, n, func(args map[string]any) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":%s}}`, encodeJSON(args))
		if _, err := g.primary.Handle([]byte(body)); err != nil {
			t.Fatal(err)
		}
	})
}

// floodedLogVia is floodedLog with the flood appended past the gateway
// by past.
func floodedLogVia(t *testing.T, g *gw, n int, past func(args map[string]any)) (a, b string) {
	t.Helper()
	ask := func(body string) string {
		r, rpc, _ := g.call(g.tokens["ops"], "event_append", map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "pi@ops", "to_agent": "claude@narw", "status": "open", "body": body})
		id := gjson.Get(encodeJSONString(r), "event.id").String()
		if rpc != nil || id == "" {
			t.Fatalf("event_append: %v %v", r, rpc)
		}
		return id
	}
	a = ask("ask A")
	for i := range n {
		to, from := "claude@narw", "mal@x"
		if i%2 == 1 {
			to, from = "b@x", "a@x"
		}
		past(map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": from, "to_agent": to, "status": "open", "body": fmt.Sprint("flood ", i)})
	}
	return a, ask("ask B")
}

func encodeJSONString(v any) string { return string(encodeJSON(v)) }

// ids is the events' ids of an event_list answer, in its order.
func ids(r map[string]any) string {
	var out []string
	evs, _ := r["events"].([]any)
	for _, e := range evs {
		out = append(out, fmt.Sprint(e.(map[string]any)["id"]))
	}
	return strings.Join(out, ",")
}

// A page the gateway cut (events from senders the device withholds,
// events between other agents) is filled from the upstream's next pages,
// so a page shorter than limit is the end of the log, as upstream, for
// every client: oldest first, newest first, and paged one event at a
// time with the last event as the cursor. Before, a page of limit 500
// came back as ask A and untrusted_withheld 499, every reader took it
// for the log's end and never saw ask B (outside tester, attack31 p16,
// p27).
func TestACutEventPageIsFilled(t *testing.T) {
	t.Parallel()
	g := newGW(t, pagingDevices)
	a, b := floodedLog(t, g, 1200)
	readFilledPages(t, g, a, b)
}

// readFilledPages wants narw's event_list pages to hold exactly asks a
// and b, in every order and paging.
func readFilledPages(t *testing.T, g *gw, a, b string) {
	t.Helper()
	narw := g.tokens["narw"]
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"to_agent": "claude@narw", "order": "asc", "limit": 500}, a + "," + b},
		{map[string]any{"order": "asc", "limit": 500}, a + "," + b},
		{map[string]any{"to_agent": "claude@narw", "limit": 500}, b + "," + a}, // newest first
		{map[string]any{"order": "asc", "limit": 1}, a},
		{map[string]any{"order": "asc", "limit": 1, "since_event_id": a}, b},
		{map[string]any{"order": "asc", "limit": 1, "since_event_id": b}, ""},
		{map[string]any{"order": "desc", "limit": 1, "before_event_id": b}, a},
	} {
		r, rpc, _ := g.call(narw, "event_list", c.args)
		if got := ids(r); rpc != nil || got != c.want || r["count"] != float64(strings.Count(c.want, ",")+min(len(c.want), 1)) {
			t.Errorf("event_list %v: %s (count %v), want %s: %v", c.args, got, r["count"], c.want, rpc)
		}
	}
}

// A flood larger than what one fill reads (eventScan, set low here)
// stops it: the page says there is more and gives a cursor, which the
// next call takes as since_event_id and reads on from; it names the
// hidden event to the gateway alone, and opens for no other device.
func TestAFillStoppedByItsBoundGivesACursor(t *testing.T) {
	t.Parallel()
	g := newGW(t, pagingDevices)
	g.srv.eventScan.Store(500)
	a, b := floodedLog(t, g, 1200)
	narw := g.tokens["narw"]
	r, _, _ := g.call(narw, "event_list", map[string]any{"order": "asc", "limit": 500})
	cursor, _ := r["next_cursor"].(string)
	if ids(r) != a || r["more"] != true || !strings.HasPrefix(cursor, cursorPrefix) {
		t.Fatalf("a fill stopped by its bound: %v", r)
	}
	seen := []string{a}
	for range 5 {
		r, rpc, _ := g.call(narw, "event_list", map[string]any{"order": "asc", "limit": 500, "since_event_id": cursor})
		if rpc != nil || r["error"] != nil {
			t.Fatalf("the cursor given is refused: %v %v", r, rpc)
		}
		if ids(r) != "" {
			seen = append(seen, ids(r))
		}
		if r["more"] != true {
			break
		}
		cursor = r["next_cursor"].(string)
	}
	if got := strings.Join(seen, ","); got != a+","+b {
		t.Errorf("read on with the cursors given: %s, want %s", got, a+","+b)
	}
	if r, _, _ := g.call(g.tokens["ops"], "event_list", map[string]any{"order": "asc", "limit": 1, "since_event_id": cursor}); r["error"] == nil {
		t.Errorf("another device's cursor opens: %v", r)
	}
}

// event_wait takes the cursor a stopped fill gave as its since_event_id,
// as event_list does, and answers what the device sees after it (it was
// passed on sealed, and the primary answered it not found).
func TestEventWaitTakesTheCursorAFillGave(t *testing.T) {
	t.Parallel()
	g := newGW(t, pagingDevices)
	g.srv.eventScan.Store(500)
	_, b := floodedLog(t, g, 1200)
	narw := g.tokens["narw"]
	r, _, _ := g.call(narw, "event_list", map[string]any{"order": "asc", "limit": 500})
	cursor, _ := r["next_cursor"].(string)
	if r["more"] != true || cursor == "" {
		t.Fatalf("a fill stopped by its bound: %v", r)
	}
	r, rpc, _ := g.call(narw, "event_wait", map[string]any{"since_event_id": cursor, "timeout_ms": 2000})
	if rpc != nil || r["error"] != nil || !strings.Contains(encodeJSONString(r), b) {
		t.Errorf("event_wait from the cursor given: %v %v, want ask B", r, rpc)
	}
	if r, _, _ := g.call(g.tokens["ops"], "event_wait", map[string]any{"since_event_id": cursor, "timeout_ms": 100}); r["error"] == nil {
		t.Errorf("another device's cursor opens for event_wait: %v", r)
	}
}

// A cursor the gateway sealed opens only what it names: the other cursor
// argument of the same call, naming an event hidden from the device, is
// checked as it is without one (an empty page). Before, a sealed cursor
// beside it let before_event_id name a hidden event, and the page
// between them (ask B) placed it in the log.
func TestASealedCursorDoesNotOpenTheOtherCursor(t *testing.T) {
	t.Parallel()
	g := newGW(t, pagingDevices)
	readBesideASealedCursor(t, g, func(args map[string]any) string {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":%s}}`, encodeJSON(args))
		out, err := g.primary.Handle([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return gjson.Get(gjson.GetBytes(out, "result.content.0.text").String(), "event.id").String()
	})
}

// readBesideASealedCursor writes ops's asks A and B to narw, then an
// event between other agents by past (its id), and wants narw's pages
// from a cursor sealed on A up to that event empty.
func readBesideASealedCursor(t *testing.T, g *gw, past func(args map[string]any) string) {
	t.Helper()
	a, b := floodedLogVia(t, g, 0, func(map[string]any) {})
	hidden := past(map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "a@x", "to_agent": "b@x", "status": "open", "body": "hidden"})
	if hidden == "" {
		t.Fatal("the hidden event has no id")
	}
	narw := g.tokens["narw"]
	c := g.srv.sealCursor(g.srv.cfg.Load().Device("narw"), a)
	if r, rpc, _ := g.call(narw, "event_list", map[string]any{"order": "asc", "since_event_id": c}); ids(r) != b || rpc != nil {
		t.Fatalf("the page after a sealed cursor naming ask A: %v %v, want ask B", r, rpc)
	}
	for _, order := range []string{"asc", "desc"} {
		r, rpc, _ := g.call(narw, "event_list", map[string]any{"order": order, "since_event_id": c, "before_event_id": hidden})
		if got := ids(r); rpc != nil || got != "" {
			t.Errorf("order %s, before_event_id of a hidden event beside a sealed cursor: %q (%v %v), want an empty page", order, got, r, rpc)
		}
	}
	if r, _, _ := g.call(narw, "event_list", map[string]any{"order": "desc", "before_event_id": hidden}); ids(r) != "" {
		t.Errorf("before_event_id of a hidden event: %v", r)
	}
}
