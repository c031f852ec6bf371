package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// strictTriggers are argument bytes the gateway's strict parse refuses
// (attack64 F1, F2, F4), each with where and why the refusal names.
var strictTriggers = []refusedCall{
	{"add_drawer", `{"wing":"notes","room":"r","content":"a","content":"b"}`, `$.params.arguments: key "content" appears twice`},
	{"add_drawer", `{"wing":"secret","room":"r","content":"a","wing":"notes"}`, `$.params.arguments: key "wing" appears twice`},
	{"add_drawer", "{\"wing\":\"notes\",\"room\":\"r\",\"content\":\"raw \xff byte\"}", `$.params.arguments.content: not valid UTF-8`},
	{"add_drawer", "{\"wing\":\"notes\",\"room\":\"r\",\"content\":\"overlong \xc0\xaf\"}", `$.params.arguments.content: not valid UTF-8`},
	{"add_drawer", `{"wing":"notes","room":"r","content":"lone \ud800 surrogate"}`, `$.params.arguments.content: an escape of a lone surrogate`},
	{"add_drawer", `{"wing":"notes","room":"r","content":"c","metadata":{"k":1,"K":2}}`, `$.params.arguments.metadata: keys "k" and "K" differ only in case`},
	{"add_drawer", `{"wing":"notes","room":"r","content":"c","metadata":` + strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70) + `}`, `nested deeper than 64`},
	{"event_append", `{"type":"note","stream":"s","room":"r","from_agent":"opencode@edge-test","body":"b","metadata":{"k":1,"K":2}}`, `keys "k" and "K" differ only in case`},
	// 62 deep in the metadata is 64 in the request the gateway parses
	// (attack67 N2: before, the edge counted from the arguments).
	{"event_append", `{"type":"note","stream":"s","room":"r","from_agent":"opencode@edge-test","body":"b","metadata":` + strings.Repeat(`{"a":`, 62) + "1" + strings.Repeat("}", 62) + `}`, `$.params.arguments.metadata` + strings.Repeat(".a", 61) + `: nested deeper than 64`},
	{"checkpoint", `{"items":[{"wing":"notes","Wing":"x","room":"r","content":"c"}]}`, `$.params.arguments.items[0]: keys "wing" and "Wing" differ only in case`},
	{"checkpoint", `{"items":[{"wing":"notes","wing":"notes","room":"r","content":"c"}]}`, `$.params.arguments.items[0]: key "wing" appears twice`},
	{"search", `{"query":"q","max_distance":1e400}`, `$.params.arguments.max_distance: a number beyond a 64-bit float`},
	{"search", `{"query":"q","limit":1e400}`, `$.params.arguments.limit: a number beyond a 64-bit float`},
	{"get_drawer", `{"drawer_id":"drawer_notes_r_1","drawer_id":"drawer_notes_r_2"}`, `key "drawer_id" appears twice`},
}

// refusedCall is a call the edge refuses up front, and what its answer
// names.
type refusedCall struct{ tool, args, want string }

