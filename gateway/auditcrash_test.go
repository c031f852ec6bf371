package gateway

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// threeLines is a log of three read lines, closed, and its bytes.
func threeLines(t *testing.T) (file string, b []byte) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.Append(Entry{Time: time.Now(), Device: "d1", Method: "tools/call", Tool: "mempalace_search", Decision: "allow"}, false); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	b, err = os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, b
}

// A crash or power cut that tears the log's last line (no newline, the
// line unfinished) leaves a log the next start cuts it from, keeping the
// fragment aside: the next line starts a line of its own and the chain
// verifies (attack78 F1: it was glued onto the fragment, and the log
// never verified again).
func TestATornLastAuditLineIsCutOffAndKept(t *testing.T) {
	t.Parallel()
	file, b := threeLines(t)
	if err := os.Truncate(file, int64(len(b)-30)); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	a, err := OpenAudit(file, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(Entry{Time: time.Now(), Device: "d1", Method: "tools/call", Decision: "allow"}, true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n, err := Verify(file, nil); err != nil || n != 3 {
		t.Fatalf("after a torn last line: %d lines, %v", n, err)
	}
	last := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	kept, err := os.ReadFile(file + ".torn")
	if want := string(b[last:len(b)-30]) + "\n"; err != nil || string(kept) != want {
		t.Fatalf("the fragment kept aside: %q %v, want %q", kept, err, want)
	}
	if w := fmt.Sprintf("bytes=%d", len(kept)-1); !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), w) || !strings.Contains(logged.String(), file+".torn") {
		t.Fatalf("the cut is not told (want a WARN with %s and the side file): %s", w, logged.String())
	}
}

// A last line whole but for its newline (the write cut just before it)
// is kept: the newline is written before the next line.
func TestALastLineMissingOnlyItsNewlineIsKept(t *testing.T) {
	t.Parallel()
	file, b := threeLines(t)
	if err := os.Truncate(file, int64(len(b)-1)); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(Entry{Time: time.Now(), Device: "d1", Method: "tools/call", Decision: "allow"}, true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n, err := Verify(file, nil); err != nil || n != 4 {
		t.Fatalf("after a last line without its newline: %d lines, %v", n, err)
	}
	if _, err := os.Stat(file + ".torn"); !os.IsNotExist(err) {
		t.Fatalf("a whole line was set aside: %v", err)
	}
}
