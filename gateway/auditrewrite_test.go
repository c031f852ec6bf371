package gateway

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A log cut back below an anchored checkpoint and written on, by a
// gateway restarted on it, fails `verify --anchor` with the genuine
// anchors: its next checkpoint lands on the cut checkpoint's count, and
// the two anchors of that count, with different heads, are the proof
// (attack79 F1: the later anchor replaced the earlier, and the cut log
// verified intact).
func TestALogCutBelowAnAnchorAndWrittenOnFails(t *testing.T) {
	t.Parallel()
	dir, keys := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	a := signedAudit(t, file, keys, nil)
	appendReads(t, a, 6) // checkpoints at lines 4 and 8, each anchored
	a.Close()
	b, _ := os.ReadFile(file)
	cut := bytes.SplitAfter(b, []byte("\n"))[:5]
	if err := os.WriteFile(file, bytes.Join(cut, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	a = signedAudit(t, file, keys, nil) // restarted on the cut log
	appendReads(t, a, 3)                // its checkpoint lands on line 8 again
	a.Close()
	pub, _ := PublicKey(filepath.Join(keys, "audit.key.pub"))
	anchors, err := ReadAnchors(filepath.Join(keys, "audit.anchor"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyLog([]string{file}, pub, anchors)
	if err == nil || !strings.Contains(err.Error(), "both record line 8, with different heads") || !strings.Contains(err.Error(), "two different logs") || !strings.Contains(err.Error(), "restored from a backup (then set aside the anchors written after the backup was taken") {
		t.Fatalf("the cut log with the genuine anchors: %v", err)
	}
}

// An anchor written after another with fewer lines is a log begun again
// below it: verify fails naming both, though the log holds the line the
// later anchor names.
func TestAnchorsWhoseCountGoesBackFail(t *testing.T) {
	t.Parallel()
	dir, keys := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	a := signedAudit(t, file, keys, nil)
	appendReads(t, a, 6)
	a.Close()
	anchors, err := ReadAnchors(filepath.Join(keys, "audit.anchor"))
	if err != nil || len(anchors) != 2 {
		t.Fatalf("anchors: %v %v", anchors, err)
	}
	late := anchors[0]
	late.Time = anchors[1].Time.Add(time.Hour)
	if _, err := VerifyLog([]string{file}, nil, anchors); err != nil {
		t.Fatalf("the genuine anchors: %v", err)
	}
	_, err = VerifyLog([]string{file}, nil, append(anchors, late))
	if err == nil || !strings.Contains(err.Error(), "records line 4, after the anchor of") || !strings.Contains(err.Error(), "line 8") {
		t.Fatalf("an anchor of line 4 written after one of line 8: %v", err)
	}
}
