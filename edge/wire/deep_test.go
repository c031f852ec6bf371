package wire

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary's answer nested a million deep (2 MB, 1/32 of what the edge
// reads of one answer) is refused, not read by recursion: with the stack
// capped at 1/32 of Go's default, a crash means an answer within the
// edge's limit kills the edge (a fatal stack overflow, which no recover
// catches), and every tool call of the agent with it.
func TestDeeplyNestedAnswerIsRefusedNotFatal(t *testing.T) {
	testbed.InSmallStack(t, 1<<30/32, func(t *testing.T) {
		const depth = 1 << 20
		deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		if _, _, ok := AnswerFor([]byte(`{"jsonrpc": "2.0", "id": 1, "result": `+deep+`}`), "1"); ok {
			t.Fatal("an answer nested a million deep was read")
		}
		if _, err := DecodeParams([]byte(`{"name": "x", "arguments": ` + deep + `}`)); err == nil {
			t.Fatal("params nested a million deep were read")
		}
		if _, ok := decodeTextResult([]byte(`{"content": ` + deep + `}`)); ok {
			t.Fatal("a result nested a million deep was read")
		}
	})
}
