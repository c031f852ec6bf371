package edge

import (
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
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
	child := testbed.Build(t, "./cmd/fakepalace", "mempalace-mcp")
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
			ping := `{"jsonrpc":"2.0","id":"after","method":"ping"}` + "\n"
			out, errOut, _ := runPiped(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + t.TempDir()},
				pipedInitialize+bad+"\n"+ping, 30*time.Second)
			got := answers(t, out)
			if _, ok := got["1"]; !ok {
				t.Fatalf("initialize unanswered:\n%s\n%s", out, errOut)
			}
			if _, ok := got["after"]; !ok {
				t.Fatalf("the request after the bad line is unanswered (the session ended):\n%s\n%s", out, errOut)
			}
			if !strings.Contains(out, `"code":-32600`) {
				t.Fatalf("the bad line got no Invalid Request:\n%s", out)
			}
		})
	}
}
