package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/wire"
)

// legacyProtocol is the newest MCP version with the initialize handshake.
const legacyProtocol = "2025-11-25"

// childExitWait is how long the local palace server has to exit once its
// input is closed, and again after SIGTERM, before it is killed.
const childExitWait = 2 * time.Second

// ErrLocalDown is returned while the local palace server is not running.
var ErrLocalDown = errors.New("local palace unavailable")

// Child supervises the local palace server: it spawns it, keeps one MCP
// session to it, and respawns it with bounded backoff when it dies.
type Child struct {
	argv   []string
	env    []string
	log    *slog.Logger
	client *mcp.Client
	o      ChildOptions // Stderr and Wait made explicit (NewChild)

	mu      sync.Mutex
	session *mcp.ClientSession
	conn    *childConn    // the session's connection; tool calls are relayed over it
	changed chan struct{} // closed when a session comes up or a start fails; then replaced
	lastErr error
	spawns  int
	// startFailed: the last start did not bring a session up (the command
	// is missing, or it failed its handshake). Calls fail at once instead
	// of waiting for a server that is not coming.
	startFailed bool
}

// ChildOptions are the handlers that forward the child's notifications.
type ChildOptions struct {
	OnTools    func([]*mcp.Tool)
	OnLog      func(context.Context, *mcp.LoggingMessageParams)
	OnProgress func(context.Context, *mcp.ProgressNotificationParams)
	// Stderr receives the child's own log lines (default: the edge's stderr).
	Stderr io.Writer
	// Version is the edge's, reported to the child.
	Version string
	// First, if set, is what a started server gets before any other call:
	// it answers one call at a time, in the order sent.
	First func(context.Context) []FirstCall
	// OnDown is called when a start fails (the server is missing or
	// broken), once per failure after a success or at first.
	OnDown func(error)
	// Wait bounds how long a call waits for a server being started
	// (default 10 s, the edge's call timeout).
	Wait time.Duration
	// exitWait is how long the server has to exit once its input is
	// closed, and again after SIGTERM (default childExitWait; tests set
	// shorter where a hung server is stopped).
	exitWait time.Duration
	// maxMessage bounds a line from the server (default maxChildMessage;
	// tests set smaller).
	maxMessage int
}

// FirstCall is a call a started server gets before any other
// (ChildOptions.First): its tools/call params, and what takes its answer
// line, or the error that ended the connection first (nil: the answer is
// dropped). Answered runs on the connection's reader: it must not block.
type FirstCall struct {
	Params   json.RawMessage
	Answered func(line []byte, err error)
}

// NewChild prepares a supervisor; Run starts it.
func NewChild(argv, env []string, log *slog.Logger, o ChildOptions) *Child {
	if o.Wait <= 0 {
		o.Wait = 10 * time.Second
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.exitWait <= 0 {
		o.exitWait = childExitWait
	}
	if o.maxMessage <= 0 {
		o.maxMessage = maxChildMessage
	}
	c := &Child{argv: argv, env: env, log: log, o: o, changed: make(chan struct{})}
	copts := &mcp.ClientOptions{}
	if o.OnLog != nil {
		copts.LoggingMessageHandler = func(ctx context.Context, r *mcp.LoggingMessageRequest) { o.OnLog(ctx, r.Params) }
	}
	if o.OnProgress != nil {
		copts.ProgressNotificationHandler = func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) { o.OnProgress(ctx, r.Params) }
	}
	copts.ToolListChangedHandler = func(ctx context.Context, r *mcp.ToolListChangedRequest) { go c.refreshTools() }
	c.client = mcp.NewClient(&mcp.Implementation{Name: "devbox-config-edge", Version: o.Version}, copts)
	return c
}

