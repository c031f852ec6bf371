package gateway

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oldRotatedLog writes a log as an older release restarted on it after
// a rotation left it: four unnumbered lines in file.1, two in file, the
// second line's device is device, then a checkpoint numbered line (0:
// none, as the older release wrote it) whose signature sign makes of its
// head. It returns the head.
func oldRotatedLog(t *testing.T, file, device string, line int, sign func(head string) string) string {
	t.Helper()
	var rot, cur []byte
	prev := "genesis"
	for i := range 6 {
		e := Entry{Time: time.Unix(int64(i), 0).UTC(), Device: "d1", Method: "ping", Decision: "allow", Prev: prev}
		if i == 1 {
			e.Device = device
		}
		l, h := sealLine(e)
		prev = h
		if i < 4 {
			rot = append(rot, l...)
		} else {
			cur = append(cur, l...)
		}
	}
	c, _ := sealLine(Entry{Time: time.Unix(9, 0).UTC(), Method: "checkpoint", Decision: VerdictCheckpoint, Prev: prev, Sig: sign(prev), Line: line})
	if os.WriteFile(file+".1", rot, 0o600) != nil || os.WriteFile(file, append(cur, c...), 0o600) != nil {
		t.Fatal("cannot write the log")
	}
	return prev
}

// A checkpoint an older release signed after a restart on a rotated log
// counts the lines of its file alone (2), not the log's (6): verify
// accepts it and reports it, where it failed "checkpoint signature does
// not verify" on an untouched log (attack83's upgrade check). A line
// before it rewritten (hashes recomputed, the signature kept), a
// signature that fits neither count, or a numbered checkpoint signed
// over its file's count still fail.
func TestAnOlderReleasesFileCountedCheckpointVerifies(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	signed := func(head string, n int) string {
		return hex.EncodeToString(ed25519.Sign(key, fmt.Appendf(nil, "%s|%d", head, n)))
	}
	counting := func(n int) func(string) string { return func(head string) string { return signed(head, n) } }
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	files := []string{file + ".1", file}
	head := oldRotatedLog(t, file, "d1", 0, counting(2))
	r, err := VerifyLog(files, pub, nil)
	if err != nil || r.Lines != 7 || r.Checkpoint != 7 || r.Unsigned != 0 || r.FileCounted != 1 {
		t.Fatalf("an older release's checkpoint counting its file: %+v %v", r, err)
	}
	for name, write := range map[string]func(){
		"a line before it rewritten":   func() { oldRotatedLog(t, file, "dX", 0, func(string) string { return signed(head, 2) }) },
		"a signature of neither count": func() { oldRotatedLog(t, file, "d1", 0, counting(5)) },
		"a numbered checkpoint":        func() { oldRotatedLog(t, file, "d1", 7, counting(2)) },
	} {
		write()
		if r, err := VerifyLog(files, pub, nil); err == nil || !strings.Contains(err.Error(), file+" line 3 (line 7 of the log): checkpoint signature does not verify") || r.FileCounted != 0 {
			t.Errorf("%s: %+v %v", name, r, err)
		}
	}
}
