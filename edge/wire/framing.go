package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"

	segjson "github.com/segmentio/encoding/json"
	"github.com/tidwall/gjson"
)

// MaxMessage is the largest agent message accepted (MemPalace's 16 MiB).
const MaxMessage = 16 << 20

// SyncWriter makes each Write atomic, so the guard's error replies never
// interleave with the SDK's messages (which it writes one per Write).
// With Pending set, each message written is an answer it records, and
// once Pending is closed (Owed) a second answer to a request is dropped:
// each is answered once.
type SyncWriter struct {
	mu      sync.Mutex
	W       io.WriteCloser
	Pending *Pending
}

func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Pending != nil && s.Pending.stale(p) {
		return len(p), nil // answered already, at the end (Owed)
	}
	n, err := s.W.Write(p)
	if s.Pending != nil {
		s.Pending.Answered(p) // written, or never will be
	}
	return n, err
}

func (s *SyncWriter) Close() error { return s.W.Close() }

// GuardInput stands between the agent and the SDK, whose stdio session
// ends on the first line that is not JSON. Each line is checked: not JSON
// gets -32700, a batch or non-object -32600, a line over MaxMessage
// -32600 "Request too large" (its bytes are skipped, not buffered; its id
// read from its ends where it can be: overID); only
// well-formed objects reach the SDK. A bad message never ends the session.
// It is a plain reader (no goroutine, no pipe): it sits on every call.
//
// intercept (may be nil) sees each checked line first; when it takes one,
// the SDK never sees it (the fast lane).
//
// pending (may be nil) records each checked line, and atEOF (may be nil)
// runs once when the input ends, before the SDK is told: the edge waits
// there for the answers still owed, which the SDK would drop.
func GuardInput(in io.Reader, out io.Writer, log *slog.Logger, intercept func([]byte) bool, pending *Pending, atEOF func()) io.ReadCloser {
	return &guard{br: bufio.NewReaderSize(in, 64<<10), out: out, log: log, intercept: intercept, pending: pending, atEOF: atEOF}
}

type guard struct {
	br        *bufio.Reader
	out       io.Writer
	log       *slog.Logger
	intercept func([]byte) bool
	pending   *Pending
	atEOF     func()
	buf       []byte // a checked line not yet handed out
	err       error
}

// replyTo answers a refused message under its id when it has a usable one.
func (g *guard) replyTo(id any, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}) // a code and a message: they encode
	g.out.Write(append(b, '\n'))                                                                                            // an agent that stopped reading: its session ends with its input
}

func (g *guard) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.err != nil {
			if g.atEOF != nil {
				g.atEOF()
				g.atEOF = nil
			}
			return 0, g.err
		}
		line, ends, tooLong, err := readLine(g.br, MaxMessage, idScan)
		switch t := bytes.TrimSpace(line); {
		case tooLong:
			id := overID(ends[0], ends[1])
			g.log.Warn("agent message over 16 MiB refused", "id", string(id))
			g.replyTo(id, -32600, "Request too large")
		case len(t) == 0:
		case !segjson.Valid(t): // the SDK's own parser, so no line it would refuse passes
			g.log.Warn("agent sent a line that is not JSON; answered with a parse error")
			g.replyTo(nil, -32700, "Parse error")
		case t[0] != '{':
			g.replyTo(nil, -32600, "Invalid Request")
		default:
			env, why := checkEnvelope(t)
			if why != "" {
				// The SDK would end the session on it: answered here instead.
				g.log.Warn("agent sent a message that is not valid JSON-RPC; answered with Invalid Request", "why", why)
				g.replyTo(env.ID, -32600, "Invalid Request: "+why)
				break
			}
			if g.pending != nil {
				g.pending.request(env, t) // before anyone can answer it
			}
			if g.intercept == nil || !g.intercept(t) {
				g.buf = append(t, '\n')
			}
		}
		if err != nil {
			g.err = err
		}
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func (g *guard) Close() error { return nil }

// ReadLine reads one newline-terminated line of at most max bytes; a longer
// line is consumed and dropped (tooLong).
// Of a line it drops, id is the id read from its ends as GuardInput reads
// an agent's (overID; nil: none found).
func ReadLine(br *bufio.Reader, max int) (line []byte, id json.RawMessage, tooLong bool, err error) {
	line, ends, tooLong, err := readLine(br, max, idScan)
	if tooLong {
		id = overID(ends[0], ends[1])
	}
	return line, id, tooLong, err
}

// readLine is ReadLine keeping, of a line it drops, its first and its last
// keep bytes (ends).
func readLine(br *bufio.Reader, max, keep int) (line []byte, ends [2][]byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := br.ReadLine()
		switch {
		case tooLong:
			ends[1] = keepLast(ends[1], chunk, keep)
		case len(line)+len(chunk) > max:
			tooLong = true
			whole := append(line, chunk...)
			ends[0] = bytes.Clone(whole[:min(len(whole), keep)])
			ends[1] = keepLast(nil, whole, keep)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if err != nil || !isPrefix {
			return line, ends, tooLong, err
		}
	}
}

// keepLast appends b to tail and keeps its last keep bytes.
func keepLast(tail, b []byte, keep int) []byte {
	if len(b) >= keep {
		return append(tail[:0], b[len(b)-keep:]...)
	}
	tail = append(tail, b...)
	return append(tail[:0], tail[max(0, len(tail)-keep):]...)
}

// idScan is how much of a message too large to read is kept, at each
// end, to find its id in.
const idScan = 4 << 10

// overID is the id of a message too large to read, from its first and
// last bytes: a top-level "id" in its start, read as JSON as far as it
// goes (Go's and Python's SDKs write the id before params), else its last
// member when that is "id" (the TypeScript SDK's {...request, jsonrpc,
// id}); nil (an answer with a null id) when it is in neither.
func overID(head, tail []byte) json.RawMessage {
	r := gjson.GetBytes(head, "id")
	if (r.Type == gjson.Number || r.Type == gjson.String) && r.Index > 0 && r.Index+len(r.Raw) < len(head) && json.Valid([]byte(r.Raw)) {
		return json.RawMessage(r.Raw)
	}
	const ws = " \t\r\n"
	b := bytes.TrimRight(tail, ws)
	if !bytes.HasSuffix(b, []byte("}")) {
		return nil
	}
	b = bytes.TrimRight(b[:len(b)-1], ws)
	i := bytes.LastIndexFunc(b, func(r rune) bool { return !strings.ContainsRune("0123456789+-.eE", r) }) + 1 // a number
	if bytes.HasSuffix(b, []byte(`"`)) {
		i = stringStart(b)
	}
	if i < 0 {
		return nil
	}
	val := b[i:]
	b = bytes.TrimRight(b[:i], ws)
	if !bytes.HasSuffix(b, []byte(":")) {
		return nil
	}
	b = bytes.TrimRight(b[:len(b)-1], ws)
	if !bytes.HasSuffix(b, []byte(`"id"`)) {
		return nil
	}
	b = bytes.TrimRight(b[:len(b)-len(`"id"`)], ws)
	if !bytes.HasSuffix(b, []byte(",")) && !bytes.HasSuffix(b, []byte("{")) || len(val) == 0 || !json.Valid(val) {
		return nil
	}
	return json.RawMessage(bytes.Clone(val))
}

// stringStart is where the JSON string b ends with begins (its opening
// quote, the first before the last not escaped), -1 if not in b.
func stringStart(b []byte) int {
	for i := len(b) - 2; i >= 0; i-- {
		if b[i] != '"' {
			continue
		}
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
	}
	return -1
}
