package gateway

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/invisible"
	"github.com/joakimp/devbox-config/strictjson"
)

// Entry is one audit line: one request.
type Entry struct {
	Time           time.Time `json:"time"`
	Device         string    `json:"device"`
	TokenID        string    `json:"token_id"`
	Path           string    `json:"path,omitempty"` // the HTTP path
	Method         string    `json:"method"`         // the JSON-RPC method, or the HTTP one
	Tool           string    `json:"tool,omitempty"`
	Wing           string    `json:"wing,omitempty"`
	Decision       Verdict   `json:"decision"`
	Rule           Rule      `json:"rule,omitempty"`
	Status         int       `json:"status,omitempty"` // the HTTP status answered
	UpstreamStatus int       `json:"upstream_status,omitempty"`
	LatencyMS      float64   `json:"latency_ms"`
	// UpstreamMS is the part of LatencyMS with a call to the upstream in
	// flight: the rest is the gateway's own.
	UpstreamMS float64 `json:"upstream_ms,omitempty"`
	ArgsDigest string  `json:"args_digest,omitempty"` // never the content
	// Origin is the device an admin's join attributed the write to
	// (origin.MetaKey), when not the device itself.
	Origin string `json:"origin,omitempty"`
	// QueuedAs is the device a write said its op was queued as
	// (params._meta devbox-config/queued-as: an edge's retry of an op
	// held as another device's); RecordOf, on a write answered from the
	// op-id ledger's record of the same write by another device (that
	// one, or one that said its op was queued as this device), that
	// device: deduplicated, not sent.
	QueuedAs string `json:"queued_as,omitempty"`
	RecordOf string `json:"record_of,omitempty"`
	// Note, on a new-state entry (VerdictNewState), names each kept file
	// the gateway made anew, empty, and what it held; on a request whose
	// device hung up before its answer (StatusClientGone), what became of
	// it (noteClientGone).
	Note string `json:"note,omitempty"`
	// Sig, on a checkpoint entry, is the Ed25519 signature of
	// "<prev>|<lines before it>": the chain head at that point.
	Sig string `json:"sig,omitempty"`
	// Line is the line's number in the log, counted from the first
	// file's first line across rotations, so that a gateway restarted
	// after one counts on (attack78 F2). Lines written before it was
	// written have none (0).
	Line int    `json:"line,omitempty"`
	Prev string `json:"prev"`
	// Hash is the sha256 of the line's own bytes before `,"hash":` (it is
	// always the last field).
	Hash string `json:"hash,omitempty"`
}

// StatusClientGone is the status of a request's audit line whose device
// hung up before its answer was written (nginx's 499): upstream_status
// is what the primary answered, a write it made is settled and stamped
// all the same; a call the hang-up ended unanswered (a read's) has none.
const StatusClientGone = 499

// The notes of a StatusClientGone line: the primary answered, a write's
// device hung up while it waited for the write slot (attack72 F2: that
// line pointed to an upstream_status it did not have), or the hang-up
// ended the call to the primary before its answer (the line had the
// gateway's own 502 as upstream_status).
const (
	noteClientGone = "the device hung up before its answer; upstream_status is what the primary answered"
	noteGoneQueued = "the device hung up while its write waited for the primary's write slot; nothing was sent upstream"
	noteGoneCut    = "the device hung up before its answer; the gateway's call to the primary ended with it, unanswered (no upstream_status)"
)

