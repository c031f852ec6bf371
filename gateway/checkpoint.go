package gateway

import (
	"cmp"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Checkpoint defaults: a signed checkpoint after every CheckpointEvery
// lines, and CheckpointAfter after the first line no checkpoint covers
// (the running gateway checks every 200 ms), and when the gateway stops.
const (
	CheckpointEvery = 100
	CheckpointAfter = time.Minute
)

// Cadence is how often the audit log is signed: after Lines lines, or
// Interval after a line no checkpoint covers, whichever comes first (0:
// the defaults).
type Cadence struct {
	Lines    int
	Interval time.Duration
}

func (c Cadence) lines() int              { return cmp.Or(c.Lines, CheckpointEvery) }
func (c Cadence) interval() time.Duration { return cmp.Or(c.Interval, CheckpointAfter) }

// Anchor is one checkpoint as written to the second place (audit_anchor):
// the log had at least Lines lines, and line Lines (the checkpoint) hashed
// to Head. A copy out of the log's reach lets `audit verify --anchor`
// catch a log cut below it.
type Anchor struct {
	Time  time.Time `json:"time"`
	Log   string    `json:"log"`
	Lines int       `json:"lines"`
	Head  string    `json:"head"`
	Sig   string    `json:"sig"`
}

// AnchorStderr is the audit_anchor value that writes each anchor to the
// gateway's stderr (the service manager's journal).
const AnchorStderr = "stderr"

// anchorSink is where anchors go: a file (appended and fsynced) or a
// writer (stderr); zero: nowhere.
type anchorSink struct {
	file string
	w    io.Writer
}

// write puts one anchor line, prefixed so that it can be found in a
// journal; `audit verify --anchor` reads the JSON from each line's first
// '{'.
func (s anchorSink) write(an Anchor) error {
	b, _ := json.Marshal(an) // strings, a number and a time: it encodes
	line := append([]byte("devbox-config gateway: audit anchor "), append(b, '\n')...)
	switch {
	case s.w != nil:
		_, err := s.w.Write(line)
		return err
	case s.file != "":
		return appendSynced(s.file, line)
	}
	return nil
}

// checkAnchorPlace refuses an anchor file in the audit log's directory:
// whoever can cut the log could cut the anchor with it.
func checkAnchorPlace(anchor, auditLog string) error {
	if anchor == "" || anchor == AnchorStderr {
		return nil
	}
	a, err1 := filepath.Abs(anchor)
	l, err2 := filepath.Abs(auditLog)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("audit_anchor: %q: cannot resolve it", anchor)
	}
	if dir := filepath.Dir(l); filepath.Dir(a) == dir || strings.HasPrefix(a, dir+string(filepath.Separator)) {
		return fmt.Errorf("audit_anchor: %s is in the audit log's directory (%s): put it outside it (another disk, another owner), or use \"stderr\" for the service manager's journal; whoever can cut the log could cut the anchor with it", anchor, dir)
	}
	return nil
}

// CheckpointIfDue signs the log if lines no checkpoint covers have waited
// the cadence's interval (the running gateway calls it every 200 ms).
func (a *Audit) CheckpointIfDue() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.key == nil || a.since == 0 || a.f == nil || a.clock().Sub(a.waiting) < a.cadence.interval() {
		return nil
	}
	return a.checkpointLocked()
}

func (a *Audit) clock() time.Time {
	if a.now == nil {
		return time.Now()
	}
	return a.now()
}

// checkpointLocked appends a signed checkpoint of the current head, and
// writes its anchor; none while the count is not the log's (uncounted):
// its signature and anchor would fail verify of the log joined.
func (a *Audit) checkpointLocked() error {
	if a.uncounted {
		a.since = 0
		return nil
	}
	c := Entry{Time: a.clock().UTC(), Method: "checkpoint", Decision: VerdictCheckpoint, Prev: a.prev, Line: a.number()}
	c.Sig = hex.EncodeToString(ed25519.Sign(a.key, fmt.Appendf(nil, "%s|%d", a.prev, a.lines)))
	line, hash := sealLine(c)
	if err := a.reopenLocked(); err != nil {
		return err
	}
	if _, err := a.f.Write(line); err != nil {
		return err
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	a.prev = hash
	a.lines++
	a.since = 0
	if err := a.anchor.write(Anchor{Time: c.Time, Log: a.file, Lines: a.lines, Head: hash, Sig: c.Sig}); err != nil && a.log != nil {
		// The log and its checkpoint are written: a request is not refused
		// for its second copy, whose loss the operator must hear of.
		a.log.Error("audit anchor not written: audit_anchor cannot vouch for the log's end until it is", "audit_anchor", a.anchor.file, "lines", a.lines, "err", err)
	}
	return nil
}

// SigningKey reads the Ed25519 key that signs checkpoints, creating it
// (0600, public half in <file>.pub) if it does not exist.
func SigningKey(file string) (ed25519.PrivateKey, error) {
	if raw, err := readHexKey(file, ed25519.PrivateKeySize, "private"); !os.IsNotExist(err) {
		return raw, err
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, []byte(hex.EncodeToString(priv)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file+".pub", []byte(hex.EncodeToString(pub)+"\n"), 0o644); err != nil {
		return nil, err
	}
	return priv, nil
}

// PublicKey reads a <key>.pub file.
func PublicKey(file string) (ed25519.PublicKey, error) {
	return readHexKey(file, ed25519.PublicKeySize, "public")
}

// readHexKey reads an Ed25519 key of size bytes written in hex.
func readHexKey(file string, size int, half string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != size {
		return nil, fmt.Errorf("%s: not an Ed25519 %s key", file, half)
	}
	return raw, nil
}
