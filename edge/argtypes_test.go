package edge

import (
	"testing"
	"time"
)

// attack71 F4: a known tool's argument of a value its schema does not
// take is refused by the edge as the gateway refuses it (-32602 naming
// the parameter, the type wanted and the type sent), and reaches neither
// palace nor the outbox. Before, add_drawer and kg_add reached the local
// palace ("Internal tool error": a TypeError), event_append was queued
// and died at the gateway (an op to drop, told at three session
// starts), and search answered degraded, the gateway's refusal as the
// primary's state.
func TestArgumentsOfAnotherTypeAreRefusedUpFront(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, childEnv: []string{"FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	wantRefusedUpFront(t, h, []refusedCall{
		{"add_drawer", `{"wing":"ops","room":"typed","content":"x","source_file":123}`, "parameter 'source_file': must be a string, not a number (the schema of mempalace_add_drawer)"},
		{"kg_add", `{"subject":"s","predicate":"p","object":"o","source_closet":{"a":1}}`, "parameter 'source_closet': must be a string, not an object (the schema of mempalace_kg_add)"},
		{"event_append", `{"type":"note","stream":"s","room":"r","from_agent":"opencode@edge-test","to_agent":"*","body":"b","metadata":"notanobject"}`, "parameter 'metadata': must be an object, not a string (the schema of mempalace_event_append)"},
		{"search", `{"query":"x","context":[1,2]}`, "parameter 'context': must be a string, not an array (the schema of mempalace_search)"},
		{"search", `{"query":"x","limit":"nan"}`, "parameter 'limit': must be an integer, not NaN"},
		{"search", `{"query":"x","limit":"3.5"}`, "parameter 'limit': must be an integer, not a string with a decimal point"},
		{"checkpoint", `{"items":[{"wing":"ops","room":"r","content":"c"},"x"]}`, "parameter 'items[1]': must be an object"},
		{"checkpoint", `{"items":[],"diary":null}`, "parameter 'diary': must be an object, not null"},
	})
	wantNothingSent(t, h)
	// Null, and an integer in a string, pass as at the gateway.
	line := `{"jsonrpc":"2.0","id":200,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"ops","room":"typed","content":"x","source_file":null}}}`
	if _, err := h.in.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	if a := h.await("200", 10*time.Second); a["result"] == nil {
		t.Errorf("an add_drawer with source_file null is answered %v, want written", a)
	}
}