// Audit appends entries to a JSONL file as a hash chain: each line carries
// the previous line's hash and its own, so an edited, dropped or reordered
// line breaks the chain. With a key it signs checkpoints of the chain
// (checkpoint.go), so that the log's end can be checked too.
type Audit struct {
	mu    sync.Mutex
	file  string
	prev  string
	lines int
	f     *os.File // kept open: appends sit on every request
	// key signs a checkpoint of the chain head (nil: no checkpoints);
	// cadence and anchor say when, and where else it is written.
	key     ed25519.PrivateKey
	cadence Cadence
	anchor  anchorSink
	// since is how many lines follow the last checkpoint; waiting, since
	// when the first of them has waited for one.
	since   int
	waiting time.Time
	// uncounted: the file read at open follows a rotated one, and its
	// lines carry no number (Entry.Line): lines counts from its start,
	// and no line is numbered nor checkpoint signed with it.
	uncounted bool
	now       func() time.Time // the clock of checkpoints (nil: time.Now)
	log       *slog.Logger     // where a failed anchor is reported (nil: nowhere)
	// digestKey keys every digest a line carries of what a device sent
	// (DigestKey; nil: the server's secret is not known, as in tests).
	digestKey []byte
}

// OpenAudit opens (or creates) the log and finds the chain's head, and
// how many lines follow its last checkpoint. A last line without its
// newline, which a crash or power cut leaves (a read's line is not
// fsynced), is mended first (mendTail): the next line then starts a line
// of its own. A log file with no line (missing, empty, or its only line
// torn) chains on from the file a rotation moved it to (chainOn). log
// hears of a line cut off, and where the chain goes on from (nil:
// nowhere).
func OpenAudit(file string, log *slog.Logger) (*Audit, error) {
	a := &Audit{file: file, prev: "genesis", log: log}
	there, miscounted, err := a.read()
	if err != nil {
		return nil, err
	}
	if a.lines == 0 {
		if miscounted, err = a.chainOn(there); err != nil {
			return nil, err
		}
	}
	a.warnCount(miscounted)
	return a, nil
}

// read counts the lines of the log file, mending its last (mendTail);
// there: the file exists; miscounted: the first line whose number is not
// its place (0: none).
func (a *Audit) read() (there bool, miscounted int, err error) {
	f, err := os.Open(a.file)
	if os.IsNotExist(err) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	defer f.Close() // read only: its error says nothing
	// Lines of any length: a log written before lines were bounded
	// (attack44 F13) holds lines of megabytes, and still opens.
	rd := bufio.NewReader(f)
	var whole int64 // the bytes of the lines that end with their newline
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return true, miscounted, err
		}
		if len(line) == 0 {
			return true, miscounted, nil
		}
		if line[len(line)-1] != '\n' {
			kept, err := a.mendTail(whole, line)
			if err != nil || !kept {
				return true, miscounted, err
			}
		}
		whole += int64(len(line))
		if n := a.count(line); n != 0 && miscounted == 0 {
			miscounted = n
		}
	}
}

// warnCount tells, at every start, of a count the gateway cannot keep:
// a current file that follows a rotated one with no line numbers (until
// it is joined), or a line numbered other than its place.
func (a *Audit) warnCount(miscounted int) {
	switch {
	case a.log == nil:
	case a.uncounted:
		a.log.Warn("audit log: it follows a rotated file and its lines carry no line number (written by a build before they did), or one no log reaches: the gateway cannot count the log's lines, so until it is joined it numbers no line and signs no checkpoint (their count would be wrong); stop the gateway, join the rotated files and this one, oldest first (zcat, cat), into audit.jsonl in their place, and start it again",
			"audit_log", a.file, "lines_in_file", a.lines)
	case miscounted != 0:
		a.log.Warn("audit log: a line's number is not its place in the log (an earlier build lost count): the gateway counts the lines themselves; gateway audit verify names that line",
			"audit_log", a.file, "line", miscounted, "lines", a.lines)
	}
}

// count takes in one line of the log read at open, and returns its
// place if its number says another (0: it does not). A file's first line
// says where the count starts: at genesis, exact; after a rotated file,
// at its number, or, with none (an earlier build's), not at all
// (uncounted), as with a number no log reaches (maxLineNumber: attack81
// F4, the next line's number wrapped negative). Within the file the lines
// count on, whatever their numbers.
func (a *Audit) count(line []byte) (miscounted int) {
	var e Entry
	if json.Unmarshal(line, &e) != nil || e.Hash == "" {
		return 0
	}
	if a.prev == "genesis" && e.Prev != "genesis" {
		a.uncounted = e.Line <= 0 || e.Line > maxLineNumber
		if !a.uncounted {
			a.lines = e.Line - 1
		}
	}
	if e.Line != 0 && e.Line != a.lines+1 && !a.uncounted {
		miscounted = a.lines + 1
	}
	a.prev = e.Hash
	a.lines++
	if a.since++; a.since == 1 {
		a.waiting = e.Time
	}
	if e.Decision == VerdictCheckpoint {
		a.since = 0
	}
	return miscounted
}

