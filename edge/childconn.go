package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/jsondepth"
)

// maxChildMessage bounds one line from the local palace server. Answers may
// be larger than what an agent may send (a page of drawers), so the bound
// is wider than wire.MaxMessage. A longer line is read past and dropped:
// the call it answers (its id, read from its ends) gets errAnswerTooLarge,
// and the server and the calls behind it run on. One whose id cannot be
// read ends the connection (the child is restarted), rather than a call
// waiting for an answer that was dropped.
const maxChildMessage = 64 << 20

// relayPrefix marks the ids of calls the edge relays itself; the SDK's own
// ids are numbers, so the two never collide.
const relayPrefix = "edge-"

var (
	// errNotSent: the request never reached the child (its connection was
	// already closed), so sending it again cannot duplicate it.
	errNotSent = errors.New("the local palace server's connection is closed; nothing was sent")
	// errChildExited: the child's output ended with the call in flight.
	errChildExited = errors.New("the local palace server exited during the call")
	// errAnswerTooLarge: the child's answer to the call was over the
	// bound (maxChildMessage) and dropped; the child runs on.
	errAnswerTooLarge = errors.New("the local palace's answer is larger than the edge takes")
)

// childConn is the edge's connection to the local palace server's stdio.
// The SDK's client session runs over it for the session itself
// (initialize, tools/list, logging and progress notifications), while tool
// calls are relayed as bytes: written with an id of the edge's own and
// picked out of the child's output before the SDK sees them. go-sdk
// decodes each message several times with a fresh 32 KiB buffer; on the
// hot path that was most of the edge's cost (BENCHMARKS.md).
type childConn struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
	max       int // the longest line read from the child (maxChildMessage)
	log       *slog.Logger

	wmu  sync.Mutex // one message per write, from the SDK and relayed calls alike
	sdkR *io.PipeReader
	sdkW *io.PipeWriter

	next    atomic.Uint64
	mu      sync.Mutex
	calls   map[string]relayedCall // relayed calls in flight (given up ones too: busy)
	sent    uint64                 // relayed calls written so far (relayedCall.seq)
	done    chan struct{}          // closed when the child's output ends
	doneErr error
	// answeredAt is when the child last answered a relayed call (busy).
	answeredAt time.Time
	// finished is closed when the reader is done: every answer it owed
	// (a relayed call's, written to the agent from it) is written.
	finished chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// startChild starts cmd and returns its connection.
func startChild(cmd *exec.Cmd, terminate time.Duration, max int, log *slog.Logger) (*childConn, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r, w := io.Pipe()
	c := &childConn{cmd: cmd, stdin: stdin, terminate: terminate, max: max, log: log, sdkR: r, sdkW: w, calls: map[string]relayedCall{}, done: make(chan struct{}), finished: make(chan struct{})}
	go c.readLoop(stdout)
	return c, nil
}

// readLoop sorts the child's output: answers to relayed calls go to their
// callers, everything else to the SDK. A line that is not JSON is logged and
// skipped; it does not end the session. Close waits for it.
func (c *childConn) readLoop(stdout io.Reader) {
	defer close(c.finished)
	br := bufio.NewReaderSize(stdout, 64<<10)
	var err error
	for err == nil {
		var line []byte
		var id json.RawMessage
		var tooLong bool
		line, id, tooLong, err = wire.ReadLine(br, c.max)
		switch t := bytes.TrimSpace(line); {
		case tooLong && !c.dropTooLarge(id):
			// Which call it answered is unknown: each in flight may
			// have been applied, as if the child had exited.
			err = fmt.Errorf("%w (stopped by the edge: it sent a message over %s whose id could not be read)", errChildExited, sizeWords(c.max))
		case len(t) > 0:
			c.route(t)
		}
	}
	if errors.Is(err, io.EOF) {
		err = errChildExited
	}
	c.mu.Lock()
	c.doneErr = err
	close(c.done)
	orphans := c.calls
	c.calls = map[string]relayedCall{}
	c.mu.Unlock()
	for _, rc := range orphans {
		if rc.fn != nil {
			rc.fn(nil, err)
		}
	}
	c.sdkW.CloseWithError(io.EOF) // never fails (io.PipeWriter)
}

