package gateway

import (
	"bufio"
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
	r := Report{Signed: pub != nil}
	at, err := anchorsByLine(anchors)
	if err != nil {
		return r, err
	}
	for _, an := range anchors {
		if an.Lines > r.Anchor.Lines {
			r.Anchor = an
		}
	}
	prev := "genesis"
	for k, file := range files {
		b, err := readLog(file)
		if err != nil {
			return r, err
		}
		first, lines := true, bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
		for i, line := range lines {
			if len(line) == 0 {
				continue
			}
			where := fmt.Sprintf("%s line %d", file, i+1)
			if len(files) > 1 {
				where += fmt.Sprintf(" (line %d of the log)", r.Lines+1)
			}
			e, err := checkLine(line, prev, r.Lines, pub)
			if errors.Is(err, errChain) && first && k > 0 {
				err = fmt.Errorf("its first line does not follow the last line of %s: give the files oldest first, with none missing between them", files[k-1])
			}
			if err != nil && i == len(lines)-1 && !bytes.HasSuffix(b, []byte("\n")) {
				err = fmt.Errorf("%w; the file's last line, with no newline: torn by a crash while it was written, the gateway cuts it off at its next start (into %s.torn)", err, file)
			}
			if err != nil {
				return r, fmt.Errorf("%s: %w", where, err)
			}
			first = false
			r.Lines++
			if an, ok := at[r.Lines]; ok && an.Head != e.Hash {
				return r, fmt.Errorf("%s is not the line the anchor of %s recorded (the log was rewritten up to it)", where, an.Time.Format(time.RFC3339))
			}
			prev = e.Hash
			r.Unsigned++
			if e.Decision == VerdictCheckpoint {
				r.Checkpoint, r.CheckpointAt, r.Unsigned = r.Lines, e.Time, 0
			}
		}
	}
	if r.Anchor.Lines > r.Lines {
		return r, fmt.Errorf("%w: the log ends at line %d, but the anchor written at %s says it had %d lines (line %d hashed to %.12s…)",
			ErrCut, r.Lines, r.Anchor.Time.Format(time.RFC3339), r.Anchor.Lines, r.Anchor.Lines, r.Anchor.Head)
	}
	return r, nil
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
var errTwoLogs = errors.New("they vouch for two different logs: the log was cut back below an anchor and written on (rewritten), or begun anew with --new-state (then give --anchor only the anchors written since that start)")

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
	if e.Decision == VerdictCheckpoint && pub != nil {
		sig, _ := hex.DecodeString(e.Sig) // a signature that is not hex does not verify, and is reported so
		if !ed25519.Verify(pub, fmt.Appendf(nil, "%s|%d", e.Prev, n), sig) {
			return e, errors.New("checkpoint signature does not verify (the log before it was rewritten)")
		}
	}
	return e, nil
}

// ReadAnchors reads an anchor file, or a journal holding anchor lines:
// from each line, the JSON object from its first '{' that has lines and
// head; other lines are skipped.
func ReadAnchors(file string) ([]Anchor, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close() // read only
	var out []Anchor
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.IndexByte(line, '{')
		if i < 0 {
			continue
		}
		var an Anchor
		if json.Unmarshal(line[i:], &an) == nil && an.Lines > 0 && an.Head != "" {
			out = append(out, an)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no audit anchor in it (lines with {\"lines\":…,\"head\":…})", file)
	}
	return out, nil
}
