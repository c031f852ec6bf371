package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/jsondepth"
)

// protocolMetaKeys are the stateless protocol's per-call handshake: they
// describe the agent's hop to the edge, not the call, so they are not
// passed on (a stateless-capable child or primary would take the agent's
// capabilities for the edge's).
var protocolMetaKeys = [...]string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel}

// StripProtocolMeta removes protocolMetaKeys from a call's params, and
// _meta itself if nothing else is in it.
func StripProtocolMeta(params []byte) []byte {
	for _, k := range protocolMetaKeys {
		path := "_meta." + strings.ReplaceAll(k, ".", `\.`)
		if gjson.GetBytes(params, path).Exists() {
			if out, err := sjson.DeleteBytes(params, path); err == nil {
				params = out
			}
		}
	}
	if m := gjson.GetBytes(params, "_meta"); m.IsObject() && len(m.Map()) == 0 {
		if out, err := sjson.DeleteBytes(params, "_meta"); err == nil {
			params = out
		}
	}
	return params
}

// ForwardMeta is a call's _meta without protocolMetaKeys (the SDK path).
func ForwardMeta(m mcp.Meta) mcp.Meta {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for _, k := range protocolMetaKeys {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// DecodeParams decodes a call the edge must route (not a pure relay):
// the name and the arguments' bytes picked out with gjson, _meta decoded
// only when there is one.
func DecodeParams(params json.RawMessage) (*mcp.CallToolParams, error) {
	if !jsondepth.Valid(params) || !gjson.ParseBytes(params).IsObject() {
		return nil, errors.New("params is not a JSON object")
	}
	f := gjson.GetManyBytes(params, "name", "arguments", "_meta")
	if f[0].Exists() && f[0].Type != gjson.String {
		return nil, errors.New("name is not a string")
	}
	p := &mcp.CallToolParams{Name: f[0].Str, Arguments: RawArgs(json.RawMessage(f[1].Raw))} // absent: Raw is "", so {}
	if f[2].Exists() && f[2].Type != gjson.Null {
		if err := json.Unmarshal([]byte(f[2].Raw), &p.Meta); err != nil {
			return nil, fmt.Errorf("_meta: %w", err)
		}
	}
	return p, nil
}

// EncodeCallParams encodes a call for the child or the primary. Arguments
// the agent sent (json.RawMessage) are written as they are, byte for
// byte, with or without _meta: never re-encoded (json.Marshal would
// escape every <, > and & in them as six bytes).
func EncodeCallParams(p *mcp.CallToolParams) ([]byte, error) {
	args, ok := p.Arguments.(json.RawMessage)
	if !ok || len(args) == 0 {
		return json.Marshal(p)
	}
	name, err := json.Marshal(p.Name)
	if err != nil {
		return nil, err
	}
	var meta []byte
	if p.Meta != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p.Meta); err != nil {
			return nil, err
		}
		meta = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	b := make([]byte, 0, len(name)+len(args)+len(meta)+34)
	b = append(append(append(b, `{"name":`...), name...), `,"arguments":`...)
	b = append(b, args...)
	if meta != nil {
		b = append(append(b, `,"_meta":`...), meta...)
	}
	return append(b, '}'), nil
}

// RawArgs is a call's arguments, {} when absent or null.
func RawArgs(a json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(a); len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	return a
}
