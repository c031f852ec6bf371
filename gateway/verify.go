package gateway

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// VerifyLog checks a log's chain and reports the first broken line. Each
// line's hash covers its exact bytes (up to the hash field), and a line
// with a field twice, two fields differing only in case or a field an
// entry does not have is refused: what verifies is what a reader of the
// line sees. With a public key it also checks every signed checkpoint, so
// a log rewritten from the start with recomputed hashes is still caught.
// Each anchor (ReadAnchors) must find its line with its hash: a log cut
// below an anchor's count, or rewritten up to it, fails.
func VerifyLog(file string, pub ed25519.PublicKey, anchors []Anchor) (Report, error) {
	r := Report{Signed: pub != nil}
	b, err := os.ReadFile(file)
	if err != nil {
		return r, err
	}
	at := map[int]Anchor{}
	for _, an := range anchors {
		at[an.Lines] = an
		if an.Lines > r.Anchor.Lines {
			r.Anchor = an
		}
	}
	prev := "genesis"
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := checkLine(line, prev, i, pub)
		if err != nil {
			return r, fmt.Errorf("line %d: %w", i+1, err)
		}
		if an, ok := at[i+1]; ok && an.Head != e.Hash {
			return r, fmt.Errorf("line %d is not the line the anchor of %s recorded (the log was rewritten up to it)", i+1, an.Time.Format(time.RFC3339))
		}
		prev = e.Hash
		r.Lines = i + 1
		r.Unsigned++
		if e.Decision == VerdictCheckpoint {
			r.Checkpoint, r.CheckpointAt, r.Unsigned = i+1, e.Time, 0
		}
	}
	if r.Anchor.Lines > r.Lines {
		return r, fmt.Errorf("%w: the log ends at line %d, but the anchor written at %s says it had %d lines (line %d hashed to %.12s…)",
			ErrCut, r.Lines, r.Anchor.Time.Format(time.RFC3339), r.Anchor.Lines, r.Anchor.Lines, r.Anchor.Head)
	}
	return r, nil
}

// checkLine checks one line (the i-th, 0-based) against the chain.
// Checkpoints are told by their decision: a request's line never has it
// (its method is whatever the client sent, "checkpoint" included).
func checkLine(line []byte, prev string, i int, pub ed25519.PublicKey) (Entry, error) {
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
	if e.Prev != prev && i == 0 {
		return e, errors.New("the chain does not start here: the first line follows a line this file does not hold (a log rotated away while the gateway ran, or lines cut from its start); verify a rotated log with the files before it, oldest first, as one: cat audit.jsonl.1 audit.jsonl > whole.jsonl; gateway audit verify whole.jsonl")
	}
	if e.Prev != prev {
		return e, errors.New("chain broken (a line was dropped, inserted or reordered before it)")
	}
	if lineHash(prefix) != e.Hash {
		return e, errors.New("edited (its hash does not match its bytes)")
	}
	if e.Line != 0 && e.Line != i+1 {
		return e, fmt.Errorf("it was written as line %d of the log: give every file from the first the gateway wrote, oldest first", e.Line)
	}
	if e.Decision == VerdictCheckpoint && pub != nil {
		sig, _ := hex.DecodeString(e.Sig) // a signature that is not hex does not verify, and is reported so
		if !ed25519.Verify(pub, fmt.Appendf(nil, "%s|%d", e.Prev, i), sig) {
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
