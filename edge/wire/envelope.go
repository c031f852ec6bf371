package wire

import (
	segjson "github.com/segmentio/encoding/json"

	"github.com/joakimp/devbox-config/jsondepth"
)

// maxDepth is the go-sdk's nesting limit for a message (internal/json).
const maxDepth = 1000

// wireEnvelope is the part of a JSON-RPC message the go-sdk's DecodeMessage
// (internal/jsonrpc2) checks before it hands the message on. A message
// that fails there ends the SDK's session, so the guard checks the same
// things first, with the same decoder (segmentio/encoding/json, exact-case
// keys, the last of duplicate keys wins): what the guard lets through is
// exactly what the SDK will read.
type wireEnvelope struct {
	VersionTag string             `json:"jsonrpc"`
	ID         any                `json:"id,omitempty"`
	Method     segjson.RawMessage `json:"method"`
	Error      *struct {
		Code    int64              `json:"code"`
		Message string             `json:"message"`
		Data    segjson.RawMessage `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

// envelope is what the SDK reads of a message: its id (nil, a string or a
// float64) and, for a request or notification, its method.
type envelope struct {
	ID        any
	Method    string
	IsRequest bool
}

// checkEnvelope reports why the SDK would refuse msg ("" if it would not)
// and what it would read (the id is nil when absent or unusable).
func checkEnvelope(msg []byte) (envelope, string) {
	if jsondepth.Deeper(msg, maxDepth) {
		return envelope{}, "nested more than 1000 levels"
	}
	var e wireEnvelope
	// Parse with these flags is what the SDK's Decoder.Decode runs on one
	// value (the guard has already checked the line is one JSON value),
	// without the Decoder's 32 KiB buffer per message.
	if _, err := segjson.Parse(msg, &e, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return envelope{}, "not a JSON-RPC message: " + err.Error()
	}
	switch e.ID.(type) {
	case nil, string, float64:
	default:
		return envelope{}, "id is neither a string nor a number"
	}
	env := envelope{ID: e.ID}
	if e.VersionTag != "2.0" {
		return env, `"jsonrpc" is not "2.0"`
	}
	if len(e.Method) > 0 {
		if err := segjson.Unmarshal(e.Method, &env.Method); err != nil {
			return env, `"method" is not a string`
		}
		env.IsRequest = true
		return env, ""
	}
	if e.ID == nil {
		return env, "neither a request (no method) nor a response (no id)"
	}
	return env, ""
}
