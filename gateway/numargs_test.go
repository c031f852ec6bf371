package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const beyondFloat = "a number beyond a 64-bit float"

// attack44 F7: a number Go keeps as text but Python reads as inf (serve
// answered 500), an offset the gateway's own pager read as 0 (the first
// page again), and an id list holding a list (forwarded, its answer
// refused later) are refused at parse time, naming the parameter, audited,
// and never reach the upstream. attack71 F4: "nan", "Infinity" and
// "1e999" are told as what they are, not as a size.
func TestOddNumbersAndIDListsAreRefusedNamingTheParameter(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := [][2]string{{"Authorization", "Bearer " + g.tokens["laptop-7f3a"]}}
	for _, c := range []struct{ tool, args, param, why string }{
		{"list_drawers", `{"wing":"shared","limit":1e400}`, "limit", beyondFloat},
		{"search", `{"query":"q","wing":"shared","limit":-1e400}`, "limit", beyondFloat},
		{"event_list", `{"stream":"s1","limit":1e400}`, "limit", beyondFloat},
		{"diary_read", `{"agent_name":"opencode","last_n":1e400}`, "last_n", beyondFloat},
		{"diary_read", `{"agent_name":"opencode","last_n":"inf"}`, "last_n", "must be an integer, not infinite"},
		{"search", `{"query":"q","wing":"shared","limit":"nan"}`, "limit", "must be an integer, not NaN"},
		{"search", `{"query":"q","wing":"shared","limit":"Infinity"}`, "limit", "must be an integer, not infinite"},
		{"search", `{"query":"q","wing":"shared","limit":"1e999"}`, "limit", "must be an integer, not infinite"},
		{"list_drawers", `{"limit":"ten"}`, "limit", "must be an integer, not a string that does not read as a number"},
		{"list_drawers", `{"limit":"100000000000000000000"}`, "limit", "must be an integer of at most 9007199254740991 in size"},
		{"list_drawers", `{"limit":9007199254740993}`, "limit", "must be an integer of at most 9007199254740991 in size"},    // read as 2^53 through a float64
		{"list_drawers", `{"limit":"3.5"}`, "limit", "must be an integer, not a string with a decimal point or an exponent"}, // Python's int("3.5") raises
		{"list_drawers", `{"limit":"1e3"}`, "limit", "must be an integer, not a string with a decimal point or an exponent"},
		{"list_drawers", `{"limit":true}`, "limit", "must be an integer"},
		{"list_drawers", `{"offset":9223372036854775807}`, "offset", "must be an integer"},
		{"list_drawers", `{"offset":1e400}`, "offset", beyondFloat},
		{"list_drawers", `{"offset":-1}`, "offset", "must not be negative"},
		{"list_drawers", `{"wing":"shared","offset":"-5"}`, "offset", "must not be negative"},
		{"checkpoint", `{"items":null}`, "items", "must be an array, not null"},
		{"checkpoint", `{"items":[],"diary":null}`, "diary", "must be an object, not null"},
		{"checkpoint", `{"items":[{"wing":"shared","room":"r","content":"c"},"x"]}`, "items[1]", "must be an object"},
		{"get_drawers", `{"drawer_ids":[["drawer_wing_secret_keys_1"]]}`, "drawer_ids[0]", "must be a string"},
		{"get_drawers", `{"drawer_ids":["drawer_shared_r_1",7]}`, "drawer_ids[1]", "must be a string"},
		{"get_drawers", `{"drawer_ids":"drawer_shared_r_1"}`, "drawer_ids", "must be an array"},
		{"event_append", `{"stream":"s1","room":"r1","from_agent":"opencode@laptop","to_agent":"*","type":"status","body":"b","artifact_ids":[{"id":"a"}]}`, "artifact_ids[0]", "must be a string"},
	} {
		before := len(g.auditLog())
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_%s","arguments":%s}}`, c.tool, c.args)
		_, answer := g.send("POST", "/mcp", body, laptop)
		msg, code := gjson.Get(answer, "error.message").String(), gjson.Get(answer, "error.code").Int()
		e := g.lastAudit(before, c.args)
		if c.why == beyondFloat { // refused with the body, by the strict parse: nothing in it is read
			if code != -32600 || !strings.Contains(msg, "$.params.arguments."+c.param+": "+beyondFloat) || e.Decision != "error" || !strings.HasPrefix(string(e.Rule), "parse: ") {
				t.Errorf("%s %s: %.300s, audited %+v", c.tool, c.args, answer, e)
			}
		} else if code != -32602 || !strings.Contains(msg, fmt.Sprintf("parameter '%s': %s", c.param, c.why)) || e.Decision != "deny" || e.Rule != ruleArguments {
			t.Errorf("%s %s: %.300s, audited %+v", c.tool, c.args, answer, e)
		}
		if n := g.up.toolCalls(t, c.tool); n != 0 {
			t.Errorf("%s %s: the upstream ran %d", c.tool, c.args, n)
		}
	}
	// What MemPalace reads as the integer the gateway reads passes.
	for _, args := range []string{`{"wing":"shared","limit":5,"offset":0}`, `{"wing":"shared","limit":"5","offset":"1"}`, `{"limit":2.0,"offset":9007199254740991}`, `{"wing":"shared","limit":" 10 ","offset":-0.5}`, `{"wing":"shared","limit":null}`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_list_drawers","arguments":` + args + `}}`
		if _, answer := g.send("POST", "/mcp", body, laptop); gjson.Get(answer, "error").Exists() || !gjson.Get(answer, "result").Exists() {
			t.Errorf("list_drawers %s: %.300s", args, answer)
		}
	}
}

