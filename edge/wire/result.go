package wire

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/jsondepth"
)

// DecodeResult turns a tool result as the wire carries it into the SDK's
// type. MemPalace answers with text blocks only, read here in one gjson
// pass; anything else (images, resources, annotations, structured
// content) goes through the SDK's own decoder so nothing is lost.
func DecodeResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if res, ok := decodeTextResult(raw); ok {
		return res, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// decodeTextResult reads a result with no keys but content (text blocks of
// type and text only), isError and _meta; false for any other shape.
func decodeTextResult(raw []byte) (*mcp.CallToolResult, bool) {
	if !jsondepth.Valid(raw) {
		return nil, false
	}
	r := gjson.ParseBytes(raw)
	if !r.IsObject() {
		return nil, false
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{}}
	ok := true
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content":
			if v.Type == gjson.Null {
				out.Content = []mcp.Content{}
				return true
			}
			if !v.IsArray() {
				ok = false
				return false
			}
			content := out.Content[:0]
			v.ForEach(func(_, c gjson.Result) bool {
				text, ok2 := textBlock(c)
				if !ok2 {
					ok = false
					return false
				}
				content = append(content, &mcp.TextContent{Text: text})
				return true
			})
			out.Content = content
		case "isError":
			switch v.Type {
			case gjson.True:
				out.IsError = true
			case gjson.False, gjson.Null:
				out.IsError = false
			default:
				ok = false
			}
		case "_meta":
			var m mcp.Meta
			if v.Type != gjson.Null && (!v.IsObject() || json.Unmarshal([]byte(v.Raw), &m) != nil) {
				ok = false
			}
			out.Meta = m
		default:
			ok = false
		}
		return ok
	})
	return out, ok
}

// textBlock is the text of {"type":"text","text":…} (no other keys).
func textBlock(c gjson.Result) (string, bool) {
	if !c.IsObject() {
		return "", false
	}
	var text, typ string
	hasText, ok := false, true
	c.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "type" && v.Type == gjson.String:
			typ = v.Str
		case k.Str == "text" && v.Type == gjson.String:
			text, hasText = v.Str, true
		default:
			ok = false
		}
		return ok
	})
	return text, ok && hasText && typ == "text"
}

// EncodeResult encodes a result as the SDK would (no HTML escaping). The
// edge's own results (one text block, nothing else) are written directly.
func EncodeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	if len(res.Content) == 1 && res.Meta == nil && res.StructuredContent == nil && res.InputRequests == nil && !res.NeedsInput() {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok && tc.Meta == nil && tc.Annotations == nil {
			var buf bytes.Buffer
			buf.Grow(len(tc.Text) + 64)
			buf.WriteString(`{"content":[{"type":"text","text":`) // a bytes.Buffer never fails a write
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(tc.Text); err != nil {
				return nil, err
			}
			buf.Truncate(buf.Len() - 1) // Encode's newline
			buf.WriteString(`}]`)       // as above
			if res.IsError {
				buf.WriteString(`,"isError":true`) // as above
			}
			buf.WriteByte('}') // as above
			return buf.Bytes(), nil
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