func (c *childConn) route(line []byte) {
	if !jsondepth.Valid(line) || line[0] != '{' {
		c.log.Warn("the local palace server wrote a line that is not JSON-RPC; skipped", "bytes", len(line))
		return
	}
	if m := gjson.GetBytes(line, "id"); m.Type == gjson.String && strings.HasPrefix(m.Str, relayPrefix) {
		c.answer(m.Str, line, nil)
		return
	}
	if _, err := c.sdkW.Write(append(line, '\n')); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		c.log.Debug("the SDK side of the child connection is closed", "err", err)
	}
}

// answer gives a relayed call its answer line, or err; an answer to a
// call given up (cancelled) is dropped.
func (c *childConn) answer(id string, line []byte, err error) {
	c.mu.Lock()
	rc := c.calls[id]
	delete(c.calls, id)
	for other, given := range c.calls {
		if given.fn == nil && given.seq < rc.seq {
			delete(c.calls, other) // the child answers: it is no longer at a call given up before
		}
	}
	c.answeredAt = time.Now()
	c.mu.Unlock()
	if rc.fn != nil {
		rc.fn(line, err)
	}
}

// dropTooLarge drops a message over c.max whose id (read from its ends)
// it has: a relayed call's gets errAnswerTooLarge, and the child, which
// wrote it whole, is in step for the next. false: no id (which call it
// answered, if any, is unknown).
func (c *childConn) dropTooLarge(id json.RawMessage) bool {
	if id == nil {
		return false
	}
	var s string
	if json.Unmarshal(id, &s) != nil || !strings.HasPrefix(s, relayPrefix) {
		c.log.Warn("the local palace server sent a message too large to read; dropped", "id", string(id), "over", sizeWords(c.max))
		return true // the SDK's: its call ends at its own timeout
	}
	c.log.Warn("the local palace server's answer to a call is too large to pass on; dropped, the server runs on", "id", s, "over", sizeWords(c.max))
	c.answer(s, nil, fmt.Errorf("%w: it is over %s, so it was dropped (the local palace server runs on); ask for less", errAnswerTooLarge, sizeWords(c.max)))
	return true
}

// sizeWords is n bytes in words: "64 MiB", or "1000 bytes".
func sizeWords(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// write sends one message line.
func (c *childConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(b)
}

func (c *childConn) writeLocked(b []byte) error {
	select {
	case <-c.done:
		return errNotSent
	default:
	}
	if _, err := c.stdin.Write(b); err != nil {
		return fmt.Errorf("%w: %w", errNotSent, err)
	}
	return nil
}

// newID is a fresh id for a relayed call.
func (c *childConn) newID() string { return relayPrefix + strconv.FormatUint(c.next.Add(1), 10) }

// start sends one request with id (from newID); fn gets the child's answer
// line as it is, or the error that ended the connection first. fn runs on
// the reader's goroutine, possibly before start returns: it must not block
// for long.
func (c *childConn) start(id, method string, params json.RawMessage, fn func(line []byte, err error)) error {
	_, err := c.send(id, method, params, fn, false)
	return err
}

// send is start; with idle, only when no relayed call is in flight, so
// that the call is the next the child answers (false: nothing was sent).
func (c *childConn) send(id, method string, params json.RawMessage, fn func(line []byte, err error), idle bool) (bool, error) {
	if idle && !c.idle() {
		return false, nil // not waiting for the write lock behind a call stuck writing (a full pipe)
	}
	c.wmu.Lock() // held until written: a call started after this check is written after it
	defer c.wmu.Unlock()
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return false, errNotSent
	default:
	}
	if idle && len(c.calls) > 0 {
		c.mu.Unlock()
		return false, nil // one started since the check above
	}
	c.sent++
	c.calls[id] = relayedCall{fn, time.Now(), c.sent, jobOf(params)}
	c.mu.Unlock()
	if err := c.writeLocked(append(wire.Request(id, method, params), '\n')); err != nil {
		c.forget(id)
		return false, err
	}
	return true, nil
}

// idle reports no relayed call in flight.
func (c *childConn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls) == 0
}

// relayedCall is a relayed call in flight: what takes its answer (nil: the
// call was given up), when it was sent, its place in the order sent (the
// child answers in that order), and, for a job of minutes, what the child
// is doing at it (jobOf).
type relayedCall struct {
	fn   func(line []byte, err error)
	sent time.Time
	seq  uint64
	job  string
}

// jobOf is what the local palace does at a tool call with these params:
// the catalogue's LongJob for the tool ("mining"), "" for most.
func jobOf(params json.RawMessage) string {
	t, _ := catalogue.Lookup(gjson.GetBytes(params, "name").Str)
	return t.LongJob
}

