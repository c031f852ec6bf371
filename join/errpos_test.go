package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bootstrap.json that does not parse names its line and column and the
// fix, and is left as it was.
func TestCheckpointErrorNamesLineColumnAndFix(t *testing.T) {
	palace := t.TempDir()
	file := checkpointPath(palace)
	os.MkdirAll(filepath.Dir(file), 0o700)
	body := "{\n  \"http://p/mcp\": {\"state\": \"complete\"\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := readCheckpoint(palace)
	if err == nil || !strings.HasPrefix(err.Error(), file+":4:1: ") || !strings.Contains(err.Error(), "(fix: close every") || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("got %v, want %s:4:1: ... (fix: close every ... move it aside ...", err, file)
	}
	if b, _ := os.ReadFile(file); string(b) != body {
		t.Error("bootstrap.json changed")
	}
}

// A join that meets an unreadable bootstrap.json records its own target
// all the same (the join outboxes know what each target was sent), but the
// file's bytes, other targets' entries among them, are kept beside it.
func TestCheckpointUnreadableIsKeptAside(t *testing.T) {
	palace := t.TempDir()
	file := checkpointPath(palace)
	os.MkdirAll(filepath.Dir(file), 0o700)
	body := "{\"http://other/mcp\": {\"state\": \"complete\"},\n  broken\n"
	os.WriteFile(file, []byte(body), 0o600)
	if err := writeCheckpoint(palace, "http://p/mcp", TargetState{State: StateComplete}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file + ".unreadable"); err != nil || string(b) != body {
		t.Errorf("the unreadable file's bytes were not kept beside it: %q %v", b, err)
	}
	if cp, err := readCheckpoint(palace); err != nil || cp["http://p/mcp"].State != StateComplete {
		t.Errorf("this target's entry: %+v %v", cp, err)
	}
}