// A float parameter MemPalace takes (search's max_distance,
// check_duplicate's threshold, checkpoint's dedup_threshold) that is not a
// finite number is refused at parse, naming it: before, "nan", "inf" and
// "1e999" reached serve, whose float() reads them (a NaN threshold finds
// no duplicate, so a checkpoint files every item again). A finite value
// out of the schema's words (a threshold of 2: dedup off) passes.
func TestOddFloatsAreRefusedNamingTheParameter(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	laptop := [][2]string{{"Authorization", "Bearer " + g.tokens["laptop-7f3a"]}}
	for _, c := range []struct{ tool, args, param, why string }{
		{"check_duplicate", `{"content":"c","threshold":"nan"}`, "threshold", "must be a finite number, not NaN"},
		{"check_duplicate", `{"content":"c","threshold":"-inf"}`, "threshold", "must be a finite number"},
		{"check_duplicate", `{"content":"c","threshold":[0.5]}`, "threshold", "must be a number, not an array"},
		{"search", `{"query":"q","wing":"shared","max_distance":"Infinity"}`, "max_distance", "must be a finite number"},
		{"search", `{"query":"q","wing":"shared","max_distance":"1e999"}`, "max_distance", "must be a finite number"},
		{"checkpoint", `{"items":[],"dedup_threshold":"NaN"}`, "dedup_threshold", "must be a finite number"},
		{"checkpoint", `{"items":[],"dedup_threshold":true}`, "dedup_threshold", "must be a number, not a boolean"},
	} {
		before := len(g.auditLog())
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_%s","arguments":%s}}`, c.tool, c.args)
		_, answer := g.send("POST", "/mcp", body, laptop)
		msg, code := gjson.Get(answer, "error.message").String(), gjson.Get(answer, "error.code").Int()
		if e := g.lastAudit(before, c.args); code != -32602 || !strings.Contains(msg, fmt.Sprintf("parameter '%s': %s", c.param, c.why)) || e.Decision != "deny" || e.Rule != ruleArguments {
			t.Errorf("%s %s: %.300s, audited %+v", c.tool, c.args, answer, e)
		}
		if n := g.up.toolCalls(t, c.tool); n != 0 {
			t.Errorf("%s %s: the upstream ran %d", c.tool, c.args, n)
		}
	}
	for _, args := range []string{`{"query":"q","wing":"shared","max_distance":0}`, `{"query":"q","wing":"shared","max_distance":"1.5"}`, `{"query":"q","wing":"shared","max_distance":2}`, `{"query":"q","wing":"shared","max_distance":null}`, `{"query":"q","wing":"shared","max_distance":7}`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":` + args + `}}`
		if _, answer := g.send("POST", "/mcp", body, laptop); gjson.Get(answer, "error").Exists() || !gjson.Get(answer, "result").Exists() {
			t.Errorf("search %s: %.300s", args, answer)
		}
	}
}
