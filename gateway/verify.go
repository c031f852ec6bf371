package gateway

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/joakimp/devbox-config/strictjson"
)

// Report is what verifying a log found.
type Report struct {
	Lines int
	// Checkpoint is the last checkpoint's line number (0: none), and
	// CheckpointAt its time; Unsigned counts the lines after it, which no
	// signature covers (a cut among them is caught only by an anchor
	// written after them).
	Checkpoint   int
	CheckpointAt time.Time
	Unsigned     int
	// Signed: checkpoint signatures were checked (a public key was given).
	Signed bool
	// FileCounted counts the checkpoints, unnumbered, whose signature
	// counts the lines of their file alone, not of the log: an older
	// release signed so after a restart on a rotated log.
	FileCounted int
	// Anchor is the furthest anchor checked (Lines 0: none given).
	Anchor Anchor
}

// ErrCut: the log is shorter than an anchor says it was.
var ErrCut = errors.New("lines were removed from the log's end")

// VerifyLog checks a log's chain across its files, oldest first, and
// reports the first broken line by its file and its line there. Each
// line's hash covers its exact bytes (up to the hash field), and a line
// with a field twice, two fields differing only in case or a field an
// entry does not have is refused: what verifies is what a reader of the
// line sees. With a public key it also checks every signed checkpoint, so
// a log rewritten from the start with recomputed hashes is still caught.
// Each anchor (ReadAnchors) must find its line with its hash: a log cut
// below an anchor's count, or rewritten up to it, fails. Line numbers,
// checkpoints and anchors count across the files; a gzip-compressed file
// (a rotation logrotate compressed) is read as its content.
func VerifyLog(files []string, pub ed25519.PublicKey, anchors []Anchor) (Report, error) {
	at, err := anchorsByLine(anchors)
	if err != nil {
		return Report{Signed: pub != nil}, err
	}
	v := logCheck{r: Report{Signed: pub != nil}, pub: pub, at: at, prev: "genesis", files: files}
	for _, an := range anchors {
		if an.Lines > v.r.Anchor.Lines {
			v.r.Anchor = an
		}
	}
	for k := range files {
		if err := v.verifyFile(k); err != nil {
			return v.r, err
		}
	}
	if r := v.r; r.Anchor.Lines > r.Lines {
		return r, fmt.Errorf("%w: the log ends at line %d, but the anchor written at %s says it had %d lines (line %d hashed to %.12s…)",
			ErrCut, r.Lines, r.Anchor.Time.Format(time.RFC3339), r.Anchor.Lines, r.Anchor.Lines, r.Anchor.Head)
	}
	return v.r, nil
}

// logCheck is VerifyLog's progress through the files: the report so
// far, the chain's head and the anchors by their line.
type logCheck struct {
	r     Report
	pub   ed25519.PublicKey
	at    map[int]Anchor
	prev  string
	files []string
}

// verifyFile checks the lines of files[k], which follow the lines before.
func (v *logCheck) verifyFile(k int) error {
	file := v.files[k]
	b, err := readLog(file)
	if err != nil {
		return err
	}
	before, lines := v.r.Lines, bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		e, err := checkLine(line, v.prev, v.r.Lines, v.pub)
		switch {
		case errors.Is(err, errChain) && v.r.Lines == before && k > 0:
			err = v.notFollowing(k, e.Line)
		case errors.Is(err, errSignature) && e.Line == 0 && signs(v.pub, e, v.r.Lines-before):
			// An older release restarted on a rotated log counted its file
			// alone; the head it signed still binds every line before.
			err = nil
			v.r.FileCounted++
		case err != nil && i == len(lines)-1 && k == len(v.files)-1 && !bytes.HasSuffix(b, []byte("\n")):
			err = fmt.Errorf("%w; the file's last line, with no newline: torn by a crash while it was written, the gateway cuts it off at its next start (into %s.torn)", err, file)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", v.where(k, i), err)
		}
		if an, ok := v.at[v.r.Lines+1]; ok && an.Head != e.Hash {
			return fmt.Errorf("%s is not the line the anchor of %s recorded (the log was rewritten up to it)", v.where(k, i), an.Time.Format(time.RFC3339))
		}
		v.r.Lines++
		v.prev = e.Hash
		v.r.Unsigned++
		if e.Decision == VerdictCheckpoint {
			v.r.Checkpoint, v.r.CheckpointAt, v.r.Unsigned = v.r.Lines, e.Time, 0
		}
	}
	return nil
}

// where names line i of files[k], the log's line v.r.Lines+1.
func (v *logCheck) where(k, i int) string {
	if len(v.files) == 1 {
		return fmt.Sprintf("%s line %d", v.files[k], i+1)
	}
	return fmt.Sprintf("%s line %d (line %d of the log)", v.files[k], i+1, v.r.Lines+1)
}

// notFollowing is the error of files[k]'s first line, numbered says (0:
// none), whose chain does not go on from the file before it.
func (v *logCheck) notFollowing(k, says int) error {
	n := v.r.Lines + 1
	var missing string
	switch {
	case says > n:
		missing = fmt.Sprintf(" (it says it is line %d: lines %d to %d are missing)", says, n, says-1)
	case says != 0 && says < n:
		missing = fmt.Sprintf(" (it says it is line %d, which a file before it holds: a file given twice or out of order?)", says)
	}
	return fmt.Errorf("its first line does not follow the last line of %s%s: give the files oldest first, with none missing between them; otherwise lines were removed from the end of %s or the start of this file", v.files[k-1], missing, v.files[k-1])
}

