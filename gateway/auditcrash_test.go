package gateway

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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
	if _, err := Verify(file, nil); err == nil || !strings.Contains(err.Error(), file+" line 3: not an audit entry") || !strings.Contains(err.Error(), "torn by a crash") {
		t.Fatalf("verify of the torn log before a start: %v", err)
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

// signedAudit opens file as the gateway does with a signing key (in dir),
// a checkpoint every 3 lines and an anchor file; log hears the start.
func signedAudit(t *testing.T, file, dir string, log *slog.Logger) *Audit {
	t.Helper()
	a, err := OpenAudit(file, log)
	if err != nil {
		t.Fatal(err)
	}
	if a.key, err = SigningKey(filepath.Join(dir, "audit.key")); err != nil {
		t.Fatal(err)
	}
	a.cadence, a.anchor.file = Cadence{Lines: 3}, filepath.Join(dir, "audit.anchor")
	return a
}

func appendReads(t *testing.T, a *Audit, n int) {
	t.Helper()
	for range n {
		if err := a.Append(Entry{Time: time.Now(), Device: "d1", Method: "tools/call", Tool: "mempalace_search", Decision: "allow"}, false); err != nil {
			t.Fatal(err)
		}
	}
}

// A gateway restarted after its log was rotated counts on from the
// rotated files' lines: the files joined, oldest first, verify with
// their checkpoints and anchors (attack78 F2: the restart counted from
// the current file, and the untouched log failed "checkpoint signature
// does not verify" and its anchors), and a tamper in them is caught.
func TestTheLineCountSurvivesARestartAfterARotation(t *testing.T) {
	t.Parallel()
	dir, keys := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	a := signedAudit(t, file, keys, nil)
	appendReads(t, a, 4)
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	appendReads(t, a, 4)
	a.Close()
	a = signedAudit(t, file, keys, nil)               // a restart
	gzipAside(t, filepath.Join(keys, "audit.anchor")) // the anchors rotated too
	appendReads(t, a, 4)
	a.Close()
	files := []string{file + ".1", file}
	pub, err := PublicKey(filepath.Join(keys, "audit.key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	anchors, err := ReadAnchors(filepath.Join(keys, "audit.anchor.1.gz"), filepath.Join(keys, "audit.anchor"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := VerifyLog(files, pub, anchors)
	if err != nil || r.Lines != r.Anchor.Lines || r.Unsigned != 0 {
		t.Fatalf("the untouched log, oldest first: %+v %v", r, err)
	}
	if _, err := VerifyLog(files, pub, nil); err != nil {
		t.Fatalf("without anchors: %v", err)
	}
	// An edit in the current file is caught.
	b, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Replace(b, []byte(`"device":"d1"`), []byte(`"device":"d2"`), 5), 0o600)
	if _, err := VerifyLog(files, pub, anchors); err == nil || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("an edited line: %v", err)
	}
}

// A log rotated while the gateway runs, then stopped before its next
// request: the checkpoint it signs as it stops goes to a new file at the
// log's path, so the next start finds the log and chains on (it went to
// the moved file, and the start found no log: the chain began again at
// genesis, or the gateway refused to start, its kept audit log missing).
func TestACheckpointAfterARotationGoesToTheNewFile(t *testing.T) {
	t.Parallel()
	dir, keys := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	a := signedAudit(t, file, keys, nil)
	appendReads(t, a, 2)
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a = signedAudit(t, file, keys, nil)
	appendReads(t, a, 1)
	a.Close()
	pub, _ := PublicKey(filepath.Join(keys, "audit.key.pub"))
	anchors, _ := ReadAnchors(filepath.Join(keys, "audit.anchor"))
	if r, err := VerifyLog([]string{file + ".1", file}, pub, anchors); err != nil || r.Lines != 5 || r.Checkpoint != 5 {
		t.Fatalf("rotated, stopped, started: %+v %v", r, err)
	}
}

// A line whose number is not its place in the files given fails, though
// its chain holds: the count it was signed under is not the log's. A
// gateway started on it counts the lines, not their numbers, and warns
// (review26 D1: the number overrode the count, unwarned).
func TestALineNumberedOtherThanItsPlaceFails(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	one, h := sealLine(Entry{Time: time.Now(), Device: "d1", Method: "ping", Decision: "allow", Prev: "genesis", Line: 1})
	two, _ := sealLine(Entry{Time: time.Now(), Device: "d1", Method: "ping", Decision: "allow", Prev: h, Line: 5})
	os.WriteFile(file, append(one, two...), 0o600)
	if _, err := Verify(file, nil); err == nil || !strings.Contains(err.Error(), "line 2: it says it is line 5 of the log") {
		t.Fatalf("a line numbered 5 in second place: %v", err)
	}
	var logged bytes.Buffer
	a, err := OpenAudit(file, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil || a.lines != 2 || !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "line=2") {
		t.Fatalf("a start on it: count %d, %v, told %q", a.lines, err, logged.String())
	}
}

// An earlier build's log, rotated, with the current file's lines
// unnumbered: the gateway cannot count on, and says so at every start
// until the log is joined; meanwhile it numbers no line and signs no
// checkpoint (their count would be wrong). Joined and restarted as the
// warning says, it counts exactly and the whole log verifies, signatures
// and anchors included (review26 D1: the lines written after the warning
// were numbered from the current file, the start after the mend took
// those numbers, the count went backwards unwarned and verify failed).
func TestAnUnnumberedRotatedLogMendsAsItsWarningSays(t *testing.T) {
	t.Parallel()
	dir, keys := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	var rot, cur []byte // 4 unnumbered lines rotated, 2 after them
	prev := "genesis"
	for i := range 6 {
		l, h := sealLine(Entry{Time: time.Now(), Device: "d1", Method: "ping", Decision: "allow", Prev: prev})
		prev = h
		if i < 4 {
			rot = append(rot, l...)
		} else {
			cur = append(cur, l...)
		}
	}
	os.WriteFile(file+".1", rot, 0o600)
	os.WriteFile(file, cur, 0o600)
	start := func() (*Audit, string) {
		t.Helper()
		var logged bytes.Buffer
		a := signedAudit(t, file, keys, slog.New(slog.NewTextHandler(&logged, nil)))
		return a, logged.String()
	}
	for range 2 { // the gateway runs on after the warning, and starts again
		a, logged := start()
		if !strings.Contains(logged, "carry no line number") {
			t.Fatalf("no warning: %s", logged)
		}
		appendReads(t, a, 4)
		a.Close()
	}
	b1, _ := os.ReadFile(file + ".1")
	b2, _ := os.ReadFile(file)
	os.WriteFile(file, append(b1, b2...), 0o600)
	os.Remove(file + ".1")
	a, logged := start()
	if logged != "" || a.lines != 14 {
		t.Fatalf("after the mend: count %d (the joined log holds 14 lines), told %q", a.lines, logged)
	}
	appendReads(t, a, 4)
	a.Close()
	pub, _ := PublicKey(filepath.Join(keys, "audit.key.pub"))
	anchors, err := ReadAnchors(filepath.Join(keys, "audit.anchor"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := VerifyLog([]string{file}, pub, anchors); err != nil || r.Lines != 20 || r.Anchor.Lines != 20 || r.Unsigned != 0 {
		t.Fatalf("the mended log: %+v %v", r, err)
	}
}

// An append-only log (chattr +a) with a torn last line cannot be cut: the
// start fails naming the fix (chattr -a, start, chattr +a), where it said
// only "operation not permitted" (review26 D5); the log is left as it
// was, and after the fix the start cuts the line off.
func TestATornLineInAnAppendOnlyLogNamesTheFix(t *testing.T) {
	t.Parallel()
	file, b := threeLines(t)
	if err := os.Truncate(file, int64(len(b)-30)); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("chattr", "+a", file).Run(); err != nil {
		t.Skipf("chattr +a (root, on a file system that has it): %v", err)
	}
	t.Cleanup(func() { exec.Command("chattr", "-a", file).Run() }) // else TempDir cannot remove it
	_, err := OpenAudit(file, nil)
	if err == nil || !strings.Contains(err.Error(), "chattr -a "+file) || !strings.Contains(err.Error(), "chattr +a") {
		t.Fatalf("a torn line in an append-only log: %v", err)
	}
	if got, _ := os.ReadFile(file); len(got) != len(b)-30 {
		t.Fatalf("the log changed: %d bytes, had %d", len(got), len(b)-30)
	}
	if err := exec.Command("chattr", "-a", file).Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAudit(file, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := Verify(file, nil); err != nil || n != 2 {
		t.Fatalf("after chattr -a and a start: %d lines, %v", n, err)
	}
	if kept, _ := os.ReadFile(file + ".torn"); bytes.Count(kept, []byte("\n")) != 1 {
		t.Fatalf("the torn line is kept %d times", bytes.Count(kept, []byte("\n")))
	}
}

// A rotated file whose first lines were removed is named with the lines
// its first line's number says are missing, and the chance of a cut at
// either file's edge (review26 O3); a torn last line of a file before the
// last is not said to be cut off at the next start, which reads only the
// last (O4).
func TestAGapBetweenRotatedFilesNamesTheMissingLines(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendReads(t, a, 4)
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	appendReads(t, a, 4)
	a.Close()
	cur, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Join(bytes.SplitAfter(cur, []byte("\n"))[2:], nil), 0o600)
	_, err = VerifyLog([]string{file + ".1", file}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), file+" line 1 (line 5 of the log): its first line does not follow the last line of "+file+".1 (it says it is line 7: lines 5 to 6 are missing)") ||
		!strings.Contains(err.Error(), "removed from the end of "+file+".1 or the start of this file") {
		t.Fatalf("two lines cut from the current file's start: %v", err)
	}
	old, _ := os.ReadFile(file + ".1")
	os.WriteFile(file+".1", old[:len(old)-30], 0o600)
	if _, err = VerifyLog([]string{file + ".1", file}, nil, nil); err == nil || !strings.Contains(err.Error(), file+".1 line 4") || strings.Contains(err.Error(), "next start") {
		t.Fatalf("a torn last line in a rotated file: %v", err)
	}
}

// gzipAside rotates file as logrotate's compress does: into file.1.gz.
func gzipAside(t *testing.T, file string) {
	t.Helper()
	gzipInto(t, file, file+".1.gz")
}

// gzipInto compresses src into dst and removes src.
func gzipInto(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(dst, z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(src)
}