// mendTail mends the log's last line, tail, which has no newline and
// starts at byte at. Each line is written in one write, newline
// included, so tail is a write cut short: whole but for its newline, it
// is kept and the newline written; otherwise it is cut off the log,
// appended to <log>.torn first (nothing is destroyed), and the chain goes
// on from the last whole line (a read's line is lost, as a power cut may
// lose it; a write's was fsynced before the write was made). kept: tail
// was kept, a line of the log.
func (a *Audit) mendTail(at int64, tail []byte) (kept bool, err error) {
	f, err := os.OpenFile(a.file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return false, fmt.Errorf("mending its last line, cut short: %w", err)
	}
	defer f.Close() // synced below: a close's error adds nothing
	var e Entry
	if json.Unmarshal(tail, &e) == nil && e.Hash != "" {
		if _, err := f.Write([]byte("\n")); err != nil {
			return false, fmt.Errorf("writing its last line's newline: %w", err)
		}
		return true, f.Sync()
	}
	// A truncate to its own size, which changes nothing, fails where the
	// cut would: before the line is kept aside, so that it is kept once.
	if err := f.Truncate(at + int64(len(tail))); err != nil {
		return false, cutRefused(a.file, err)
	}
	if err := appendSynced(a.file+".torn", append(tail, '\n')); err != nil {
		return false, fmt.Errorf("keeping its torn last line aside before cutting it off: %w", err)
	}
	if err := f.Truncate(at); err != nil {
		return false, cutRefused(a.file, err)
	}
	if a.log != nil {
		a.log.Warn("audit log: its last line was torn (a crash or power cut while it was written): cut off and kept aside; the chain goes on from the last whole line",
			"audit_log", a.file, "bytes", len(tail), "at", at, "kept_in", a.file+".torn", "starts", string(tail[:min(len(tail), 80)]), "lines", a.lines)
	}
	return false, f.Sync()
}

// cutRefused is the error of a torn last line the gateway may not cut off
// file. On an append-only log (chattr +a) it does not start rather than
// end the fragment with a newline: that line would fail every verify of
// the log from then on, and a hardened log's lines are cut only by root.
func cutRefused(file string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cutting off its torn last line: %w (an append-only log, chattr +a? run chattr -a %s, start the gateway, which cuts the line off into %s.torn, then chattr +a %s)", err, file, file, file)
	}
	return fmt.Errorf("cutting off its torn last line: %w", err)
}

// appendSynced appends b to file (made 0600) and fsyncs it.
func appendSynced(file string, b []byte) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close() // the write's error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close() // the sync's error is the one to report
		return err
	}
	return f.Close()
}

// sealLine is e's line (newline included) and its hash: the sha256 of
// the bytes json.Marshal writes for e up to where the hash field begins,
// with each invisible character escaped (invisible.EscapeJSON: a bidi
// override a client put in a path shows as its code, attack69 F10). The
// line is those bytes with `,"hash":"<hash>"}` after them: what
// json.Marshal writes for e with its Hash set (the last field), so
// escaped.
func sealLine(e Entry) (line []byte, hash string) {
	e.Hash = ""
	b, _ := json.Marshal(e) // an Entry is strings, numbers and a time: it encodes
	prefix := invisible.EscapeJSON(b[:len(b)-1])
	hash = lineHash(prefix)
	return append(append(append(prefix, `,"hash":"`...), hash...), "\"}\n"...), hash
}

func lineHash(prefix []byte) string {
	sum := sha256.Sum256(prefix)
	return hex.EncodeToString(sum[:])
}