// anchorsByLine is each anchor by its line, refusing anchors that
// vouch for two logs: two with one line and different heads, or one
// written after another with fewer lines. A gateway only counts on, so
// either is a log cut back below an anchor and written on (its next
// checkpoint lands on the old count: attack79 F1), or begun anew.
func anchorsByLine(anchors []Anchor) (map[int]Anchor, error) {
	inTime := slices.Clone(anchors)
	slices.SortStableFunc(inTime, func(a, b Anchor) int { return a.Time.Compare(b.Time) })
	at, last := map[int]Anchor{}, Anchor{}
	for _, an := range inTime {
		if was, ok := at[an.Lines]; ok && was.Head != an.Head {
			return nil, fmt.Errorf("the anchors of %s and %s both record line %d, with different heads: %w", was.Time.Format(time.RFC3339), an.Time.Format(time.RFC3339), an.Lines, errTwoLogs)
		}
		if an.Lines < last.Lines {
			return nil, fmt.Errorf("the anchor of %s records line %d, after the anchor of %s recorded line %d: %w", an.Time.Format(time.RFC3339), an.Lines, last.Time.Format(time.RFC3339), last.Lines, errTwoLogs)
		}
		at[an.Lines], last = an, an
	}
	return at, nil
}

// errTwoLogs: the anchors given vouch for two different logs.
var errTwoLogs = errors.New("they vouch for two different logs: the log was cut back below an anchor and written on (rewritten), begun anew with --new-state (then give --anchor only the anchors written since that start), or restored from a backup (then set aside the anchors written after the backup was taken, with the log they vouch for)")

// readLog reads one file of the log, gunzipping a compressed one.
func readLog(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // gzip's magic: no line starts so
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: gzip: %w", file, err)
	}
	if b, err = io.ReadAll(zr); err != nil {
		return nil, fmt.Errorf("%s: gzip: %w", file, err)
	}
	return b, nil
}

// errChain: a line's prev is not the hash of the line before it.
var errChain = errors.New("chain broken (a line was dropped, inserted or reordered before it)")

// checkLine checks one line, which follows n lines of the log, against
// the chain. Checkpoints are told by their decision: a request's line
// never has it (its method is whatever the client sent, "checkpoint"
// included).
func checkLine(line []byte, prev string, n int, pub ed25519.PublicKey) (Entry, error) {
	var e Entry
	if _, err := strictjson.Decode(line); err != nil {
		return e, fmt.Errorf("not an audit entry: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("not an audit entry: %w", err)
	}
	prefix, hash, ok := splitLine(line)
	if !ok || hash != e.Hash {
		return e, errors.New("not an audit entry: it must end with its hash field")
	}
	if e.Prev != prev && n == 0 {
		return e, errors.New("the chain does not start here: the first line follows a line this file does not hold (a log rotated away while the gateway ran, or lines cut from its start); verify a rotated log with the files before it, oldest first: gateway audit verify audit.jsonl.2.gz audit.jsonl.1 audit.jsonl")
	}
	if e.Prev != prev {
		return e, errChain
	}
	if lineHash(prefix) != e.Hash {
		return e, errors.New("edited (its hash does not match its bytes)")
	}
	if e.Line != 0 && e.Line != n+1 {
		return e, fmt.Errorf("it says it is line %d of the log: a file before it is missing (give every file from the first the gateway wrote, oldest first), or the gateway that wrote it had lost count (it warned so at its start)", e.Line)
	}
	if e.Decision == VerdictCheckpoint && pub != nil && !signs(pub, e, n) {
		return e, errSignature
	}
	return e, nil
}

// errSignature: a checkpoint's signature is not of its head and count.
var errSignature = errors.New("checkpoint signature does not verify (the log before it was rewritten)")

// signs says checkpoint e's signature is of its head (prev) and a count
// of n lines before it.
func signs(pub ed25519.PublicKey, e Entry, n int) bool {
	sig, _ := hex.DecodeString(e.Sig) // a signature that is not hex does not verify, and is reported so
	return ed25519.Verify(pub, fmt.Appendf(nil, "%s|%d", e.Prev, n), sig)
}

// ReadAnchors reads anchor files, or journals holding anchor lines (a
// gzip-compressed one as its content, as readLog): from each line, the
// JSON object from its first '{' that has lines and head; other lines are
// skipped. A file with no anchor is refused.
func ReadAnchors(files ...string) ([]Anchor, error) {
	var out []Anchor
	for _, file := range files {
		b, err := readLog(file)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for line := range bytes.Lines(b) {
			i := bytes.IndexByte(line, '{')
			if i < 0 {
				continue
			}
			var an Anchor
			if json.Unmarshal(line[i:], &an) == nil && an.Lines > 0 && an.Head != "" {
				out = append(out, an)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no audit anchor in it (lines with {\"lines\":…,\"head\":…})", file)
		}
	}
	return out, nil
}
