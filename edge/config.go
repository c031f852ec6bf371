package edge

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
	// OptedIn says what shows this edge was meant to replicate (OptedIn):
	// without a primary it then warns that this session's writes stay
	// local. "" in R1.
	OptedIn string
	// Agent, OriginDevice, OriginLabel stamp provenance on replicated
	// writes: only values the ladder accepted.
	Agent, OriginDevice, OriginLabel string
	// Identity is the agent's address on the coordination log,
	// <agent>@<label> (RFC 003 §3.2): whose mailbox the edge reads.
	Identity string
	// AgentRefused is MEMPALACE_AGENT_NAME as given when the ladder
	// refused it ("": none refused): the session's start says so.
	AgentRefused string
	// LabelRefused is MEMPALACE_ORIGIN_LABEL as given when the ladder
	// refused it ("": none refused): the session's start says so.
	LabelRefused string
	// CallTimeout bounds every call to the primary.
	CallTimeout time.Duration
	// GrantAsk bounds how long a write the grants last heard refuse waits
	// for the gateway's fresh answer before it is refused on them (0:
	// DefaultGrantAsk, 1 s); the ask goes on within CallTimeout.
	GrantAsk time.Duration
	// Lease is how long a flusher holds the outbox before another process
	// may take over (0: the outbox's default, 10 s).
	Lease time.Duration
	// ToolsWait bounds how long tools/list and tools/call wait for the
	// local palace's first tool list (0: DefaultToolsWait).
	ToolsWait time.Duration
	// PrimaryToolsWait bounds how long that first list waits for the
	// primary's tools (0: DefaultPrimaryToolsWait).
	PrimaryToolsWait time.Duration
	// StopGrace bounds the stop when Serve's context ends (SIGTERM,
	// SIGINT): the calls in flight, the writes the local palace has not
	// answered and the flusher's send under way have it, together, to
	// finish; then the calls are answered with an error, the writes are
	// given up (queued all the same: they were in the outbox before they
	// were sent) and the local palace is stopped (childExitWait to exit,
	// twice if it needs SIGTERM). It is also how long the flusher's send
	// under way at the end of the agent's input still has to get its
	// answer (0: DefaultStopGrace).
	StopGrace time.Duration
	// WriteGrace bounds how long a write already sent to the local palace
	// is still waited for once its call is cancelled (the agent's
	// notifications/cancelled) or the agent's input ends: the local palace
	// applies it anyway, so its answer is awaited and the write queued (a
	// signal waits StopGrace instead). Past it the write is given up,
	// logged, and queued all the same; it was in the outbox before it was
	// sent (outbox/intent.go) (0: DefaultWriteGrace).
	WriteGrace time.Duration
	// WriteBound bounds how long a write sent to the local palace waits
	// for its answer while the local palace is at no long job (catalogue
	// LongJob: a mine is waited for, however long): MemPalace stuck on a
	// full disk never answers. Past it the write is given up as at a stop
	// (queued all the same; the agent is told it may or may not have been
	// applied) (0: DefaultWriteBound).
	WriteBound time.Duration
	// Probe is the first wait before the breaker probes a primary that
	// went down; the waits double up to 30 s (0: PrimaryOptions' default,
	// 250 ms).
	Probe time.Duration
	// MailboxPoll is how often the owed asks are read again during a
	// session (0: DefaultMailboxPoll, RFC 003 §3.5's floor; tests set
	// shorter).
	MailboxPoll time.Duration
	// WakeWait bounds how long after the edge starts its initialize
	// answer waits for its first read of the owed asks before answering
	// from the view it has (0: DefaultWakeWait; negative: not at all).
	WakeWait time.Duration
	// Version is reported to MCP peers.
	Version string
	Log     *slog.Logger
	// childExitWait is how long the local palace server has to exit once
	// its input is closed, and again after SIGTERM (0: childExitWait);
	// tests that stop a hung server set it short.
	childExitWait time.Duration
	// trustWait bounds how long after the edge starts an initialize
	// answered from a kept view waits to hear the device's trusted set (0:
	// wakeTrustWait); tests that mean the header, not the bound, set it
	// long.
	trustWait time.Duration
	// childMaxMessage bounds a line from the local palace server (0:
	// maxChildMessage); tests set smaller.
	childMaxMessage int
	// primaryMaxAnswer bounds one answer read from the primary (0:
	// maxPrimaryAnswer); tests set smaller.
	primaryMaxAnswer int
}

// The production defaults of Config's waits; tests set short ones.
const (
	DefaultToolsWait        = 15 * time.Second
	DefaultPrimaryToolsWait = 3 * time.Second
	DefaultMailboxPoll      = 5 * time.Minute
	DefaultWakeWait         = 30 * time.Millisecond
	DefaultStopGrace        = 3 * time.Second
	DefaultWriteGrace       = 30 * time.Second
	DefaultWriteBound       = 10 * time.Minute
)

// withDefaults is c with every unset wait at its production default.
func (c Config) withDefaults() Config {
	if c.ToolsWait <= 0 {
		c.ToolsWait = DefaultToolsWait
	}
	if c.PrimaryToolsWait <= 0 {
		c.PrimaryToolsWait = DefaultPrimaryToolsWait
	}
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.WriteGrace <= 0 {
		c.WriteGrace = DefaultWriteGrace
	}
	if c.WriteBound <= 0 {
		c.WriteBound = DefaultWriteBound
	}
	if c.MailboxPoll <= 0 {
		c.MailboxPoll = DefaultMailboxPoll
	}
	switch {
	case c.WakeWait == 0:
		c.WakeWait = DefaultWakeWait
	case c.WakeWait < 0:
		c.WakeWait = 0
	}
	return c
}

// StateDir is where the edge keeps its own files: <palace>/edge.
func (c Config) StateDir() string { return filepath.Join(c.Palace, "edge") }

// PassThrough reports R1 mode: no primary, a transparent proxy to the child.
func (c Config) PassThrough() bool { return c.PrimaryURL == "" }

// OptedIn is what shows an edge was started to replicate: render's edge
// entry (MEMPALACE_EDGE_HARNESS set), or an edge/ outbox in the palace of
// a process given some MEMPALACE_* variable (environ); "" for neither, as
// in R1, with no MEMPALACE_* at all.
func OptedIn(s ladder.EdgeSettings, environ []string) string {
	if s.Harness != "" {
		return "it was started from render's edge entry (" + ladder.EnvEdgeHarness + "=" + s.Harness + ")"
	}
	if fi, err := os.Stat(filepath.Join(s.Palace, "edge")); err != nil || !fi.IsDir() {
		return "" // no outbox: nothing says this palace replicates
	}
	for _, kv := range environ {
		if strings.HasPrefix(kv, "MEMPALACE_") {
			return "the palace " + s.Palace + " has the edge/ outbox of a replicating edge"
		}
	}
	return ""
}

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
		AgentRefused: s.AgentNameRefused,
		LabelRefused: s.OriginLabelRefused,
		CallTimeout:  s.Timeout,
		Lease:        s.Lease,
		Version:      version,
		Log:          log,
	}
}
