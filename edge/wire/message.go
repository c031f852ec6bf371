package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/jsondepth"
)

// ErrNoResult is an answer with neither a result object nor an error.
var ErrNoResult = errors.New("answered without a result")

// Request is a JSON-RPC request with a string id (the edge's own ids, to
// the child and to the primary alike); params as they are, {} if empty.
func Request(id, method string, params json.RawMessage) []byte {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	msg := make([]byte, 0, len(params)+len(method)+64)
	msg = append(msg, `{"jsonrpc":"2.0","id":"`...)
	msg = append(msg, id...)
	msg = append(msg, `","method":`...)
	msg = strconv.AppendQuote(msg, method)
	msg = append(msg, `,"params":`...)
	msg = append(msg, params...)
	return append(msg, '}')
}

// Cancellation is notifications/cancelled for the call with id.
func Cancellation(id, reason string) []byte {
	n, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": id, "reason": reason}}) // a string: it encodes
	return n
}

// SplitAnswer splits a response (valid JSON, checked by the caller) into
// its result or the JSON-RPC error it carries.
func SplitAnswer(line []byte) (json.RawMessage, *jsonrpc.Error, error) {
	f := gjson.GetManyBytes(line, "result", "error")
	if f[1].Exists() && f[1].Type != gjson.Null {
		var rpcErr jsonrpc.Error
		if err := json.Unmarshal([]byte(f[1].Raw), &rpcErr); err != nil {
			return nil, nil, fmt.Errorf("an error answer that is not JSON-RPC's: %w", err)
		}
		return nil, &rpcErr, nil
	}
	if !f[0].IsObject() {
		return nil, nil, ErrNoResult
	}
	return json.RawMessage(f[0].Raw), nil, nil
}

// AnswerFor picks the result or error out of a JSON-RPC response to id,
// the body of the HTTP response to it (false: not JSON, another id, or
// neither a result nor an error). An error with id null is its answer
// too: the server could not read the id it refused (JSON-RPC 2.0 §5, a
// gateway's strict parse of an earlier release), so it was refused, not
// lost.
func AnswerFor(b []byte, id string) (json.RawMessage, *jsonrpc.Error, bool) {
	if !jsondepth.Valid(b) {
		return nil, nil, false
	}
	f := gjson.GetManyBytes(b, "id", "error")
	if f[0].String() != id && (f[0].Type != gjson.Null || !f[1].IsObject()) {
		return nil, nil, false
	}
	result, rpcErr, err := SplitAnswer(b)
	return result, rpcErr, err == nil
}

// ReadEventAnswer reads an event stream (text/event-stream) until the
// response to id; notifications and requests on the way are skipped.
func ReadEventAnswer(r io.Reader, id string, max int) ([]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0: // the end of an event
			if len(data) > 0 && gjson.GetBytes(data, "id").String() == id {
				return data, nil
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if len(data) > 0 && gjson.GetBytes(data, "id").String() == id {
		return data, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the event stream ended without an answer")
}