// wantRefusedUpFront sends each call on h (ids from 100) and wants a
// -32602 naming c.want and saying nothing was written or queued.
func wantRefusedUpFront(t *testing.T, h *harness, calls []refusedCall) {
	t.Helper()
	for i, c := range calls {
		id := fmt.Sprint(100 + i)
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"mempalace_%s","arguments":%s}}`, id, c.tool, c.args)
		if _, err := h.in.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		a := h.await(id, 10*time.Second)
		e, _ := a["error"].(map[string]any)
		if msg, _ := e["message"].(string); e["code"] != -32602.0 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "nothing was written or queued") {
			t.Errorf("%s %.80q: answered %.400v, want -32602 naming %q", c.tool, c.args, a, c.want)
		}
	}
}

// wantNothingSent wants no tools/call at h's local palace or primary
// (the mailbox's own refresh aside) and an empty outbox.
func wantNothingSent(t *testing.T, h *harness) {
	t.Helper()
	for _, m := range h.childReceived() {
		if m.Method == "tools/call" {
			t.Errorf("the local palace got %s", m.Name)
		}
	}
	for _, m := range received(h.primaryLog.String()) {
		if m.Method == "tools/call" && m.Name != "mempalace_event_list" { // the mailbox's own refresh
			t.Errorf("the primary got %s", m.Name)
		}
	}
	ops, err := h.edge.outbox.List(context.Background(), 10, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead)
	if err != nil || len(ops) != 0 {
		t.Errorf("the outbox holds %d ops (%v)", len(ops), err)
	}
}

// attack64 F1: arguments the gateway's strict parse refuses are refused
// by the edge at once, "Invalid params" naming where and why, and reach
// neither palace nor the outbox: before, a write was filed locally and
// queued (answered success, "queued"), its every send refused by the
// gateway as "Invalid Request" with id null, which the edge took for a
// lost answer (the op maybe applied for good, the breaker opened), and a
// read was answered from the local palace alone, degraded.
func TestArgumentsTheGatewaysStrictParseRefusesAreRefusedUpFront(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, childEnv: []string{"FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	wantRefusedUpFront(t, h, strictTriggers)
	wantNothingSent(t, h)
	if !h.edge.remote.Up() {
		t.Errorf("the breaker opened: %s", h.edge.remote.State())
	}
}

// In pass-through the edge is not a replica's front: the local palace
// gets such arguments as they were sent, and answers them itself (R1).
func TestPassThroughPassesArgumentsTheGatewayWouldRefuse(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{passThrough: true, raw: true, childEnv: []string{"FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	line := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"notes","room":"r","content":"a","content":"b"}}}`
	if _, err := h.in.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	if a := h.await("7", 10*time.Second); a["result"] == nil {
		t.Fatalf("answered %v, want the local palace's result", a)
	}
}

// Arguments the strict parse refuses are still read as encoding/json
// reads them (a duplicate's last) for the steps that run before the
// refusal and for the calls never refused (pass-through, local-only):
// before, the lenient read was lost and every field read as absent.
func TestRefusedArgumentsAreStillReadLeniently(t *testing.T) {
	t.Parallel()
	c := newCall(&mcp.CallToolParams{Name: "mempalace_mine", Arguments: json.RawMessage(`{"wing":"a","wing":"b","dir":"/x"}`)})
	args := c.argsMap()
	if c.strict == nil {
		t.Fatal("a key twice is not noted as what the gateway refuses")
	}
	if args["wing"] != "b" || args["dir"] != "/x" {
		t.Errorf("argsMap = %v, want the lenient read (wing b, dir /x)", args)
	}
}

// attack67 N3: the answer an event_append gets (the primary's, through
// the outbox) holds the numbers it was sent as written: before, it was
// read through a float64, so 2^53+1 came back 2^53 and 2^63-1 as
// 9223372036854776000, while the primary stored them exactly.
func TestAnEventAppendsAnswerKeepsItsNumbers(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true})
	h.handshake()
	h.ready()
	nums := []string{"9007199254740993", "9223372036854775807", "18446744073709551615", "-9007199254740993"}
	meta := ""
	for i, n := range nums {
		meta += fmt.Sprintf(`,"n%d":%s`, i, n)
	}
	line := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":{"type":"note","stream":"s","room":"r","from_agent":"opencode@laptop","body":"numbers","metadata":{` + meta[1:] + `}}}}`
	if _, err := h.in.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	a := h.await("9", 10*time.Second)
	text := fmt.Sprint(a["result"])
	if !strings.Contains(text, "evt_") {
		t.Fatalf("answered %v, want the primary's event", a)
	}
	for i, n := range nums {
		if want := fmt.Sprintf(`"n%d": %s`, i, n); !strings.Contains(text, want) {
			t.Errorf("the answer lacks %s: %s", want, text)
		}
	}
}
