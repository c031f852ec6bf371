package gateway

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// attack69 F7: an argument whose JSON type is not the one the tool's
// schema declares is refused -32602, naming the parameter, the type sent,
// the type wanted and the tool, audited, and never forwarded (before, a
// search's context, a string, went to the primary as whatever was sent).
// Null, and an integer or a number sent as a string, still pass.
func TestArgumentsOfAnotherTypeAreRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := [][2]string{{"Authorization", "Bearer " + g.tokens["admin-0001"]}}
	for _, c := range []struct{ tool, args, param, want, sent string }{
		{"search", `{"query":"q","context":[{},{}]}`, "context", "a string", "an array"},
		{"search", `{"query":{"a":"q"}}`, "query", "a string", "an object"},
		{"search", `{"query":"q","source_file":7}`, "source_file", "a string", "a number"},
		{"search", `{"query":"q","room":true}`, "room", "a string", "a boolean"},
		{"search", `{"query":"q","cli_compatible":"false"}`, "cli_compatible", "a boolean", "a string"},
		{"search", `{"query":"q","include_media":1}`, "include_media", "a boolean", "a number"},
		{"search", `{"query":"q","limit":[5]}`, "limit", "an integer", "an array"},
		{"search", `{"query":"q","max_distance":{"v":1}}`, "max_distance", "a number", "an object"},
		{"get_drawers", `{"drawer_ids":{"0":"drawer_shared_r_1"}}`, "drawer_ids", "an array", "an object"},
		{"event_list", `{"stream":"s1","preview":"yes"}`, "preview", "a boolean", "a string"},
		{"event_append", `{"stream":"s1","room":"r1","from_agent":"opencode@ops","type":"status","body":"b","metadata":["x"]}`, "metadata", "an object", "an array"},
		{"checkpoint", `{"items":[],"diary":"entry"}`, "diary", "an object", "a string"},
		{"kg_query", `{"entity":["a","b"]}`, "entity", "a string", "an array"},
	} {
		before := len(g.auditLog())
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_%s","arguments":%s}}`, c.tool, c.args)
		_, answer := g.send("POST", "/mcp", body, admin)
		msg := gjson.Get(answer, "error.message").String()
		want := fmt.Sprintf("parameter '%s': must be %s, not %s (the schema of mempalace_%s)", c.param, c.want, c.sent, c.tool)
		if e := g.lastAudit(before, c.args); gjson.Get(answer, "error.code").Int() != -32602 || !strings.Contains(msg, want) || e.Decision != "deny" || e.Rule != ruleArguments {
			t.Errorf("%s %s: %.300s, audited %+v; want %q", c.tool, c.args, answer, e, want)
		}
		if n := g.up.toolCalls(t, c.tool); n != 0 {
			t.Errorf("%s %s: the upstream ran %d", c.tool, c.args, n)
		}
	}
	for _, args := range []string{`{"query":"q","context":"the release","limit":"3","max_distance":"1.5","room":null}`, `{"query":"q","limit":2,"max_distance":0.5,"wing":"shared"}`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":` + args + `}}`
		if _, answer := g.send("POST", "/mcp", body, admin); gjson.Get(answer, "error").Exists() || !gjson.Get(answer, "result").Exists() {
			t.Errorf("search %s: %.300s", args, answer)
		}
	}
}

// hostileSearch is attack69's deep.json: one search whose context is
// 16 MiB of empty objects (5.6 million), under MaxBody.
func hostileSearch() string {
	head := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"x","context":[`
	tail := `{}]}}}`
	n := (MaxBody - len(head) - len(tail)) / 3
	return head + strings.Repeat("{},", n) + tail
}

// attack69 F7: the 16 MiB search is refused before it is forwarded and
// without the gateway building it: before, its parse built 5.6 million
// Go maps (half a gigabyte, kept by the runtime after the call), and the
// primary's another gigabyte. What the whole request allocates, HTTP
// included, stays under a small multiple of its body.
func TestHugeArgumentIsRefusedWithoutBuildingIt(t *testing.T) { // not parallel: it measures the heap
	g := newGW(t, devices)
	body := hostileSearch()
	hdr := [][2]string{{"Authorization", "Bearer " + g.tokens["admin-0001"]}}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, answer := g.send("POST", "/mcp", body, hdr)
	runtime.ReadMemStats(&after)
	const bound = 6 * MaxBody // the body in the client, in the server's read buffer (doubling), and the parse's first values
	if grew := after.TotalAlloc - before.TotalAlloc; grew > bound {
		t.Errorf("the request allocated %d MB, want under %d MB", grew>>20, bound>>20)
	} else {
		t.Logf("the request allocated %d MB", grew>>20)
	}
	if gjson.Get(answer, "error.code").Int() != -32600 || gjson.Get(answer, "id").Raw != "1" || !strings.Contains(gjson.Get(answer, "error.message").String(), "more than 20000 values") {
		t.Errorf("answer %.300s", answer)
	}
	if n := g.up.toolCalls(t, "search"); n != 0 {
		t.Errorf("the upstream ran %d searches", n)
	}
}

// A read, or a protocol message, over MaxReadBody is refused before it
// is forwarded (a read never needs more: MaxReadBody); a write of the
// same size is not.
func TestReadOverItsCapIsRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	admin := [][2]string{{"Authorization", "Bearer " + g.tokens["admin-0001"]}}
	long := strings.Repeat("a", MaxReadBody)
	for _, c := range []struct {
		body    string
		refused bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_check_duplicate","arguments":{"content":"` + long + `"}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"` + long + `"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_check_duplicate","arguments":{"content":"` + long[:MaxReadBody-200] + `"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","room":"r","content":"` + long + `"}}}`, false},
	} {
		_, answer := g.send("POST", "/mcp", c.body, admin)
		msg := gjson.Get(answer, "error.message").String()
		if refused := strings.Contains(msg, "Request too large: a read or a protocol message is at most"); refused != c.refused {
			t.Errorf("%.120s (%d bytes): %.300s", c.body, len(c.body), answer)
		}
	}
	if n := g.up.toolCalls(t, "check_duplicate"); n != 1 {
		t.Errorf("the upstream ran %d check_duplicate, want the one under the cap", n)
	}
}
