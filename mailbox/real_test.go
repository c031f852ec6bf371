package mailbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// bearer adds the token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestRealMailboxReadsTheRealLog derives an owed set from MemPalace
// 3.11.0's own coordination log, over serve, as the CLI and the edge read
// it: more than a page (500) of asks addressed to me and of my replies,
// with broadcasts among them, replies by event_ack and by correlation_id,
// a claimed ask (still owed), my own ask acked back to me (not owed: its
// thread is closed) and a peer's ask to someone else (not mine). 3.11
// lists newest first without a cursor, and its from_agent names the
// caller and filters nothing: the pager must send order=asc and the
// writer filter, and read no more than the two queries' pages.
func TestRealMailboxReadsTheRealLog(t *testing.T) {
	srv := realpalace.New(t).Serve(t, "tok-mailbox")
	const peer, other = "pi@laptop", "claude@desk"
	appendEv := func(args map[string]any) string {
		t.Helper()
		r := srv.MustCall(t, "mempalace_event_append", args)
		ev, _ := r["event"].(map[string]any)
		if r["success"] != true || ev == nil {
			t.Fatalf("event_append %v: %v", args, r)
		}
		return ev["id"].(string)
	}
	ack := func(id, status string) {
		t.Helper()
		if r := srv.MustCall(t, "mempalace_event_ack", map[string]any{"event_id": id, "from_agent": me, "status": status}); r["success"] != true {
			t.Fatalf("event_ack %s: %v", id, r)
		}
	}
	const asks = 520
	var askIDs []string
	for i := 1; i <= asks; i++ {
		askIDs = append(askIDs, appendEv(map[string]any{"type": "task.request", "stream": "devbox", "room": "coord", "from_agent": peer, "to_agent": me,
			"correlation_id": fmt.Sprintf("c%d", i), "status": "open", "body": fmt.Sprintf("ask %d", i)}))
		if i%100 == 0 {
			appendEv(map[string]any{"type": "note", "stream": "devbox", "room": "coord", "from_agent": peer, "to_agent": "*", "status": "open", "body": "to everyone"})
			appendEv(map[string]any{"type": "task.request", "stream": "devbox", "room": "coord", "from_agent": peer, "to_agent": other, "status": "open", "body": "not mine"})
		}
	}
	mine := appendEv(map[string]any{"type": "task.request", "stream": "devbox", "room": "coord", "from_agent": me, "to_agent": peer, "status": "open", "body": "my own ask"})
	if r := srv.MustCall(t, "mempalace_event_ack", map[string]any{"event_id": mine, "from_agent": peer, "status": "applied"}); r["success"] != true {
		t.Fatalf("the peer's ack of my ask: %v", r)
	}
	for i, id := range askIDs {
		switch n := i + 1; {
		case n == 7 || n == 515: // unanswered
		case n == 300:
			ack(id, "claimed")
		case n%2 == 0:
			ack(id, "applied")
		default:
			appendEv(map[string]any{"type": "task.result", "stream": "devbox", "room": "coord", "from_agent": me, "to_agent": peer, "correlation_id": fmt.Sprintf("c%d", n), "status": "applied"})
		}
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "mailbox-real-test", Version: "0"}, nil)
	s, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{srv.Token}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var tools []*mcp.Tool
	for tool, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool)
	}
	var mu sync.Mutex
	var sent []map[string]any
	src := NewToolSource(func(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
		mu.Lock()
		sent = append(sent, p.Arguments.(map[string]any))
		mu.Unlock()
		return s.CallTool(ctx, p)
	}, tools)
	if !src.AscOrder || !src.Writer {
		t.Fatalf("3.11.0's event_list lists order and writer: %+v", src)
	}
	r, err := Owed(context.Background(), src, me, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{askIDs[6], askIDs[299], askIDs[514]}
	if got := ids(r.Owed); !reflect.DeepEqual(got, want) || r.Count != 3 {
		t.Fatalf("owed %v (count %d), want %v", got, r.Count, want)
	}
	var last struct{ Body string }
	if json.Unmarshal(r.Owed[2].Event.Raw, &last); !strings.Contains(r.Owed[1].Why, "claimed") || last.Body != "ask 515" {
		t.Errorf("the items: %+v", r.Owed)
	}
	// asks and broadcasts to me: 520 + 5 = 2 pages; my 518 replies and
	// my own ask: 2 pages. Every call names its order and the writer.
	if len(sent) != 4 {
		t.Errorf("%d event_list calls, want 4 (two pages each)", len(sent))
	}
	for _, a := range sent {
		if a["order"] != "asc" || a["from_agent"] != nil {
			t.Errorf("a call without order=asc, or filtering by from_agent: %v", a)
		}
	}
	// a stream narrows both queries
	if r, err := Owed(context.Background(), src, me, "elsewhere", 0); err != nil || r.Count != 0 {
		t.Fatalf("another stream: %+v %v", r, err)
	}
}

