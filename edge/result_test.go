package edge

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodeResult reads every result as the SDK's decoder does: MemPalace's
// text-only shape on the fast path, anything else through the SDK.
func TestDecodeResultMatchesTheSDK(t *testing.T) {
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
		got, err := decodeResult(json.RawMessage(raw))
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
		got, err := decodeResult(json.RawMessage(bad))
		var want mcp.CallToolResult
		if werr := json.Unmarshal([]byte(bad), &want); (err == nil) != (werr == nil) {
			g, _ := json.Marshal(got)
			t.Errorf("%s: decodeResult %s, %v; the SDK %v", bad, g, err, werr)
		}
	}
}
