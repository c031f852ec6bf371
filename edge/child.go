package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrLocalDown is returned while the local palace server is not running.
var ErrLocalDown = errors.New("local palace unavailable")

// Child supervises the local palace server: it spawns it, keeps one MCP
// session to it, and respawns it with bounded backoff when it dies.
type Child struct {
	argv    []string
	env     []string
	log     *slog.Logger
	client  *mcp.Client
	onTools func([]*mcp.Tool)

	mu      sync.Mutex
	session *mcp.ClientSession
	ready   chan struct{} // closed when a session is up; replaced when it goes down
	lastErr error
	spawns  int
}

// ChildOptions are the handlers that forward the child's notifications.
type ChildOptions struct {
	OnTools    func([]*mcp.Tool)
	OnLog      func(context.Context, *mcp.LoggingMessageParams)
	OnProgress func(context.Context, *mcp.ProgressNotificationParams)
}

// NewChild prepares a supervisor; Run starts it.
func NewChild(argv, env []string, log *slog.Logger, o ChildOptions) *Child {
	c := &Child{argv: argv, env: env, log: log, onTools: o.OnTools, ready: make(chan struct{})}
	copts := &mcp.ClientOptions{}
	if o.OnLog != nil {
		copts.LoggingMessageHandler = func(ctx context.Context, r *mcp.LoggingMessageRequest) { o.OnLog(ctx, r.Params) }
	}
	if o.OnProgress != nil {
		copts.ProgressNotificationHandler = func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) { o.OnProgress(ctx, r.Params) }
	}
	copts.ToolListChangedHandler = func(ctx context.Context, r *mcp.ToolListChangedRequest) { go c.refreshTools() }
	c.client = mcp.NewClient(&mcp.Implementation{Name: "devbox-config-edge", Version: Version}, copts)
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
		c.mu.Unlock()
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
	cmd.Env = c.env
	cmd.Stderr = os.Stderr // the child's own log lines go where ours do
	connectCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	session, err := c.client.Connect(connectCtx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	c.mu.Lock()
	c.session = session
	c.spawns++
	close(c.ready)
	c.mu.Unlock()
	c.refreshTools()

	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	var werr error
	select {
	case <-ctx.Done():
		session.Close()
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
	if s == nil || c.onTools == nil {
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
	c.onTools(tools)
}

func (c *Child) current() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Session waits up to wait for a running child.
func (c *Child) Session(ctx context.Context, wait time.Duration) (*mcp.ClientSession, error) {
	c.mu.Lock()
	s, ready, lastErr := c.session, c.ready, c.lastErr
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ready:
		if s := c.current(); s != nil {
			return s, nil
		}
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if lastErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrLocalDown, lastErr)
	}
	return nil, ErrLocalDown
}

// invalidate forgets a session that ended (if it is still the current one);
// the next call waits for the respawned child.
func (c *Child) invalidate(s *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == s {
		c.session = nil
		c.ready = make(chan struct{})
	}
	c.mu.Unlock()
}

// Call runs a tool on the local palace. A child that dies mid-call makes
// the call return an error (the SDK closes the session), never a hang. A
// call refused before it was sent (the session was already closing) is
// sent once more to the respawned child: it cannot have landed.
func (c *Child) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		s, err := c.Session(ctx, 15*time.Second)
		if err != nil {
			return nil, err
		}
		res, err := s.CallTool(ctx, p)
		if err == nil || peerError(err) != nil && !notSent(err) {
			return res, err
		}
		c.invalidate(s)
		if notSent(err) && attempt == 0 {
			continue
		}
		return nil, fmt.Errorf("%w: the local palace server exited during the call: %v", ErrLocalDown, err)
	}
}

// notSent recognises go-sdk's "client is closing": the request was refused
// before it reached the child.
func notSent(err error) bool {
	e := peerErrorRaw(err)
	return e != nil && e.Message == "client is closing"
}

// Spawns is how many times the child was started (for tests and status).
func (c *Child) Spawns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spawns
}

// SetLoggingLevel passes the agent's logging level on to the child.
func (c *Child) SetLoggingLevel(p *mcp.SetLoggingLevelParams) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s, err := c.Session(ctx, 10*time.Second); err == nil {
		s.SetLoggingLevel(ctx, p)
	}
}
