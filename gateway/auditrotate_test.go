package gateway

import (
	"bytes"
	"compress/gzip"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rotatedAway is a signed log of two reads and the checkpoint of its
// stop, moved to audit.jsonl.1 as the documented rotation does (mv, or
// logrotate nocreate): the log file's path and the keys' directory.
func rotatedAway(t *testing.T) (file, keys string) {
	t.Helper()
	file, keys = filepath.Join(t.TempDir(), "audit.jsonl"), t.TempDir()
	a := signedAudit(t, file, keys, nil)
	appendReads(t, a, 2)
	a.Close()
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	return file, keys
}

// restartAndVerify starts the log again, as the gateway does with its
// key and anchor file, adds a read and stops; files, oldest first, must
// verify with the anchors as one log of five lines. It returns what the
// start logged.
func restartAndVerify(t *testing.T, file, keys string, files ...string) string {
	t.Helper()
	var logged bytes.Buffer
	a, err := OpenAudit(file, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if a.key, err = SigningKey(filepath.Join(keys, "audit.key")); err != nil {
		t.Fatal(err)
	}
	a.cadence, a.anchor.file = Cadence{Lines: 3}, filepath.Join(keys, "audit.anchor")
	appendReads(t, a, 1)
	a.Close()
	pub, _ := PublicKey(filepath.Join(keys, "audit.key.pub"))
	anchors, _ := ReadAnchors(filepath.Join(keys, "audit.anchor"))
	if r, err := VerifyLog(files, pub, anchors); err != nil || r.Lines != 5 || r.Checkpoint != 5 {
		t.Fatalf("the rotated file and the new one, after the restart: %+v %v", r, err)
	}
	return logged.String()
}

// A log rotated away while the gateway was stopped (or before its next
// line, then a restart) chains on from the rotated file's last line: the
// rotated file and the new one verify as one log (attack79 F2: the start
// found no log; made empty by hand, it began a new chain at genesis that
// never verified with audit.jsonl.1).
func TestARestartAfterARotationChainsOnFromTheRotatedFile(t *testing.T) {
	t.Parallel()
	file, keys := rotatedAway(t)
	logged := restartAndVerify(t, file, keys, file+".1", file)
	if !strings.Contains(logged, "level=INFO") || !strings.Contains(logged, "chained_from="+file+".1") {
		t.Fatalf("the start does not say which file it chained on from: %s", logged)
	}
	file, keys = rotatedAway(t)
	if err := os.WriteFile(file, nil, 0o600); err != nil { // an empty file put in its place
		t.Fatal(err)
	}
	if logged := restartAndVerify(t, file, keys, file+".1", file); !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "chained_from="+file+".1") {
		t.Fatalf("an empty log file's start: %s", logged)
	}
}

// A rotated file logrotate compressed at once (audit.jsonl.1.gz) is
// chained on from alike.
func TestARestartAfterACompressedRotationChainsOn(t *testing.T) {
	t.Parallel()
	file, keys := rotatedAway(t)
	b, err := os.ReadFile(file + ".1")
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(file+".1.gz", z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(file + ".1")
	restartAndVerify(t, file, keys, file+".1.gz", file)
}

// A crash that tears the only line of the file a rotation began leaves
// it empty once the tear is cut off: the chain goes on from the rotated
// file's last line, as the warning says (attack79 F3: it began anew at
// genesis, and the log never verified again).
func TestATornOnlyLineAfterARotationChainsOnFromTheRotatedFile(t *testing.T) {
	t.Parallel()
	file, keys := rotatedAway(t)
	a := signedAudit(t, file, keys, nil)
	appendReads(t, a, 1) // the new file's first line
	a.f.Close()          // a crash: no checkpoint at a stop
	if err := os.Truncate(file, 120); err != nil {
		t.Fatal(err)
	}
	restartAndVerify(t, file, keys, file+".1", file)
	if b, err := os.ReadFile(file + ".torn"); err != nil || len(b) != 121 {
		t.Fatalf("the torn line kept aside: %q %v", b, err)
	}
}

// A log file with no line and no rotated file beside it starts a new
// chain only with a warning that says so and how to chain on instead.
func TestAnEmptyLogWithNothingRotatedWarnsOfANewChain(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	if _, err := OpenAudit(file, slog.New(slog.NewTextHandler(&logged, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "a new chain starts from genesis") || !strings.Contains(logged.String(), "audit.jsonl.1") {
		t.Fatalf("an empty log's start: %q", logged.String())
	}
}
