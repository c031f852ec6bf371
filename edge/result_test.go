package edge

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/wire"
)

// decodeResult reads every result as the SDK's decoder does: MemPalace's
// text-only shape on the fast path, anything else through the SDK.
func TestDecodeResultMatchesTheSDK(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"{\n  \"a\": \"é \\u00e9 \\ud83d\\ude00 \\\\ \\\" \\/\"\n}"}]}`,
		`{"content":[{"type":"text","text":"one"},{"text":"two","type":"text"}],"isError":true}`,
		`{"content":[{"type":"text","text":"x"}],"isError":false,"_meta":{"progressToken":3,"k":{"n":[1,2]}}}`,
		`{"content":[]}`,
		`{"content":null,"isError":null,"_meta":null}`,
		`{"isError":true}`,
		`{}`,
		// shapes the fast path leaves to the SDK
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1}}`,
		`{"content":[{"type":"text","text":"x","_meta":{"a":1}}]}`,
	} {
		got, err := wire.DecodeResult(json.RawMessage(raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		var want mcp.CallToolResult
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%s: the SDK: %v", raw, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(&want)
		if string(g) != string(w) {
			t.Errorf("%s:\n got  %s\n want %s", raw, g, w)
		}
	}
	for _, bad := range []string{`{"content":[{"type":"text","text":"x"}]`, `[1]`, `{"content":"x"}`, `{"content":[{"type":"text","text":1}]}`} {
		got, err := wire.DecodeResult(json.RawMessage(bad))
		var want mcp.CallToolResult
		if werr := json.Unmarshal([]byte(bad), &want); (err == nil) != (werr == nil) {
			g, _ := json.Marshal(got)
			t.Errorf("%s: decodeResult %s, %v; the SDK %v", bad, g, err, werr)
		}
	}
}

// A call's params survive the lane: decoded for routing and encoded again
// for the child or the primary, name, arguments and _meta unchanged; bad
// params are refused, not guessed at.
func TestCallParamsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"name":"mempalace_search","arguments":{"query":"é \"q\"","limit":5}}`,
		`{"name":"mempalace_status"}`,
		`{"name":"mempalace_status","arguments":null}`,
		`{"name":"x","arguments":{"a":[1,{"b":null}]},"_meta":{"progressToken":"p1"}}`,
		`{"_meta":null,"name":"x","arguments":{}}`,
	} {
		p, err := wire.DecodeParams(json.RawMessage(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		out, err := wire.EncodeCallParams(p)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var a, b struct {
			Name      string
			Arguments map[string]any
			Meta      map[string]any `json:"_meta"`
		}
		json.Unmarshal([]byte(in), &a)
		if a.Arguments == nil {
			a.Arguments = map[string]any{} // an absent or null arguments goes on as {}
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("%s -> %s: %v", in, out, err)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%s -> %s", in, out)
		}
	}
	for _, bad := range []string{`{"name":5}`, `[1]`, `{"name":"x"`, `{"name":"x","_meta":[1]}`} {
		if p, err := wire.DecodeParams(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted: %+v", bad, p)
		}
	}
}

// Only reads may be sent to the primary twice (the warm transport resends
// a call whose connection died before the answer began): never a write,
// a coordination append or a tool the edge does not know.
func TestOnlyReadsAreMarkedSafeToResend(t *testing.T) {
	t.Parallel()
	for tool, want := range map[string]bool{
		"mempalace_search": true, "mempalace_kg_query": true, "mempalace_get_drawer": true, "mempalace_event_list": true, "mempalace_event_wait": true, "mempalace_artifact_get": true,
		"mempalace_add_drawer": false, "mempalace_diary_write": false, "mempalace_kg_add": false, "mempalace_event_append": false, "mempalace_event_ack": false,
		"mempalace_sync": false, "mempalace_delete_drawer": false, "mempalace_tool_from_a_newer_primary": false,
	} {
		if rec, _ := catalogue.Lookup(tool); rec.Reads != want {
			t.Errorf("Reads(%s) = %v, want %v", tool, rec.Reads, want)
		}
	}
}
