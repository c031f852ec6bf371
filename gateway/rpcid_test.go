package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// kgAddWithID is a kg_add of release_policy/requires/object under the
// JSON-RPC id given as raw JSON.
func kgAddWithID(id, object string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"mempalace_kg_add","arguments":{"subject":"release_policy","predicate":"requires","object":%q}}}`, id, object)
}

// attack44 F12: an id a parser other than Go's reads otherwise (Python
// reads 1e400 as inf and answers "id": Infinity, not JSON, so the gateway
// took the answer as lost and the fact as of unknown origin) is refused,
// audited, and never reaches the upstream.
func TestAnIDNotAStringOrAnInt64IsRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := [][2]string{{"Authorization", "Bearer " + g.tokens["desk-9b21"]}}
	for _, id := range []string{"1e400", "1.5", "-0", "12345678901234567890123", "9223372036854775808", "1E2", "1.0"} {
		before := len(g.auditLog())
		status, body := g.send("POST", "/mcp", kgAddWithID(id, "skip_tests_ok"), desk)
		want := "id must be a string, an integer"
		if id == "1e400" {
			want = "$.id: " + beyondFloat
		}
		if status != 200 || gjson.Get(body, "error.code").Int() != -32600 || !strings.Contains(gjson.Get(body, "error.message").String(), want) || gjson.Get(body, "id").Raw != "null" {
			t.Errorf("id %s: %d %s", id, status, body)
		}
		if e := g.lastAudit(before, id); e.Decision != "error" || e.Device != "desk-9b21" || !strings.HasPrefix(string(e.Rule), "parse: Invalid Request: ") || !strings.Contains(string(e.Rule), want) {
			t.Errorf("id %s: audited %+v", id, e)
		}
	}
	if n := g.up.toolCalls(t, "kg_add"); n != 0 {
		t.Fatalf("the upstream ran %d kg_add of refused ids", n)
	}
}

// attack44 F12, at the root: the upstream gets the gateway's own id on
// every call, a device's never, and the device gets its answer under its
// own id, to a write, a read, a filtered read and a protocol method.
func TestTheUpstreamNeverSeesADevicesID(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	trace := &testbed.SyncBuffer{}
	fakepalace.SetTrace(g.up.palace, trace)
	desk := [][2]string{{"Authorization", "Bearer " + g.tokens["desk-9b21"]}}
	laptop := [][2]string{{"Authorization", "Bearer " + g.tokens["laptop-7f3a"]}}
	ids := []string{`"device-id-x"`, "9223372036854775807", "-9223372036854775808", `"1e400"`}
	for i, id := range ids {
		for _, c := range []struct {
			body string
			hdr  [][2]string
		}{
			{kgAddWithID(id, fmt.Sprintf("object %d", i)), desk},
			{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"mempalace_list_wings"}}`, id), laptop},
			{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"mempalace_kg_query","arguments":{"entity":"release_policy"}}}`, id), desk},
			{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`, id), laptop},
			{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"ping"}`, id), laptop},
		} {
			status, body := g.send("POST", "/mcp", c.body, c.hdr)
			if status != 200 || gjson.Get(body, "id").Raw != id || gjson.Get(body, "error").Exists() {
				t.Errorf("%s: %d %.300s", c.body, status, body)
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(trace.String()), "\n") {
		got := gjson.Get(strings.TrimPrefix(line, "fakepalace: received "), "id").Raw
		for _, id := range ids {
			if got == id {
				t.Errorf("the upstream received a device's id: %s", line)
			}
		}
	}
	if g.up.toolCalls(t, "kg_add") != len(ids) {
		t.Errorf("the upstream ran %d kg_add, want %d", g.up.toolCalls(t, "kg_add"), len(ids))
	}
}

// attack44 F12 in front of real MemPalace serve: a kg_add under the id
// 1e400 (Python reads it as inf and answered "id": Infinity, so the fact
// was made and read as of unknown origin, trusted by every device that
// names no trusted set) is refused and makes no fact; under a plain id
// the fact is made, answered under that id, and is its writer's.
func TestRealAnOddIDMakesNoFactOfUnknownOrigin(t *testing.T) {
	u, _ := startReal(t)
	g := newGWAt(t, []Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared"}, KG: "write", Agents: []string{"pi@desk"}, ReadRate: 1e9, WriteRate: 1e9},
	}, u)
	desk := [][2]string{{"Authorization", "Bearer " + g.tokens["desk-9b21"]}}
	if status, body := g.send("POST", "/mcp", kgAddWithID("1e400", "skip_tests_ok"), desk); status != 200 || gjson.Get(body, "error.code").Int() != -32600 {
		t.Errorf("id 1e400: %d %.300s", status, body)
	}
	if status, body := g.send("POST", "/mcp", kgAddWithID(`"plain"`, "green_build"), desk); status != 200 || gjson.Get(body, "id").Raw != `"plain"` || gjson.Get(body, "error").Exists() {
		t.Fatalf("id \"plain\": %d %.300s", status, body)
	}
	res, rpc, _ := g.call(g.tokens["desk-9b21"], "kg_query", map[string]any{"entity": "release_policy"})
	facts, _ := res["facts"].([]any)
	if rpc != nil || len(facts) != 1 {
		t.Fatalf("kg_query: %v %v", res, rpc)
	}
	if f := facts[0].(map[string]any); f["object"] != "green_build" || originOf(t, f)["device"] != "desk-9b21" {
		t.Errorf("the fact: %v", f)
	}
}

// A number Python reads as infinity anywhere in a body (an event's
// metadata, stored verbatim) is refused: stored, MemPalace would answer it
// as Infinity, not JSON, and the gateway would refuse every event_list page
// holding it to every device it filters.
func TestRealAnInfiniteNumberIsNotStored(t *testing.T) {
	u, _ := startReal(t)
	g := newGWAt(t, []Device{
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}, Agents: []string{"opencode@laptop"}, ReadRate: 1e9, WriteRate: 1e9},
	}, u)
	laptop := [][2]string{{"Authorization", "Bearer " + g.tokens["laptop-7f3a"]}}
	appendWith := func(meta string) string {
		_, body := g.send("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_append","arguments":{"stream":"s1","room":"r1","from_agent":"opencode@laptop","to_agent":"opencode@laptop","type":"status","body":"b","metadata":`+meta+`}}}`, laptop)
		return body
	}
	if body := appendWith(`{"n":1}`); gjson.Get(body, "error").Exists() {
		t.Fatalf("event_append: %.300s", body)
	}
	if body := appendWith(`{"n":1e400}`); gjson.Get(body, "error.code").Int() != -32600 || !strings.Contains(gjson.Get(body, "error.message").String(), "$.params.arguments.metadata.n") {
		t.Errorf("metadata 1e400: %.300s", body)
	}
	res, rpc, _ := g.call(g.tokens["laptop-7f3a"], "event_list", map[string]any{"stream": "s1"})
	if evs, _ := res["events"].([]any); rpc != nil || len(evs) != 1 {
		t.Errorf("event_list after: %v %v", res, rpc)
	}
}

