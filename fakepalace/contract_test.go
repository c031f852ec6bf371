package fakepalace_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	. "github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// conn is a raw JSON-RPC connection to a MemPalace (the double, or real
// MemPalace in TestRealContract).
type conn interface {
	send(t *testing.T, msg string) []byte // the raw response, nil if none
}

type stdioConn struct {
	mu  sync.Mutex
	in  io.Writer
	out *bufio.Reader
}

func (c *stdioConn) send(t *testing.T, msg string) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, `"id"`) {
		return nil
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading response to %s: %v", msg, err)
	}
	return bytes.TrimSpace(line)
}

type httpConn struct {
	url, token string
}

func (c *httpConn) send(t *testing.T, msg string) []byte {
	t.Helper()
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		if len(b) != 0 {
			t.Fatalf("202 with a body: %q", b)
		}
		return nil
	}
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	return b
}

// opener opens a fresh, empty palace's connection for one subtest.
type opener func(t *testing.T) conn

// fakeTransports are the double over stdio (in-process pipes) and HTTP.
func fakeTransports() map[string]opener {
	return map[string]opener{
		"stdio": func(t *testing.T) conn {
			pl, _ := New(Options{})
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			go func() { pl.ServeStdio(inR, outW, io.Discard); outW.Close() }()
			t.Cleanup(func() { inW.Close() })
			return &stdioConn{in: inW, out: bufio.NewReader(outR)}
		},
		"http": func(t *testing.T) conn {
			_, srv := testbed.Primary(t, Options{}, HTTPOptions{Token: "tok"})
			return &httpConn{url: srv.URL(), token: "tok"}
		},
	}
}

// realTransports are real MemPalace (testbed/realpalace's pinned
// release): mempalace-mcp over stdio and mempalace serve over HTTP, each
// on a throwaway palace of its own.
func realTransports() map[string]opener {
	return map[string]opener{
		"stdio": func(t *testing.T) conn { return clientConn{realpalace.New(t).Stdio(t).Client} },
		"http": func(t *testing.T) conn {
			srv := realpalace.New(t).Serve(t, "tok")
			return &httpConn{url: srv.URL, token: srv.Token}
		},
	}
}

// clientConn is a real server's connection through testbed's client.
type clientConn struct{ c *realpalace.Client }

func (c clientConn) send(t *testing.T, msg string) []byte {
	t.Helper()
	b, err := c.c.Send([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

var idSeq int
var idMu sync.Mutex

func rpc(t *testing.T, c conn, method string, params any) response {
	t.Helper()
	idMu.Lock()
	idSeq++
	id := idSeq
	idMu.Unlock()
	p, _ := json.Marshal(params)
	raw := c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, p))
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("response is not JSON-RPC: %q", raw)
	}
	return r
}

// call runs a tool and decodes the single text block's JSON.
func call(t *testing.T, c conn, name string, args map[string]any) map[string]any {
	t.Helper()
	r := rpc(t, c, "tools/call", map[string]any{"name": name, "arguments": args})
	if r.Error != nil {
		t.Fatalf("%s: JSON-RPC error %d %s", name, r.Error.Code, r.Error.Message)
	}
	var res struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		IsError *bool `json:"isError"`
	}
	json.Unmarshal(r.Result, &res)
	if len(res.Content) != 1 || res.Content[0].Type != "text" || res.IsError != nil {
		t.Fatalf("%s: envelope is not exactly one text block: %s", name, r.Result)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
		t.Fatalf("%s: text is not a JSON object: %s", name, res.Content[0].Text)
	}
	return out
}

// TestContract runs the contract against the double.
func TestContract(t *testing.T) { runContract(t, fakeTransports(), false) }

// TestRealContract runs the same contract against real MemPalace over
// both wires. Where the double and the real server differ, either the
// double was fixed or the difference is recorded, with its reason, in
// "recorded differences", which asserts each side's own behaviour (so a
// change on either side fails it); nothing is skipped.
func TestRealContract(t *testing.T) {
	realpalace.Venv(t)
	runContract(t, realTransports(), true)
}

