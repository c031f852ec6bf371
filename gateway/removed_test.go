package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A removed device's id is remembered: an id both removed and in the
// devices is refused (its records and trust would carry over).
func TestConfigRefusesARemovedIDAmongTheDevices(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"removed_devices\": [\"bob-02\"],\n  \"devices\": [\n    {\"id\": \"bob-02\"},\n  ],\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadConfig(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":4:23: removed_devices[0]: \"bob-02\" was removed") {
		t.Errorf("got %v, want %s:4:23: removed_devices[0]: \"bob-02\" was removed...", err, file)
	}
}
