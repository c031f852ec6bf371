package gateway

import (
	"bytes"
	"compress/gzip"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	gzipInto(t, file+".1", file+".1.gz")
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

// gzipFile writes b, gzip-compressed, to file.
func gzipFile(t *testing.T, file string, b []byte) {
	t.Helper()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(file, z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A rotated file with no audit line (an empty audit.jsonl.1, or a .1.gz
// of anything else) is no log to chain on from: the start is as with none
// beside an empty log, a new chain that it warns of (attack81 F3: INFO "goes on
// from the rotated file", lines=0, at genesis).
func TestARotatedFileWithNoAuditLineIsNoneToChainOnFrom(t *testing.T) {
	t.Parallel()
	for _, name := range []string{".1", ".1.gz"} {
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		os.WriteFile(file, nil, 0o600)
		if name == ".1" {
			os.WriteFile(file+name, nil, 0o600)
		} else {
			gzipFile(t, file+name, []byte("not an audit line\n"))
		}
		if r := Rotated(file); r != "" {
			t.Errorf("%s with no audit line is taken as the rotated log: %q", name, r)
		}
		var logged bytes.Buffer
		if _, err := OpenAudit(file, slog.New(slog.NewTextHandler(&logged, nil))); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logged.String(), "chained_from") || !strings.Contains(logged.String(), "a new chain starts from genesis") {
			t.Errorf("%s with no audit line: %s", name, logged.String())
		}
	}
}

// rotatedAt is a rotated file (audit.jsonl.1) of one line numbered n,
// which says it follows a line before it (prev not genesis, as after
// another rotation) when after is true: the log file's path.
func rotatedAt(t *testing.T, n int, after bool) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	prev := "genesis"
	if after {
		prev = strings.Repeat("0", 64)
	}
	line, _ := sealLine(Entry{Time: time.Now(), Method: "ping", Line: n, Prev: prev})
	if err := os.WriteFile(file+".1", line, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// A rotated file whose line number cannot be the log's (not positive,
// or past any count a log reaches) leaves the count unknown, with the
// warning of an uncounted log, not a number the next line wraps from
// (attack81 F4: at the max int64 the next line was numbered negative and
// anchors signed with it); one whose number is not its place in a file
// that starts at genesis is counted by its place, with a warning.
func TestARotatedFilesImplausibleLineNumberIsNotCountedOn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n         int
		after     bool
		want      int // the next line's number (0: none)
		warnAbout string
	}{
		{math.MaxInt64, true, 0, "carry no line number"},
		{-5, true, 0, "carry no line number"},
		{1 << 60, true, 0, "carry no line number"},
		{41, true, 42, ""},
		{math.MaxInt64, false, 2, "not its place"},
	} {
		var logged bytes.Buffer
		a, err := OpenAudit(rotatedAt(t, c.n, c.after), slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.number(); got != c.want || c.warnAbout != "" && !strings.Contains(logged.String(), c.warnAbout) {
			t.Errorf("rotated line %d (after a rotation: %v): the next is numbered %d, want %d; logged %s", c.n, c.after, got, c.want, logged.String())
		}
	}
}

// Both audit.jsonl.1 and audit.jsonl.1.gz beside an empty log, and
// different: the start is refused naming both, since the gateway would
// otherwise pick which history to sign on from (attack81 F5: it took .1,
// a copy cut one line short, and the signed stop checkpoint was gone);
// the same two are taken.
func TestTwoDifferentRotatedFilesAreRefused(t *testing.T) {
	t.Parallel()
	file, _ := rotatedAway(t)
	whole, err := os.ReadFile(file + ".1")
	if err != nil {
		t.Fatal(err)
	}
	gzipFile(t, file+".1.gz", whole)
	if _, err := OpenAudit(file, nil); err != nil {
		t.Fatalf("the same log, compressed and not: %v", err)
	}
	cut := whole[:bytes.LastIndexByte(whole[:len(whole)-1], '\n')+1]
	os.WriteFile(file+".1", cut, 0o600)
	_, err = OpenAudit(file, nil)
	if err == nil || !strings.Contains(err.Error(), file+".1 ") || !strings.Contains(err.Error(), file+".1.gz") {
		t.Fatalf("two different rotated files: %v", err)
	}
}

// A rotated file's line longer than any line the gateway writes is
// refused, naming the file, before it is read whole (attack81 F6: a
// 1.8 MB .1.gz of one 400 MB line took the start to 920 MB).
func TestARotatedFilesHugeLineIsRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	gzipFile(t, file+".1.gz", bytes.Repeat([]byte("a"), 4<<20))
	_, err := OpenAudit(file, nil)
	if err == nil || !strings.Contains(err.Error(), file+".1.gz") || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("a 4 MiB line in the rotated file: %v", err)
	}
}
