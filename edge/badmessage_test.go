package edge

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestNonJSONRPCObjectDoesNotEndTheSession: a line that is a JSON object
// but not a message the SDK can decode (no "jsonrpc", a bool or object id,
// an id out of float64 range, a number for "method", neither request nor
// response, nesting deeper than the SDK's limit, a duplicate "jsonrpc" key
// whose last value is wrong) is answered with Invalid Request by the
// guard, and the session goes on: the request after it is answered. Before,
// each ended the SDK's session (the edge exited 1 answering nothing, not
// even the initialize before it); found by an attacker pass.
func TestNonJSONRPCObjectDoesNotEndTheSession(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001)
	for _, bad := range []string{
		`{}`,
		`{"id":7,"method":"ping"}`,
		`{"jsonrpc":"1.0","id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"method":5}`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping","params":` + deep + `}`,
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":7,"method":"ping"}`,
		`{"JSONRPC":"2.0","id":7,"method":"ping"}`,
	} {
		name := bad
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			h := start(t, harnessOpts{raw: true, passThrough: true})
			ping := `{"jsonrpc":"2.0","id":"after","method":"ping"}` + "\n"
			if _, err := io.WriteString(h.in, pipedInitialize+bad+"\n"+ping); err != nil {
				t.Fatal(err)
			}
			var got []string
			answered := map[string]bool{}
			deadline := time.After(30 * time.Second)
			for !answered["after"] {
				select {
				case m, ok := <-h.lines:
					if !ok {
						t.Fatalf("the session ended; the edge wrote:\n%s", strings.Join(got, "\n"))
					}
					b, _ := json.Marshal(m)
					got = append(got, string(b))
					answered[fmt.Sprint(m["id"])] = true
				case <-deadline:
					t.Fatalf("the request after the bad line is unanswered; the edge wrote:\n%s", strings.Join(got, "\n"))
				}
			}
			out := strings.Join(got, "\n")
			if !answered["1"] {
				t.Fatalf("initialize unanswered:\n%s", out)
			}
			if !strings.Contains(out, `"code":-32600`) {
				t.Fatalf("the bad line got no Invalid Request:\n%s", out)
			}
		})
	}
}
