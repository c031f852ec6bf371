package fakepalace_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// The sidecar on both sides: real MemPalace 3.11.0 (openai-compat, which
// it records by that bare name) and the double told the same name record
// nothing on a read, and the same bytes and mode on the first write.
func TestEmbedderSidecarAgainstRealMemPalace(t *testing.T) {
	p := realpalace.New(t)
	real := p.Stdio(t).Client
	doubleDir := t.TempDir()
	double, err := New(Options{Dir: doubleDir, Embedder: "openai-compat"})
	if err != nil {
		t.Fatal(err)
	}
	callDouble := func(tool string, args map[string]any) {
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
		if _, err := double.Handle(msg); err != nil {
			t.Fatal(err)
		}
	}
	callReal := func(tool string, args map[string]any) { real.MustCall(t, tool, args) }
	written := map[string][]byte{}
	for name, side := range map[string]struct {
		dir  string
		call func(string, map[string]any)
	}{"real": {p.Dir, callReal}, "double": {doubleDir, callDouble}} {
		path := filepath.Join(side.dir, SidecarFile)
		side.call("mempalace_status", map[string]any{})
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a read recorded the embedder", name)
		}
		side.call("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "hello world"})
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: no sidecar after the first write: %v", name, err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o", name, fi.Mode().Perm())
		}
		written[name] = b
	}
	if string(written["real"]) != string(written["double"]) {
		t.Errorf("the sidecars differ:\nreal:\n%s\ndouble:\n%s", written["real"], written["double"])
	}
}