// TestRealAckAnswersWhatItNames is the log an offline ack leaves on
// MemPalace 3.11.0: the peer asks a1 on a thread, my agent acks a1 while
// its edge cannot reach the primary, the peer asks a2 on the same thread,
// then the outbox flushes the ack. 3.11's event_ack copies the thread's
// correlation_id and addresses the peer, so the ack lands after a2 on
// a2's thread; it names a1 and must leave a2, which my agent never saw,
// owed.
func TestRealAckAnswersWhatItNames(t *testing.T) {
	srv := realpalace.New(t).Serve(t, "tok-ack")
	const peer = "pi@laptop"
	ask := func(body string) string {
		r := srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "task.request", "stream": "devbox", "room": "coord",
			"from_agent": peer, "to_agent": me, "correlation_id": "thread-c", "status": "open", "body": body})
		return r["event"].(map[string]any)["id"].(string)
	}
	a1, a2 := ask("first task"), ask("second task, posted while the ack sat in the outbox")
	k := srv.MustCall(t, "mempalace_event_ack", map[string]any{"event_id": a1, "from_agent": me, "status": "applied", "body": "done"})
	if ev, _ := k["event"].(map[string]any); ev["correlation_id"] != "thread-c" || ev["to_agent"] != peer {
		t.Fatalf("3.11's ack no longer joins the thread; this test pins nothing: %v", k)
	}
	r := srv.MustCall(t, "mempalace_event_list", map[string]any{"stream": "devbox", "order": "asc", "limit": 50})
	var evs []Event
	for _, o := range r["events"].([]any) {
		raw, _ := json.Marshal(o)
		e, err := ParseEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if got := ids(Derive(evs, me)); !reflect.DeepEqual(got, []string{a2}) {
		t.Fatalf("owed %v, want only a2 %s (a1 %s acked)", got, a2, a1)
	}
}

// TestRealAnAckSettlesOnlyTheAskItNames is attack55 F2 on MemPalace
// 3.11.0: the peer asks w-2 on stream mb55 and again on mb55b; my agent
// acks only mb55b's (3.11's ack copies w-2 and addresses the peer). The
// mb55 ask stays owed, in the mailbox of every stream as in mb55's. And
// F3: the peer's claimed ack of my own ask is owed by nobody; before, it
// was owed by me, the asker.
func TestRealAnAckSettlesOnlyTheAskItNames(t *testing.T) {
	srv := realpalace.New(t).Serve(t, "tok-ack-stream")
	const peer = "pi@wide"
	ask := func(stream string) string {
		r := srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "task.request", "stream": stream, "room": "coord",
			"from_agent": peer, "to_agent": me, "correlation_id": "w-2", "status": "open", "body": "ask on " + stream})
		return r["event"].(map[string]any)["id"].(string)
	}
	a1, a2 := ask("mb55"), ask("mb55b")
	k := srv.MustCall(t, "mempalace_event_ack", map[string]any{"event_id": a2, "from_agent": me, "status": "blocked", "body": "not now"})
	if ev, _ := k["event"].(map[string]any); ev["correlation_id"] != "w-2" || ev["to_agent"] != peer || ev["stream"] != "mb55b" {
		t.Fatalf("3.11's ack no longer copies the thread; this test pins less: %v", k)
	}
	// attack55 F3: a progress ack routed back to the asker (me) is owed by
	// nobody; the ask it reports on stays owed by the peer.
	mine := srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "task.request", "stream": "mb55b", "room": "coord",
		"from_agent": me, "to_agent": peer, "correlation_id": "a-10", "status": "open", "body": "my ask"})["event"].(map[string]any)["id"].(string)
	srv.MustCall(t, "mempalace_event_ack", map[string]any{"event_id": mine, "from_agent": peer, "status": "claimed", "body": "on it"})
	evs := realLog(t, srv)
	for _, stream := range []string{"", "mb55"} {
		if got := ids(build(evs, me, stream, 0).Owed); !reflect.DeepEqual(got, []string{a1}) {
			t.Errorf("stream %q: owed %v, want only mb55's ask %s (mb55b's %s acked)", stream, got, a1, a2)
		}
	}
	if got := ids(build(evs, peer, "", 0).Owed); !reflect.DeepEqual(got, []string{mine}) {
		t.Errorf("the peer owes %v, want my ask %s (claimed, not done), not my ack of its ask", got, mine)
	}
}

// realLog is every event the real palace holds, oldest first.
func realLog(t *testing.T, srv *realpalace.Server) []Event {
	t.Helper()
	r := srv.MustCall(t, "mempalace_event_list", map[string]any{"order": "asc", "limit": 500})
	var evs []Event
	for _, o := range r["events"].([]any) {
		raw, _ := json.Marshal(o)
		e, err := ParseEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}