// hashSuffix is how every line ends: `,"hash":"<64 hex>"}`.
const hashSuffixLen = len(`,"hash":""}`) + 64

// splitLine returns a line's bytes before its hash field and the hash.
func splitLine(line []byte) (prefix []byte, hash string, ok bool) {
	if len(line) < hashSuffixLen+1 {
		return nil, "", false
	}
	prefix, suffix := line[:len(line)-hashSuffixLen], line[len(line)-hashSuffixLen:]
	if !bytes.HasPrefix(suffix, []byte(`,"hash":"`)) || !bytes.HasSuffix(suffix, []byte(`"}`)) {
		return nil, "", false
	}
	hash = string(suffix[len(`,"hash":"`) : len(suffix)-2])
	if _, err := hex.DecodeString(hash); err != nil {
		return nil, "", false
	}
	return prefix, hash, true
}

// Append writes one entry; durable entries are fsync'd before Append
// returns (the lines that allow a write). An error means the log cannot be
// written: the gateway then refuses writes (fail closed). A read's line is
// written but not fsync'd: a power cut may lose the last read lines, never
// break the chain.
func (a *Audit) Append(e Entry, durable bool) error {
	_, err := a.appendLine(e, durable)
	return err
}

// appendLine is Append, returning the line's hash (what a record made for
// the request elsewhere, such as the trash's, refers to).
func (a *Audit) appendLine(e Entry, durable bool) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e = a.bounded(e)
	e.Prev, e.Line = a.prev, a.number()
	line, hash := sealLine(e)
	if err := a.reopenLocked(); err != nil {
		return "", err
	}
	if _, err := a.f.Write(line); err != nil {
		return "", err
	}
	if durable {
		if err := a.f.Sync(); err != nil {
			return "", err
		}
	}
	a.prev = hash
	a.lines++
	if a.since++; a.since == 1 {
		a.waiting = a.clock()
	}
	if a.key != nil && a.since >= a.cadence.lines() {
		return hash, a.checkpointLocked()
	}
	return hash, nil
}

// number is the next line's number: 0 (none) while the count is not
// the log's (uncounted).
func (a *Audit) number() int {
	if a.uncounted {
		return 0
	}
	return a.lines + 1
}

// Close signs the lines no checkpoint covers yet and closes the log file
// (Append reopens it).
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	var err error
	if a.key != nil && a.since > 0 {
		err = a.checkpointLocked()
	}
	err = errors.Join(err, a.f.Close())
	a.f = nil
	return err
}

// reopenLocked makes a.f the file at the log's path, opening it (made
// 0600 if it is not there) when it is not open or was moved away.
func (a *Audit) reopenLocked() error {
	if a.f != nil && a.stillThere() {
		return nil
	}
	if a.f != nil {
		a.f.Close() // replaced by the file opened below
	}
	f, err := os.OpenFile(a.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		a.f = nil
		return err
	}
	a.f = f
	return nil
}

// stillThere reports whether the open file is still the one at the path
// (not rotated away or replaced).
func (a *Audit) stillThere() bool {
	fi, err := os.Stat(a.file)
	if err != nil {
		return false
	}
	open, err := a.f.Stat()
	return err == nil && os.SameFile(fi, open)
}

// DigestKey is the key of the audit log's digests, derived from the
// server secret: a reader of the log (a log shipper, a backup) cannot
// confirm a guess of what a device sent by hashing it (attack44 F1); the
// operator, who holds the secret, can (`gateway audit digest`).
func DigestKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("devbox-config gateway audit digest v1")) // a hash never fails a write
	return m.Sum(nil)
}

// PurgeKey is the key of the digest a trash purge keeps of a diary
// entry's text (trash.Store.Key), derived from the server secret: the
// gateway and `gateway trash purge` derive the same, and a copy of the
// trash alone confirms no guess of what was purged.
func PurgeKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("devbox-config gateway trash purged entry v1")) // a hash never fails a write
	return m.Sum(nil)
}