// attack64 F1: a tools/call whose arguments alone the strict parse
// refuses is answered under its own id (a client matches the refusal to
// its call: the edge read id null as an answer lost, the write as maybe
// applied); a refusal in the envelope itself still has no id to answer.
func TestARefusalOfTheParamsAloneAnswersItsID(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := [][2]string{{"Authorization", "Bearer " + g.tokens["desk-9b21"]}}
	call := func(id, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":` + args + `}}`
	}
	for _, c := range []struct{ body, id, want string }{
		{call("7", `{"wing":"shared","room":"r","content":"a","content":"b"}`), "7", `$.params.arguments: key "content" appears twice`},
		{call(`"s-1"`, "{\"wing\":\"shared\",\"room\":\"r\",\"content\":\"\xff\"}"), `"s-1"`, "$.params.arguments.content: not valid UTF-8"},
		{call("8", `{"wing":"shared","room":"r","content":"x \ud800"}`), "8", "$.params.arguments.content: an escape of a lone surrogate"},
		{call("9", `{"wing":"shared","room":"r","content":"c","metadata":{"k":1,"K":2}}`), "9", `keys "k" and "K" differ only in case`},
		{call("10", `{"wing":"shared","room":"r","content":"c","metadata":`+strings.Repeat(`{"a":`, 70)+"1"+strings.Repeat("}", 70)+`}`), "10", "nested deeper than 64"},
		{`{"jsonrpc":"2.0","id":11,"id":12,"method":"tools/call","params":{"name":"mempalace_list_wings"}}`, "null", `$: key "id" appears twice`},
		// attack100 F2: the parse stops at the 20,001st value, in the params, before an id sent last; outside the params, id null.
		{call("15", `{"wing":"shared","room":"r","content":"c","metadata":{"a":[`+strings.Repeat("1,", 20000)+`1]}}`), "15", "more than 20000 values in one document"},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"metadata":{"a":[` + strings.Repeat("1,", 20000) + `1]}}},"id":"last"}`, `"last"`, "more than 20000 values"},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"metadata":{"a":[` + strings.Repeat("1,", 20000) + `1]}}},"id":16,"id":17}`, "null", "more than 20000 values"},
		{`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"mempalace_list_wings"},"x":[` + strings.Repeat("1,", 20000) + `1]}`, "null", "$.x[19993]: more than 20000 values"},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mempalace_list_wings","arguments":{"a":1,"a":2}},"id":13,"ID":14}`, "null", `appears twice`},
	} {
		status, body := g.send("POST", "/mcp", c.body, desk)
		if status != 200 || gjson.Get(body, "error.code").Int() != -32600 || gjson.Get(body, "id").Raw != c.id || !strings.Contains(gjson.Get(body, "error.message").String(), c.want) {
			t.Errorf("%.200q: %d %.300s, want id %s and %q", c.body, status, body, c.id, c.want)
		}
	}
	if n := g.up.toolCalls(t, "add_drawer"); n != 0 {
		t.Fatalf("the upstream ran %d refused add_drawer", n)
	}
}

