package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// maxLineNumber is the most a line's number (Entry.Line) may say: a log
// of a line a microsecond for a century is far below it. A first line
// that says more, or not a positive number, leaves the count unknown
// (uncounted) rather than counted on from it (attack81 F4).
const maxLineNumber = 1 << 53

// maxRotatedLine is the longest line read from a rotated file at start.
// A line the gateway writes is a few hundred bytes: each string a device
// sent is cut to maxField, and a --new-state note names a few paths; a
// longer one is refused, not held whole in memory (attack81 F6: a 1.8 MB
// .1.gz of one 400 MB line took the start to 920 MB).
const maxRotatedLine = 64 << 10

// rotatedNames are the names operator.md's recipe gives the file a
// rotation moved the log file to: <file>.1, or <file>.1.gz compressed at
// once.
func rotatedNames(file string) []string { return []string{file + ".1", file + ".1.gz"} }

// Rotated is the file a rotation moved the log file to (rotatedNames)
// that holds an audit line, or that cannot be read (chainOn says why);
// "" when none does. One with no audit line (empty, or something else
// gzipped) is no log to chain on from: the start is as with none there
// (attack81 F3: it began a new chain at genesis, saying it went on).
func Rotated(file string) string {
	for _, r := range rotatedNames(file) {
		held := false
		err := eachLine(r, func(line []byte) bool {
			held = isEntry(line)
			return !held
		})
		if held || err != nil && !errors.Is(err, os.ErrNotExist) {
			return r
		}
	}
	return ""
}

// chainOn makes a log file with no line (there: it exists, empty) chain
// on from the last line of the file a rotation moved it to (Rotated):
// the documented rotation is a move, and a gateway stopped before its
// next line, or whose next line a crash tore, finds no line of its own
// (attack79 F2, F3: it refused to start, or began a new chain from
// genesis that never verified with the rotated files). miscounted: as
// read's, of the rotated file.
func (a *Audit) chainOn(there bool) (miscounted int, err error) {
	rotated := Rotated(a.file)
	if rotated == "" {
		if there && a.log != nil {
			a.log.Warn("audit log: it holds no line, and no rotated file holding an audit line is beside it (.1 or .1.gz): a new chain starts from genesis, which no earlier anchor vouches for; if the log was rotated away, stop the gateway and move the rotated file back beside it as "+filepath.Base(a.file)+".1", "audit_log", a.file)
		}
		return 0, nil
	}
	if miscounted, err = a.countFile(rotated); err != nil {
		return 0, err
	}
	if err := a.onlyRotated(rotated); err != nil {
		return 0, err
	}
	if a.log != nil {
		level := slog.LevelInfo
		if there {
			level = slog.LevelWarn
		}
		a.log.Log(context.Background(), level, "audit log: it holds no line (rotated away while the gateway was stopped, or its only line torn): the chain goes on from the last line of the rotated file beside it", "audit_log", a.file, "chained_from", rotated, "lines", a.lines)
	}
	return miscounted, nil
}

// countFile counts the lines of the rotated file, as read does the log's.
func (a *Audit) countFile(file string) (miscounted int, err error) {
	err = eachLine(file, func(line []byte) bool {
		if n := a.count(line); n != 0 && miscounted == 0 {
			miscounted = n
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("reading %s, the rotated log it chains on from: %w", file, err)
	}
	return miscounted, nil
}

// onlyRotated refuses a start beside two rotated files (rotatedNames)
// that do not end at the same line and head as rotated, counted into a.
// A rotation leaves one; with two, which the chain goes on from is the
// operator's choice, not the gateway's: a warning is missed, and the
// chain then written verifies only with the file it took, the other's
// lines (a signed checkpoint: attack81 F5) dropped for good.
func (a *Audit) onlyRotated(rotated string) error {
	for _, other := range rotatedNames(a.file) {
		if _, err := os.Stat(other); other == rotated || err != nil { // not there (or not to be read: the start goes on from rotated)
			continue
		}
		o := &Audit{file: other, prev: "genesis"}
		if _, err := o.countFile(other); err != nil || o.prev != a.prev || o.lines != a.lines {
			return fmt.Errorf("both %s and %s are beside the audit log, which holds no line, and they differ (%d lines, the last %.12s…; %d lines, the last %.12s…): a rotation leaves one. Move away the one the log does not go on from (gateway audit verify --anchor checks each), and start again", rotated, other, a.lines, a.prev, o.lines, o.prev)
		}
	}
	return nil
}

// eachLine calls f with each line of file, gunzipped when compressed (as
// readLog), until f returns false; a line longer than maxRotatedLine is
// refused, naming file.
func eachLine(file string, f func(line []byte) bool) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close() // read only: its error says nothing
	br := bufio.NewReader(fh)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) { // gzip's: no line starts so
		if r, err = gzip.NewReader(br); err != nil {
			return fmt.Errorf("%s: gzip: %w", file, err)
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxRotatedLine)
	for sc.Scan() {
		if !f(sc.Bytes()) {
			return nil
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("%s holds a line longer than %d bytes, which no gateway writes since lines are bounded: not a rotated audit log, or one a build wrote before then (then join it: stop the gateway, and zcat or cat it and the log, oldest first, into the log in their place)", file, maxRotatedLine)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// isEntry reports whether line is an audit line, as count takes one: an
// Entry with a hash.
func isEntry(line []byte) bool {
	var e Entry
	return json.Unmarshal(line, &e) == nil && e.Hash != ""
}
