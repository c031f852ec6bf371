package edge

import (
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/joakimp/devbox-config/ladder"
)

// Config is everything the edge runs with. It is built from the ladder's
// reading of the environment (ConfigFrom); the edge reads no variable
// itself.
type Config struct {
	// PrimaryURL is MEMPALACE_REMOTE_URL; empty means pass-through (R1).
	PrimaryURL string
	// Token returns MEMPALACE_REMOTE_TOKEN, read again on every connect so
	// a rotated token is picked up; never stored, never logged.
	Token func() string
	// Child is the local palace server's argv (ladder.EdgeSettings.Child).
	Child []string
	// ChildEnv is the child's environment (the edge's, without the token).
	ChildEnv []string
	// ChildStderr receives the child's log lines (default: os.Stderr).
	ChildStderr io.Writer
	// Palace is the palace directory; the edge's state lives in Palace/edge.
	Palace string
	// Agent, OriginDevice, OriginLabel stamp provenance on replicated
	// writes: only values the ladder accepted.
	Agent, OriginDevice, OriginLabel string
	// Identity is the agent's address on the coordination log,
	// <agent>@<label> (RFC 003 §3.2): whose mailbox the edge reads.
	Identity string
	// CallTimeout bounds every call to the primary.
	CallTimeout time.Duration
	// Lease is how long a flusher holds the outbox before another process
	// may take over (0: the outbox's default, 10 s).
	Lease time.Duration
	// Version is reported to MCP peers.
	Version string
	Log     *slog.Logger
}

// StateDir is where the edge keeps its own files: <palace>/edge.
func (c Config) StateDir() string { return filepath.Join(c.Palace, "edge") }

// PassThrough reports R1 mode: no primary, a transparent proxy to the child.
func (c Config) PassThrough() bool { return c.PrimaryURL == "" }

// ConfigFrom builds the edge's configuration from the ladder's settings.
// token is the primary's token source (ladder.TokenSource); childEnv the
// local server's environment (ladder.ChildEnviron).
func ConfigFrom(s ladder.EdgeSettings, token func() string, childEnv []string, version string, log *slog.Logger) Config {
	return Config{
		PrimaryURL:   s.URL,
		Token:        token,
		Child:        s.Child,
		ChildEnv:     childEnv,
		Palace:       s.Palace,
		Agent:        s.Agent(),
		OriginDevice: s.OriginDevice,
		OriginLabel:  s.OriginLabel,
		Identity:     s.Identity(),
		CallTimeout:  s.Timeout,
		Lease:        s.Lease,
		Version:      version,
		Log:          log,
	}
}