func runContract(t *testing.T, transports map[string]opener, real bool) {
	for name, open := range transports {
		t.Run(name, func(t *testing.T) {
			contract311(t, open)
			recordedDifferences(t, open, real)
			t.Run("initialize negotiation", func(t *testing.T) {
				c := open(t)
				for sent, want := range map[string]string{"2025-06-18": "2025-06-18", "1999-01-01": "2025-11-25"} {
					r := rpc(t, c, "initialize", map[string]any{"protocolVersion": sent, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "0"}})
					var res map[string]any
					json.Unmarshal(r.Result, &res)
					if res["protocolVersion"] != want || res["serverInfo"].(map[string]any)["name"] != "mempalace" {
						t.Errorf("sent %s: %s", sent, r.Result)
					}
				}
				r := rpc(t, c, "initialize", map[string]any{})
				var absent struct{ ProtocolVersion string }
				if json.Unmarshal(r.Result, &absent); absent.ProtocolVersion != "2024-11-05" {
					t.Errorf("absent version: %s", r.Result)
				}
				if c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`) != nil {
					t.Error("a notification was answered")
				}
				if r := rpc(t, c, "ping", nil); string(r.Result) != "{}" {
					t.Errorf("ping: %s", r.Result)
				}
			})
			t.Run("tools and schemas", func(t *testing.T) {
				c := open(t)
				r := rpc(t, c, "tools/list", map[string]any{})
				var res struct {
					Tools []struct {
						Name        string         `json:"name"`
						InputSchema map[string]any `json:"inputSchema"`
					} `json:"tools"`
				}
				json.Unmarshal(r.Result, &res)
				names := map[string]map[string]any{}
				for _, tl := range res.Tools {
					names[tl.Name] = tl.InputSchema
					if tl.InputSchema["type"] != "object" {
						t.Errorf("%s schema type %v", tl.Name, tl.InputSchema["type"])
					}
				}
				for _, want := range strings.Fields(`status list_wings list_rooms get_taxonomy search check_duplicate add_drawer get_drawer list_drawers update_drawer delete_drawer delete_by_source checkpoint diary_write diary_read kg_add kg_query kg_invalidate kg_supersede kg_timeline kg_stats mine sync reconnect hook_settings event_append event_list event_wait event_ack artifact_put artifact_get patch_submit`) {
					if names["mempalace_"+want] == nil {
						t.Errorf("tool mempalace_%s missing", want)
					}
				}
				req, _ := json.Marshal(names["mempalace_add_drawer"]["required"])
				if string(req) != `["wing","room","content"]` {
					t.Errorf("add_drawer required = %s", req)
				}
			})
			t.Run("protocol errors", func(t *testing.T) {
				c := open(t)
				cases := []struct {
					params any
					code   int
					msg    string
				}{
					{map[string]any{"name": "mempalace_add_drawer", "arguments": map[string]any{"wing": "w", "room": "r", "content": "x", "bogus": 1}}, -32602, "Unknown parameter 'bogus' for tool mempalace_add_drawer"},
					{map[string]any{"name": "mempalace_add_drawer", "arguments": map[string]any{"wing": "w", "room": "r", "content": "x", "bogus": 1, "wait_for_previous": "any value"}}, -32602, "Unknown parameter 'bogus' for tool mempalace_add_drawer"},
					{map[string]any{"name": "mempalace_nope"}, -32601, "Unknown tool: mempalace_nope"},
					{map[string]any{"arguments": map[string]any{}}, -32602, "Invalid params: 'name' is required for tools/call"},
					{map[string]any{"name": "mempalace_add_drawer", "arguments": map[string]any{"wing": "w"}}, -32602, "Missing required parameters 'room', 'content' for tool mempalace_add_drawer"},
					{map[string]any{"name": "mempalace_search", "arguments": map[string]any{"query": "q", "limit": "many"}}, -32602, "Invalid value for parameter 'limit'"},
				}
				for _, tc := range cases {
					r := rpc(t, c, "tools/call", tc.params)
					if r.Error == nil || r.Error.Code != tc.code || r.Error.Message != tc.msg {
						t.Errorf("%v: got %+v", tc.params, r.Error)
					}
				}
				if r := rpc(t, c, "resources/list", nil); r.Error == nil || r.Error.Code != -32601 {
					t.Errorf("unknown method: %+v", r.Error)
				}
				var batch response
				raw := c.send(t, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
				if json.Unmarshal(raw, &batch) != nil || batch.Error == nil || batch.Error.Code != -32600 || string(batch.ID) != "null" {
					t.Errorf("batch: %s", raw)
				}
				if r := call(t, c, "mempalace_search", map[string]any{"query": "x", "limit": "3"}); r["results"] == nil {
					t.Errorf("a numeric string was not coerced: %v", r)
				}
				// Gemini CLI's wait_for_previous: every tool takes it, of any value
				if r := call(t, c, "mempalace_search", map[string]any{"query": "x", "wait_for_previous": true}); r["results"] == nil {
					t.Errorf("a search with wait_for_previous: %v", r)
				}
				if r := call(t, c, "mempalace_status", map[string]any{"wait_for_previous": []any{1}}); r["total_drawers"] == nil {
					t.Errorf("a status with wait_for_previous of an array: %v", r)
				}
			})
			t.Run("drawers: ids, chunks, already_exists", func(t *testing.T) {
				c := open(t)
				r := call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "hello"})
				if r["drawer_id"] != "drawer_w_r_5f071391b1962154702ebc8c" || r["chunks"] != 1.0 {
					t.Fatalf("add: %v", r)
				}
				r = call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "hello"})
				if r["reason"] != "already_exists" || r["success"] != true || r["wing"] != nil {
					t.Fatalf("re-add: %v", r)
				}
				long := strings.Repeat("abcdefghij", 170) // 1700 characters: 3 chunks
				r = call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": long})
				ids, _ := r["chunk_ids"].([]any)
				if r["chunks"] != 3.0 || len(ids) != 3 || !strings.HasSuffix(ids[2].(string), "_chunk_000002") {
					t.Fatalf("chunked add: %v", r)
				}
				g := call(t, c, "mempalace_get_drawer", map[string]any{"drawer_id": r["drawer_id"]})
				if g["content"] != long {
					t.Fatalf("get_drawer does not reassemble the content")
				}
				if g := call(t, c, "mempalace_get_drawer", map[string]any{"drawer_id": "drawer_w_r_000"}); g["error"] != "Drawer not found: drawer_w_r_000" {
					t.Fatalf("missing: %v", g)
				}
				// A delete of an id that names nothing (the edge's outbox
				// settles it as already gone): success false, this error.
				if d := call(t, c, "mempalace_delete_drawer", map[string]any{"drawer_id": "drawer_w_r_000"}); d["success"] != false || d["error"] != "Drawer not found: drawer_w_r_000" {
					t.Fatalf("delete of a missing id: %v", d)
				}
				if d := call(t, c, "mempalace_delete_drawers", map[string]any{"drawer_ids": []any{"drawer_w_r_000"}}); d["error"] != nil || d["deleted"] != 0.0 || d["errors"] != 1.0 || fmt.Sprint(d["results"]) != "[map[drawer_id:drawer_w_r_000 error:Drawer not found: drawer_w_r_000]]" {
					t.Fatalf("bulk delete of a missing id: %v", d)
				}
				if r := call(t, c, "mempalace_add_drawer", map[string]any{"wing": "a/b", "room": "r", "content": "x"}); r["success"] != false {
					t.Fatalf("bad wing accepted: %v", r)
				}
				l := call(t, c, "mempalace_list_drawers", map[string]any{"wing": "w"})
				if l["total"] != 2.0 {
					t.Fatalf("list: %v", l)
				}
				// A page counts every match in total and holds only its own rows.
				second := call(t, c, "mempalace_list_drawers", map[string]any{"wing": "w", "limit": 1, "offset": 1})
				if ds, _ := second["drawers"].([]any); second["total"] != 2.0 || second["count"] != 1.0 || len(ds) != 1 || ds[0].(map[string]any)["drawer_id"] != l["drawers"].([]any)[1].(map[string]any)["drawer_id"] {
					t.Fatalf("second page of one: %v (whole list %v)", second, l)
				}
				if past := call(t, c, "mempalace_list_drawers", map[string]any{"wing": "w", "offset": 5}); past["total"] != 2.0 || past["count"] != 0.0 || len(past["drawers"].([]any)) != 0 {
					t.Fatalf("a page past the end: %v", past)
				}
				s := call(t, c, "mempalace_status", nil)
				if s["total_drawers"] != 4.0 { // chunk rows: 1 + 3
					t.Fatalf("status counts chunk rows: %v", s["total_drawers"])
				}
			})
			// An update naming no field is the only no-op (MemPalace answers
			// it before looking the id up); one sending the drawer's own
			// text (a touch) is an update like any other: the gateway's
			// restore and provenance must not count on a "noop" for it.
			t.Run("update_drawer: no-op and touch", func(t *testing.T) {
				c := open(t)
				if r := call(t, c, "mempalace_update_drawer", map[string]any{"drawer_id": "drawer_w_r_000"}); r["success"] != true || r["noop"] != true {
					t.Fatalf("an update naming no field, of a missing id: %v", r)
				}
				id := call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "hello"})["drawer_id"]
				r := call(t, c, "mempalace_update_drawer", map[string]any{"drawer_id": id, "content": "hello", "wing": "w", "room": "r"})
				if r["success"] != true || r["noop"] != nil || r["wing"] != "w" || r["room"] != "r" {
					t.Fatalf("a touch: %v", r)
				}
				if r := call(t, c, "mempalace_update_drawer", map[string]any{"drawer_id": id, "wing": ""}); r["success"] != false || r["error"] != "wing must be a non-empty string" {
					t.Fatalf("an empty wing: %v", r)
				}
			})
			t.Run("diary has no idempotency probe", func(t *testing.T) {
				c := open(t)
				a := call(t, c, "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "shipped the edge", "topic": "work"})
				b := call(t, c, "mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "shipped the edge", "topic": "work"})
				sfx := DiarySuffix("shipped the edge")
				if a["entry_id"] == b["entry_id"] || !strings.HasSuffix(a["entry_id"].(string), "_"+sfx) || !strings.HasSuffix(b["entry_id"].(string), "_"+sfx) {
					t.Fatalf("ids %v %v", a["entry_id"], b["entry_id"])
				}
				r := call(t, c, "mempalace_diary_read", map[string]any{"agent_name": "pi"})
				if r["total"] != 2.0 {
					t.Fatalf("the same entry twice must be stored twice: %v", r)
				}
				if !strings.HasPrefix(a["entry_id"].(string), "diary_wing_pi_") {
					t.Fatalf("default wing: %v", a["entry_id"])
				}
			})
			t.Run("knowledge graph guard looks for an open copy only", func(t *testing.T) {
				c := open(t)
				a := call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite"})
				b := call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite"})
				if a["triple_id"] != b["triple_id"] {
					t.Fatalf("open fact re-added: %v %v", a, b)
				}
				closed := map[string]any{"subject": "edge", "predicate": "used", "object": "bolt", "valid_from": "2026-01-01", "valid_to": "2026-02-01"}
				x := call(t, c, "mempalace_kg_add", closed)
				y := call(t, c, "mempalace_kg_add", closed)
				if x["triple_id"] == y["triple_id"] {
					t.Fatal("an identical closed fact must duplicate")
				}
				// A closed fact added while the same fact is open is not
				// stored: the open one is answered (3.11's guard looks for an
				// open copy whatever the new fact's dates). A join that sends
				// a local close as kg_add would be absorbed by it.
				if z := call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite", "valid_from": "2026-01-01", "valid_to": "2026-02-15"}); z["triple_id"] != a["triple_id"] {
					t.Fatalf("a closed copy of an open fact: %v; want the open one's id %v", z, a["triple_id"])
				}
				if r := call(t, c, "mempalace_kg_invalidate", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite", "ended": "2026-03-01"}); r["success"] != true {
					t.Fatalf("invalidate: %v", r)
				}
				call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "runs_on", "object": "laptop"})
				s := call(t, c, "mempalace_kg_supersede", map[string]any{"subject": "edge", "predicate": "runs_on", "old_object": "laptop", "new_object": "desktop", "at": "2026-04-01"})
				if s["success"] != true {
					t.Fatalf("supersede: %v", s)
				}
				q := call(t, c, "mempalace_kg_query", map[string]any{"entity": "edge"})
				cur := 0
				for _, f := range q["facts"].([]any) {
					if f.(map[string]any)["current"] == true {
						cur++
					}
				}
				st := call(t, c, "mempalace_kg_stats", nil)
				if q["count"] != 5.0 || cur != 1 || st["triples"] != 5.0 || st["current_facts"] != 1.0 {
					t.Fatalf("query %v / stats %v", q, st)
				}
				if r := call(t, c, "mempalace_kg_add", map[string]any{"subject": "a", "predicate": "b", "object": "c", "valid_from": "yesterday"}); r["success"] != false {
					t.Fatalf("bad date accepted: %v", r)
				}
			})
			t.Run("events and artifacts", func(t *testing.T) {
				c := open(t)
				ev := map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "pi@a", "to_agent": "opencode@b", "status": "open", "body": "please"}
				a := call(t, c, "mempalace_event_append", ev)["event"].(map[string]any)
				b := call(t, c, "mempalace_event_append", ev)["event"].(map[string]any)
				if a["id"] == b["id"] || b["seq"].(float64) <= a["seq"].(float64) || !strings.HasPrefix(a["id"].(string), "evt_") {
					t.Fatalf("no idempotency on append, seq is arrival order: %v %v", a, b)
				}
				call(t, c, "mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@a", "to_agent": "*"})
				l := call(t, c, "mempalace_event_list", map[string]any{"to_agent": "opencode@b"})
				if l["count"] != 3.0 {
					t.Fatalf("to_agent matches *: %v", l["count"])
				}
				if r := call(t, c, "mempalace_event_append", map[string]any{"type": "Bad.Type", "stream": "s", "room": "r", "from_agent": "x"}); r["success"] != false {
					t.Fatalf("validation: %v", r)
				}
				if r := call(t, c, "mempalace_event_list", map[string]any{"since_event_id": "evt_nope"}); !strings.Contains(fmt.Sprint(r["error"]), "not found") {
					t.Fatalf("unknown cursor: %v", r)
				}
				after := call(t, c, "mempalace_event_list", map[string]any{"since_event_id": a["id"]})
				if after["count"] != 2.0 {
					t.Fatalf("since_event_id: %v", after["count"])
				}
				ack := call(t, c, "mempalace_event_ack", map[string]any{"event_id": a["id"], "from_agent": "opencode@b", "status": "applied"})["event"].(map[string]any)
				if ack["type"] != "event.ack" || ack["to_agent"] != "pi@a" || ack["metadata"].(map[string]any)["ack_of"] != a["id"] {
					t.Fatalf("ack: %v", ack)
				}
				w := call(t, c, "mempalace_event_wait", map[string]any{"stream": "nothing-here", "timeout_ms": 50})
				if w["timed_out"] != true {
					t.Fatalf("wait: %v", w)
				}
				p1 := call(t, c, "mempalace_artifact_put", map[string]any{"kind": "note", "content": "same", "created_by": "pi"})
				p2 := call(t, c, "mempalace_artifact_put", map[string]any{"kind": "note", "content": "same", "created_by": "pi"})
				id1 := p1["artifact"].(map[string]any)["id"]
				if id1 == p2["artifact"].(map[string]any)["id"] {
					t.Fatal("artifact_put deduplicated")
				}
				if g := call(t, c, "mempalace_artifact_get", map[string]any{"artifact_id": id1}); g["artifact"].(map[string]any)["content"] != "same" {
					t.Fatalf("get: %v", g)
				}
				if g := call(t, c, "mempalace_artifact_get", map[string]any{"artifact_id": "art_x"}); g["error"] == nil {
					t.Fatalf("missing artifact: %v", g)
				}
				ps := call(t, c, "mempalace_patch_submit", map[string]any{"content": "--- a\n+++ b\n", "from_agent": "pi@a", "stream": "s"})
				if ps["event"].(map[string]any)["type"] != "patch.ready" {
					t.Fatalf("patch_submit: %v", ps)
				}
				// Blanks at either end of type and the routing fields are
				// stripped (Python's str.strip()), not refused.
				padded := call(t, c, "mempalace_event_append", map[string]any{"type": " task.request\t", "stream": " s ", "room": "r", "from_agent": "pi@a", "to_agent": "opencode@b\u3000"})
				if e, _ := padded["event"].(map[string]any); e["type"] != "task.request" || e["stream"] != "s" || e["to_agent"] != "opencode@b" {
					t.Fatalf("padded fields: %v", padded)
				}
			})
			t.Run("search is deterministic", func(t *testing.T) {
				c := open(t)
				call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the edge proxy keeps the local palace writable"})
				call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "bananas are yellow fruit"})
				s := call(t, c, "mempalace_search", map[string]any{"query": "local palace proxy", "limit": 1})
				res := s["results"].([]any)
				if len(res) != 1 {
					t.Fatalf("limit: %v", s)
				}
				h := res[0].(map[string]any)
				for _, k := range []string{"drawer_id", "text", "wing", "room", "distance", "similarity"} {
					if _, ok := h[k]; !ok {
						t.Errorf("hit lacks %s: %v", k, h)
					}
				}
				if !strings.Contains(h["text"].(string), "edge proxy") {
					t.Fatalf("ranking: %v", h)
				}
				d := call(t, c, "mempalace_check_duplicate", map[string]any{"content": "bananas are yellow fruit"})
				if d["is_duplicate"] != true {
					t.Fatalf("check_duplicate: %v", d)
				}
			})
		})
	}
}
