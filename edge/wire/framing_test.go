package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// An agent message over MaxMessage is answered with Invalid Request
// "Request too large" under its id when the id can be read from the
// message's start (Go's and Python's SDKs write it before params) or is
// its last member (the TypeScript SDK's {...request, jsonrpc, id}); the
// client then fails the call at once instead of waiting out its own
// timeout (found by an outside tester: the call hung). An id neither
// there can only be answered with a null id. The session goes on.
func TestAMessageOverTheCapIsAnsweredUnderItsID(t *testing.T) {
	big := strings.Repeat("x", MaxMessage)
	for _, tc := range []struct{ name, msg, id string }{
		{"id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"content":"` + big + `"}}}`, `7`},
		{"id last", `{"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"content":"` + big + `"}},"jsonrpc":"2.0","id":"a\"b\\"}`, `"a\"b\\"`},
		{"id last, spaced", `{"method":"tools/call","params":{"arguments":{"content":"` + big + `"}}, "id" : -12 }`, `-12`},
		{"id in the middle", `{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"content":"` + big + `"}},"id":8,"x":1}`, `null`},
		{"an id nested last", `{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"content":"` + big + `","id":5}}}`, `null`},
		{"an id in a string last", `{"jsonrpc":"2.0","method":"tools/call","params":{},"note":"` + big + `\",\"id\":9"}`, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			in := strings.NewReader(tc.msg + "\n" + `{"jsonrpc":"2.0","id":"after","method":"ping"}` + "\n")
			passed, err := io.ReadAll(GuardInput(in, &out, slog.New(slog.DiscardHandler), nil, nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(passed), `"after"`) || strings.Contains(string(passed), "xxxx") {
				t.Errorf("the guard handed on %.200q, want the ping after the refused message alone", passed)
			}
			var a struct {
				ID    json.RawMessage
				Error struct {
					Code    int
					Message string
				}
			}
			if err := json.Unmarshal(out.Bytes(), &a); err != nil {
				t.Fatalf("answer %q: %v", out.String(), err)
			}
			if string(a.ID) != tc.id || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, "too large") {
				t.Errorf("answer %s, want id %s, code -32600, Request too large", out.String(), tc.id)
			}
		})
	}
}
