package edge

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/pretty"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/jsondepth"
	"github.com/joakimp/devbox-config/mailbox"
)

// resultJSON parses a MemPalace result's single text block (empty if it
// is not a JSON object).
func resultJSON(res *mcp.CallToolResult) map[string]any { return objectMap(resultText(res)) }

// jsonResult is m as a result's text block, every bidi or invisible
// character in it a JSON escape (mailbox.PrintableJSON: encoding/json
// escapes only the controls), as the primary's words it may quote are.
func jsonResult(m map[string]any, isError bool) *mcp.CallToolResult {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(m) // values the edge built or decoded from JSON: they encode
	text := mailbox.PrintableJSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, IsError: isError}
}

func errorResult(msg string, edge map[string]any) *mcp.CallToolResult {
	m := map[string]any{"success": false, "error": msg}
	if edge != nil {
		m["edge"] = edge
	}
	return jsonResult(m, true)
}

// objectText is a result's single text block when it is a JSON object.
func objectText(res *mcp.CallToolResult) (string, bool) {
	if t := resultText(res); jsondepth.ValidString(t) && gjson.Parse(t).IsObject() {
		return t, true
	}
	return "", false
}

// textResult is a result of one text block, indented as MemPalace's are
// (json.dumps(indent=2)).
func textResult(text []byte, isError bool, meta mcp.Meta) *mcp.CallToolResult {
	text = pretty.PrettyOptions(text, &pretty.Options{Indent: "  "})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(bytes.TrimSuffix(text, []byte("\n")))}}, IsError: isError, Meta: meta}
}

// annotate adds the edge object (and degraded) to a JSON object result,
// spliced into the text (its keys keep their order); any other result is
// returned unchanged.
func annotate(res *mcp.CallToolResult, edge map[string]any, degraded bool) *mcp.CallToolResult {
	text, ok := objectText(res)
	if !ok {
		return res
	}
	out := []byte(text)
	if degraded {
		out, _ = sjson.SetBytes(out, "degraded", true) // out is an object text (objectText): it takes a member
		edge["degraded"] = true
	}
	eb, err := json.Marshal(edge)
	if err != nil {
		return res
	}
	if out, err = sjson.SetRawBytes(out, "edge", mailbox.PrintableJSON(eb)); err != nil { // the primary's words in edge.primary, say
		return res
	}
	return textResult(out, res.IsError, res.Meta)
}

// truncate cuts s to at most n bytes on a rune boundary, marked with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