// longJob is what the child is doing at a long job in flight (jobOf), ""
// when none is: it answers nothing sent after that job until it is done.
// A job given up (cancelled) counts as in busySince.
func (c *childConn) longJob() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rc := range c.calls {
		if rc.job != "" {
			return rc.job
		}
	}
	return ""
}

// lastAnswer is when the child last answered a relayed call (zero: none).
func (c *childConn) lastAnswer() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answeredAt
}

// busySince reports that the child has been at one call since before t:
// a relayed call sent before t is in flight, and the child has answered
// none since t. It answers one call at a time, in the order sent (a mine
// takes minutes), so a call sent after t waits behind it. A call given up
// (cancelled) still counts until the child answers it or a call sent
// after it: MemPalace does nothing with a cancellation and goes on mining.
func (c *childConn) busySince(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.answeredAt.Before(t) {
		return false
	}
	for _, rc := range c.calls {
		if rc.sent.Before(t) {
			return true
		}
	}
	return false
}

// abandon gives a call up: its answer, if it still comes, is dropped, and
// the child is told (notifications/cancelled). It stays in flight for
// busySince and longJob until the child answers it or a call sent after it.
func (c *childConn) abandon(id, reason string) {
	c.mu.Lock()
	if rc, ok := c.calls[id]; ok {
		rc.fn = nil
		c.calls[id] = rc
	}
	c.mu.Unlock()
	c.write(append(wire.Cancellation(id, reason), '\n')) // best effort: a child already gone has nothing to cancel
}

// toolCall relays tools/call, waits for the child's answer and splits it
// into its result or the JSON-RPC error the child sent. When ctx ends
// first, the call is abandoned.
func (c *childConn) toolCall(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error, error) {
	type answer struct {
		line []byte
		err  error
	}
	ch := make(chan answer, 1)
	id := c.newID()
	if err := c.start(id, "tools/call", params, func(line []byte, err error) { ch <- answer{line, err} }); err != nil {
		return nil, nil, err
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, nil, a.err
		}
		return childAnswer(a.line)
	case <-ctx.Done():
		c.abandon(id, ctx.Err().Error())
		return nil, nil, ctx.Err()
	}
}

func (c *childConn) forget(id string) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// childAnswer splits one of the child's answer lines (valid JSON: route
// checks each) into its result or its JSON-RPC error.
func childAnswer(line []byte) (json.RawMessage, *jsonrpc.Error, error) {
	result, rpcErr, err := wire.SplitAnswer(line)
	if err != nil {
		return nil, nil, fmt.Errorf("the local palace server: %w", err)
	}
	return result, rpcErr, nil
}

// sdkSide is what the SDK's IOTransport reads and writes.
func (c *childConn) sdkSide() (io.ReadCloser, io.WriteCloser) { return c.sdkR, sdkWriter{c} }

type sdkWriter struct{ c *childConn }

func (w sdkWriter) Write(p []byte) (int, error) {
	if err := w.c.write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w sdkWriter) Close() error { return w.c.Close() }

// Close ends the child as the MCP stdio spec says: close its input, wait,
// then SIGTERM, then SIGKILL (childExitWait each). Its output ending is
// what is waited for: the reader then answers every relayed call still
// owed, and Close returns once it has, so nothing is written to the agent
// after the edge stopped. Only then is the child reaped (Wait closes the
// pipe the reader reads). A child that cannot be killed is left behind
// after one more wait, with its reader.
func (c *childConn) Close() error {
	c.closeOnce.Do(func() {
		c.wmu.Lock()
		c.stdin.Close() // the child's exit, waited for below, is what counts
		c.wmu.Unlock()
		ended := func() bool {
			select {
			case <-c.done:
				return true
			case <-time.After(c.terminate):
				return false
			}
		}
		if !ended() && (c.cmd.Process.Signal(syscall.SIGTERM) != nil || !ended()) {
			c.log.Warn("the local palace server did not exit at the end of its input nor at SIGTERM (stuck: on a full disk, say); killed", "pid", c.cmd.Process.Pid)
			c.cmd.Process.Kill() // an error: exited already, or unkillable; the wait says which
		}
		exited := make(chan error, 1)
		go func() { exited <- c.cmd.Wait() }() // also ends a read a grandchild holding the pipe keeps open
		select {
		case c.closeErr = <-exited:
			<-c.finished
		case <-time.After(c.terminate):
			c.closeErr = errors.New("the local palace server did not exit")
		}
	})
	return c.closeErr
}