// ArgsDigest is a line's args_digest of the arguments device sent to
// tool: the first 32 hex of an HMAC-SHA256 under key of the JSON array
// [device, tool, arguments] (keys sorted, as Go's encoding/json writes a
// map); "" for none. The device and tool are in it so that a device only
// ever obtains digests of its own calls: a guess another device sends as
// a refused call's arguments digests under that device's id, never to the
// line it guesses (attack46 N1).
func ArgsDigest(key []byte, device, tool string, args map[string]any) string {
	line, _, _ := callDigests(key, device, tool, args)
	return line
}

// callDigests is a call's three digests of its arguments, from one
// encoding of them (a tools/call's path computes all three): the line's
// (ArgsDigest); the op-id ledger's, the keyed digest of their JSON alone
// (its rows are per device, their tool compared apart, and rows written
// before ArgsDigest took in the device and tool still match a resend);
// and the unkeyed SHA-256 gateways wrote before the digest was keyed, only
// for matching the ledger rows they left. The last two are never written
// to the log.
func callDigests(key []byte, device, tool string, args map[string]any) (line, ledger, legacy string) {
	if len(args) == 0 {
		return "", "", ""
	}
	b, _ := json.Marshal(args) // parsed JSON: it encodes
	head, _ := json.Marshal([]string{device, tool})
	framed := hmac.New(sha256.New, key) // of json.Marshal([]any{device, tool, args}), byte for byte, with no copy of b
	framed.Write(append(head[:len(head)-1], ','))
	framed.Write(b)
	framed.Write([]byte{']'})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(framed.Sum(nil)[:16]), keyedDigest(key, b), hex.EncodeToString(sum[:16])
}

// DigestOf is the args_digest the gateway writes, under the server
// secret, for the arguments b (a JSON object, as a tools/call sends them)
// that device sent to tool. It is how an operator matches a request they
// hold to its line.
func DigestOf(secret []byte, device, tool string, b []byte) (string, error) {
	v, err := strictjson.Decode(b)
	if err != nil {
		return "", fmt.Errorf("the arguments: %w", err)
	}
	args, ok := v.(map[string]any)
	if !ok {
		return "", errors.New("the arguments must be one JSON object, as a tools/call sends them")
	}
	return ArgsDigest(DigestKey(secret), device, tool, args), nil
}

// StringDigestOf is the digest a line of device's ("" for a line that
// names none) keeps of a string it cut (method, tool, wing…: bounded),
// under the server secret.
func StringDigestOf(secret []byte, device string, b []byte) string {
	return stringDigest(DigestKey(secret), device, b)
}

// stringDigest is the keyed digest of a cut string s a line of device's
// keeps: of the device id, a NUL (which no id holds) and s, so that,
// like ArgsDigest, a device only obtains digests under its own id.
func stringDigest(key []byte, device string, s []byte) string {
	return keyedDigest(key, append([]byte(device+"\x00"), s...))
}

func keyedDigest(key, b []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(b) // a hash never fails a write
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// maxField is the most of a string a device sent that a line keeps
// (method, tool, wing, rule, path, origin): a longer one is cut, and its
// length and digest are kept in its place, so that one request adds a
// bounded line whatever its size (attack44 F13).
const maxField = 256

// bounded is e with each string a device may have sent cut to maxField.
func (a *Audit) bounded(e Entry) Entry {
	for _, f := range []*string{&e.Path, &e.Method, &e.Tool, &e.Wing, (*string)(&e.Rule), &e.Origin} {
		*f = a.cut(e.Device, *f)
	}
	return e
}

// cut is s, a string device sent, as a line or an answer shows it: whole
// up to maxField bytes; beyond, its first bytes, its length and its keyed
// digest (stringDigest), the same in the answer as on the line.
func (a *Audit) cut(device, s string) string {
	if len(s) <= maxField {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes, digest %s)", clip(s, maxField-64), len(s), stringDigest(a.digestKey, device, []byte(s)))
}

// clip is s cut to at most n bytes, at a character's start.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
