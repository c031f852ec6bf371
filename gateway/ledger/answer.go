package ledger

import (
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/jsondepth"
)

// Recordable returns the JSON-RPC result of an answer that says the write
// was applied, and false for any other answer: not HTTP 200, not a JSON
// object, a JSON-RPC error, a result with isError, or a result whose JSON
// text (or structuredContent) has success:false or an "error" member.
func Recordable(a Answer) (result []byte, ok bool) {
	if a.Status != 200 || !jsondepth.Valid(a.Body) {
		return nil, false
	}
	env := gjson.ParseBytes(a.Body)
	res := env.Get("result")
	if !env.IsObject() || env.Get("error").Exists() || !res.IsObject() {
		return nil, false
	}
	if res.Get("isError").Bool() {
		return nil, false
	}
	failed := func(v gjson.Result) bool {
		return v.IsObject() && (v.Get("success").Type == gjson.False || v.Get("error").Exists())
	}
	if failed(res.Get("structuredContent")) {
		return nil, false
	}
	if text := res.Get("content.0.text"); text.Type == gjson.String && jsondepth.ValidString(text.Str) && failed(gjson.Parse(text.Str)) {
		return nil, false
	}
	return []byte(res.Raw), true
}

// response is a JSON-RPC success response with id.
func response(id json.RawMessage, result []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b := make([]byte, 0, len(result)+len(id)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}
