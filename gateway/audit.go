package gateway

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
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
	ArgsDigest     string    `json:"args_digest,omitempty"` // never the content
	// Sig, on a checkpoint entry, is the Ed25519 signature of
	// "<prev>|<lines before it>": the chain head at that point.
	Sig  string `json:"sig,omitempty"`
	Prev string `json:"prev"`
	// Hash is the sha256 of the line's own bytes before `,"hash":` (it is
	// always the last field).
	Hash string `json:"hash,omitempty"`
}

// CheckpointEvery is how many lines pass between signed checkpoints.
const CheckpointEvery = 100

// Audit appends entries to a JSONL file as a hash chain: each line carries
// the previous line's hash and its own, so an edited, dropped or reordered
// line breaks the chain.
type Audit struct {
	mu    sync.Mutex
	file  string
	prev  string
	lines int
	f     *os.File // kept open: appends sit on every request
	// key signs a checkpoint of the chain head every CheckpointEvery lines
	// (nil: no checkpoints).
	key ed25519.PrivateKey
}

// OpenAudit opens (or creates) the log and finds the chain's head.
func OpenAudit(file string) (*Audit, error) {
	a := &Audit{file: file, prev: "genesis"}
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return a, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close() // read only: its error says nothing
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Hash != "" {
			a.prev = e.Hash
			a.lines++
		}
	}
	return a, sc.Err()
}

// entryHash is the hash of e's line: the bytes json.Marshal writes for it
// up to where the hash field begins.
func entryHash(e Entry) string {
	e.Hash = ""
	b, _ := json.Marshal(e) // an Entry is strings, numbers and a time: it encodes
	return lineHash(b[:len(b)-1])
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
	e.Prev = a.prev
	e.Hash = entryHash(e)
	b, _ := json.Marshal(e) // as entryHash
	if a.f == nil || !a.stillThere() {
		if a.f != nil {
			a.f.Close() // replaced by the file reopened below
		}
		f, err := os.OpenFile(a.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			a.f = nil
			return "", err
		}
		a.f = f
	}
	if _, err := a.f.Write(append(b, '\n')); err != nil {
		return "", err
	}
	if durable {
		if err := a.f.Sync(); err != nil {
			return "", err
		}
	}
	a.prev = e.Hash
	a.lines++
	if a.key != nil && a.lines%CheckpointEvery == CheckpointEvery-1 {
		return e.Hash, a.checkpointLocked()
	}
	return e.Hash, nil
}

// Close closes the log file (Append reopens it).
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// checkpointLocked appends a signed checkpoint of the current head.
func (a *Audit) checkpointLocked() error {
	c := Entry{Time: time.Now().UTC(), Method: "checkpoint", Decision: VerdictCheckpoint, Prev: a.prev}
	c.Sig = hex.EncodeToString(ed25519.Sign(a.key, []byte(fmt.Sprintf("%s|%d", a.prev, a.lines))))
	c.Hash = entryHash(c)
	b, _ := json.Marshal(c) // as entryHash
	if _, err := a.f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	a.prev = c.Hash
	a.lines++
	return nil
}

// SigningKey reads the Ed25519 key that signs checkpoints, creating it
// (0600, public half in <file>.pub) if it does not exist.
func SigningKey(file string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(file)
	if err == nil {
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(raw) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("%s: not an Ed25519 private key", file)
		}
		return ed25519.PrivateKey(raw), nil
	}
	if !os.IsNotExist(err) {
		return nil, err
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
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s: not an Ed25519 public key", file)
	}
	return ed25519.PublicKey(raw), nil
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

// Verify checks a log's chain and reports the first broken line. Each
// line's hash covers its exact bytes (up to the hash field), and a line
// with a field twice, two fields differing only in case or a field an
// entry does not have is refused: what verifies is what a reader of the
// line sees. With a public key it also checks every signed checkpoint, so
// a log rewritten from the start with recomputed hashes is still caught.
func Verify(file string, pub ed25519.PublicKey) (lines int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	prev := "genesis"
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if _, err := decodeStrict(line); err != nil {
			return i, fmt.Errorf("line %d: not an audit entry: %w", i+1, err)
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return i, fmt.Errorf("line %d: not an audit entry: %w", i+1, err)
		}
		prefix, hash, ok := splitLine(line)
		if !ok || hash != e.Hash {
			return i, fmt.Errorf("line %d: not an audit entry: it must end with its hash field", i+1)
		}
		if e.Prev != prev {
			return i, fmt.Errorf("line %d: chain broken (a line was dropped, inserted or reordered before it)", i+1)
		}
		if lineHash(prefix) != e.Hash {
			return i, fmt.Errorf("line %d: edited (its hash does not match its bytes)", i+1)
		}
		if e.Method == "checkpoint" && pub != nil {
			sig, _ := hex.DecodeString(e.Sig) // a signature that is not hex does not verify, and is reported so
			if !ed25519.Verify(pub, []byte(fmt.Sprintf("%s|%d", e.Prev, i)), sig) {
				return i, fmt.Errorf("line %d: checkpoint signature does not verify (the log before it was rewritten)", i+1)
			}
		}
		prev = e.Hash
		lines = i + 1
	}
	return lines, nil
}

func digest(args map[string]any) string {
	if len(args) == 0 {
		return ""
	}
	b, _ := json.Marshal(args) // map keys sorted: canonical enough for a digest
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
