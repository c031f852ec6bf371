package wire

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// A primary's answer nested a million deep (2 MB, 1/32 of what the edge
// reads of one answer) is refused, not read by recursion: in a child
// process whose stack is capped at 1/32 of Go's default, a crash means an
// answer within the edge's limit kills the edge (a fatal stack overflow,
// which no recover catches), and every tool call of the agent with it.
func TestDeeplyNestedAnswerIsRefusedNotFatal(t *testing.T) {
	const depth = 1 << 20
	if os.Getenv("WIRE_DEEP") == "1" {
		debug.SetMaxStack(1 << 30 / 32)
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
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeeplyNestedAnswerIsRefusedNotFatal$")
	cmd.Env = append(os.Environ(), "WIRE_DEEP=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		i := strings.Index(string(out), "fatal error")
		t.Fatalf("the edge crashed on a deeply nested answer: %v: %.200s", err, out[max(i, 0):])
	}
}