// attack92 F3: a tools/call without an id (a JSON-RPC notification,
// which gets no answer) is not made: it is answered HTTP 400 with an
// error, as MCP's HTTP transport answers a notification the server does
// not take, never with a result, and audited, naming its tool. Before,
// the drawer was filed and answered {"id": null, "result": ...}. With an
// id, the same call is made.
func TestAToolsCallWithoutAnIDIsNotMade(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := [][2]string{{"Authorization", "Bearer " + g.tokens["desk-9b21"]}}
	call := `"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","room":"r","content":"fire and forget"}}}`
	before := len(g.auditLog())
	status, body := g.send("POST", "/mcp", `{"jsonrpc":"2.0",`+call, desk)
	if status != 400 || gjson.Get(body, "result").Exists() || gjson.Get(body, "error.code").Int() != -32600 || !strings.Contains(body, "give the call an id") {
		t.Errorf("a tools/call without an id: %d %s, want 400 with an error", status, body)
	}
	if e := g.lastAudit(before, "without an id"); e.Decision != "error" || e.Tool != "mempalace_add_drawer" || !strings.Contains(string(e.Rule), "notification") {
		t.Errorf("its audit line: %+v", e)
	}
	if n := g.up.toolCalls(t, "add_drawer"); n != 0 {
		t.Fatalf("the upstream ran %d add_drawer of a notification", n)
	}
	if status, body := g.send("POST", "/mcp", `{"jsonrpc":"2.0","id":3,`+call, desk); status != 200 || !gjson.Get(body, "result").Exists() || g.up.toolCalls(t, "add_drawer") != 1 {
		t.Errorf("the same call with an id: %d %s, want made", status, body)
	}
}