// Run keeps the child alive until ctx ends.
func (c *Child) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := c.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		c.lastErr = err
		failed := errors.As(err, new(*startError))
		first := failed && !c.startFailed
		if failed {
			c.startFailed = true
			c.signalLocked() // calls waiting for a start fail now, not at their timeout
		}
		c.mu.Unlock()
		if first && c.o.OnDown != nil {
			c.o.OnDown(err)
		}
		if time.Since(start) > 30*time.Second {
			backoff = 100 * time.Millisecond // it ran a while: a fresh failure
		}
		c.log.Warn("local palace server stopped; restarting", "command", c.argv[0], "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (c *Child) runOnce(ctx context.Context) error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	defer dieWithEdge(cmd)() // held until the server has stopped: it dies with the edge
	cmd.Env = c.env
	cmd.Stderr = c.o.Stderr // the child's own log lines go where ours do
	conn, err := startChild(cmd, c.o.exitWait, c.o.maxMessage, c.log)
	if err != nil {
		return &startError{fmt.Errorf("start %s: %w", c.argv[0], err)}
	}
	r, w := conn.sdkSide()
	connectCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	// A session of the initialize handshake: the calls the edge relays
	// carry no per-call protocol _meta, which a stateless session needs.
	session, err := c.client.Connect(connectCtx, &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1}, &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	cancel()
	if err != nil {
		conn.Close() // the handshake's error is the one to report
		return &startError{fmt.Errorf("start %s: %w", c.argv[0], err)}
	}
	if c.o.First != nil {
		for _, f := range c.o.First(ctx) {
			if err := conn.start(conn.newID(), "tools/call", f.Params, f.Answered); err != nil {
				break // the connection closed: the session ends below
			}
		}
	}
	c.mu.Lock() // no call reaches the server before this
	c.session, c.conn, c.startFailed = session, conn, false
	c.spawns++
	c.signalLocked()
	c.mu.Unlock()
	c.refreshTools()

	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	var werr error
	select {
	case <-ctx.Done():
		session.Close() // stopping: the child ends either way
		werr = ctx.Err()
	case werr = <-done:
	}
	c.invalidate(session)
	if werr == nil {
		werr = errors.New("exited")
	}
	return werr
}

func (c *Child) refreshTools() {
	s := c.current()
	if s == nil || c.o.OnTools == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			c.log.Warn("listing the local palace's tools failed", "err", err)
			return
		}
		tools = append(tools, t)
	}
	c.o.OnTools(tools)
}

func (c *Child) current() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Session waits up to wait for a running child.
func (c *Child) Session(ctx context.Context, wait time.Duration) (*mcp.ClientSession, error) {
	s, _, err := c.running(ctx, wait)
	return s, err
}

// running waits up to wait for a running child: its session and connection.
// A child whose start failed is reported at once (the supervisor keeps
// trying), also when the start fails while the call waits.
func (c *Child) running(ctx context.Context, wait time.Duration) (*mcp.ClientSession, *childConn, error) {
	var timeout <-chan time.Time
	for {
		c.mu.Lock()
		s, conn, changed, lastErr, failed := c.session, c.conn, c.changed, c.lastErr, c.startFailed
		c.mu.Unlock()
		switch {
		case s != nil:
			return s, conn, nil
		case failed:
			return nil, nil, fmt.Errorf("%w: %w", ErrLocalDown, lastErr)
		}
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			if lastErr != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrLocalDown, lastErr)
			}
			return nil, nil, ErrLocalDown
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// signalLocked wakes the calls waiting in running (c.mu held).
func (c *Child) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// invalidate forgets a session that ended (if it is still the current one);
// the next call waits for the respawned child.
func (c *Child) invalidate(s *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == s {
		c.session, c.conn = nil, nil
	}
	c.mu.Unlock()
}

// live is the running child's connection, or nil (not started, restarting).
func (c *Child) live() *childConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// Relay runs tools/call on the local palace with params as the agent sent
// them and returns the result as the child sent it (or the JSON-RPC error
// it answered). A child that dies mid-call gives an error, never a hang;
// an answer too large to take gives errAnswerTooLarge, the child running on. A
// call that could not be sent (the connection was already closing) is sent
// once more to the respawned child: it cannot have landed.
func (c *Child) Relay(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error, error) {
	for attempt := 0; ; attempt++ {
		s, conn, err := c.running(ctx, c.o.Wait)
		if err != nil {
			return nil, nil, err
		}
		res, rpcErr, err := conn.toolCall(ctx, params)
		if err == nil || ctx.Err() != nil || errors.Is(err, errAnswerTooLarge) { // the server runs on
			return res, rpcErr, err
		}
		c.invalidate(s)
		if errors.Is(err, errNotSent) && attempt == 0 {
			continue
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrLocalDown, err)
	}
}

// Call is Relay for a call the edge builds or must read: params are
// encoded and the result decoded.
func (c *Child) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	b, err := wire.EncodeCallParams(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", p.Name, err)
	}
	raw, rpcErr, err := c.Relay(ctx, b)
	if err != nil {
		return nil, err
	}
	if rpcErr != nil {
		return nil, rpcErr
	}
	return wire.DecodeResult(raw)
}

// startError is a start that brought no session up.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// Spawns is how many times the child was started (for tests and status).
func (c *Child) Spawns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spawns
}

// SetLoggingLevel passes the agent's logging level on to the child,
// within 10 s or until ctx ends.
func (c *Child) SetLoggingLevel(ctx context.Context, p *mcp.SetLoggingLevelParams) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := c.Session(ctx, 10*time.Second)
	if err == nil {
		err = s.SetLoggingLevel(ctx, p)
	}
	if err != nil {
		c.log.Debug("the agent's logging level not passed on to the local palace server", "err", err)
	}
}
