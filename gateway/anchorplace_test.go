package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// audit_anchor is checked where it will be written: a relative one is
// relative to the config's directory, so one that lands in the audit
// log's directory is refused however the paths are written (before, the
// check ran before the paths were resolved, against the working
// directory: "audit/anchor.txt" beside an absolute audit_log in
// <dir>/audit/ loaded; the reviewer's note).
func TestAnchorInTheLogsDirectoryIsRefusedWhereverWritten(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.jsonc")
	for _, c := range []struct{ log, anchor string }{
		{filepath.Join(dir, "audit", "audit.jsonl"), "audit/anchor.txt"},
		{"audit/audit.jsonl", filepath.Join(dir, "audit", "anchor.txt")},
		{"audit/audit.jsonl", "audit/anchor.txt"},
	} {
		body := `{"secret_file": "s", "signing_key_file": "k", "audit_log": "` + c.log + `", "audit_anchor": "` + c.anchor + `", "devices": []}`
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(file)
		if err == nil || !strings.Contains(err.Error(), "is in the audit log's directory") {
			t.Errorf("audit_log %s, audit_anchor %s: %v", c.log, c.anchor, err)
		}
	}
	body := `{"secret_file": "s", "signing_key_file": "k", "audit_log": "audit/audit.jsonl", "audit_anchor": "anchor/anchor.txt", "devices": []}`
	os.WriteFile(file, []byte(body), 0o600)
	if _, err := LoadConfig(file); err != nil {
		t.Errorf("an anchor outside the log's directory: %v", err)
	}
}
