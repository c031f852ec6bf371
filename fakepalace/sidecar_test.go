package fakepalace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The double records its embedder as MemPalace 3.11.0 does on a palace's
// first write: the same file, bytes and mode (3.11.0 with the openai-compat
// embedder wrote exactly this, with "openai-compat" as the name), nothing
// before a write, other collections kept.
func TestEmbedderSidecarLikeMemPalace(t *testing.T) {
	dir := t.TempDir()
	pl, err := New(Options{Dir: dir, Embedder: "minilm"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(tool string, args map[string]any) {
		t.Helper()
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
		if _, err := pl.Handle(msg); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, SidecarFile)
	call("mempalace_status", map[string]any{})
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a read recorded the embedder (MemPalace records it on a write)")
	}
	call("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "hello world"})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const want = "{\n  \"mempalace_drawers\": {\n    \"model_name\": \"minilm\",\n    \"dimension\": 0\n  }\n}"
	if string(b) != want {
		t.Errorf("sidecar:\n%s\nwant MemPalace's bytes:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %o, want 0600", fi.Mode().Perm())
	}

	other := "{\n  \"mempalace_closets\": {\n    \"model_name\": \"minilm\",\n    \"dimension\": 384\n  }\n}"
	os.WriteFile(path, []byte(other), 0o600)
	call("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "again"})
	var doc map[string]sidecarEntry
	b, _ = os.ReadFile(path)
	if err := json.Unmarshal(b, &doc); err != nil || doc["mempalace_closets"].Dimension != 384 || doc["mempalace_drawers"].ModelName != "minilm" {
		t.Errorf("other collections not kept, or drawers not recorded: %s", b)
	}
	recorded := "{\n  \"mempalace_drawers\": {\n    \"model_name\": \"embeddinggemma\",\n    \"dimension\": 0\n  }\n}"
	os.WriteFile(path, []byte(recorded), 0o600)
	call("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "third"})
	if b, _ := os.ReadFile(path); string(b) != recorded {
		t.Errorf("a recorded identity was rewritten: %s", b)
	}
}
