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
