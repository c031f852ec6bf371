package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// JSON-RPC codes of the gateway's own refusals. A denial is permanent (an
// edge's outbox gives up on it); a rate limit is in the server range that
// clients retry.
const (
	CodeDenied      = -31003
	CodeRateLimited = ledger.CodeRateLimited
)

// MaxBody is mempalace serve's request cap.
const MaxBody = 16 << 20

// writeShare is how many writes each device may have waiting for the
// primary's single write slot.
const writeShare = 8

// Server is the gateway: its lifecycle (Open, Reload, Watch) is here, its
// request path (ServeHTTP and its steps) in handler.go.
type Server struct {
	ConfigFile string
	Upstream   string // the upstream's MCP endpoint, e.g. http://127.0.0.1:8765/mcp
	// UpstreamToken returns the shared upstream token (asked per request);
	// cmd builds it from the environment or the config's token file.
	UpstreamToken func() string
	BindHost      string // the listen host, for the loopback Host pin
	Log           *slog.Logger
	Now           func() time.Time
	// Ledger, if set, wraps every authorized tools/call's upstream call
	// (nil: none).
	Ledger Ledger

	cfg    atomic.Pointer[Config]
	key    []byte
	audit  *Audit
	client *http.Client // tool calls
	stream *http.Client // GET routes (an SSE stream has no overall timeout)
	state  tokenState

	mu    sync.Mutex
	mtime time.Time

	rates  limiters
	writes *writeQueue
}

// Open loads the configuration, the runtime state, the secret and the
// audit log.
func (s *Server) Open() error {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if s.UpstreamToken == nil {
		s.UpstreamToken = func() string { return "" }
	}
	if err := s.Reload(); err != nil {
		return err
	}
	cfg := s.cfg.Load()
	key, err := LoadSecret(cfg.SecretFile)
	if err != nil {
		return fmt.Errorf("secret_file: %w", err)
	}
	s.key = key
	if s.audit, err = OpenAudit(cfg.AuditLog); err != nil {
		return fmt.Errorf("audit_log: %w", err)
	}
	if f := cfg.SigningKeyFile; f != "" {
		if s.audit.key, err = SigningKey(f); err != nil {
			return fmt.Errorf("signing_key_file: %w", err)
		}
	}
	s.client = &http.Client{Timeout: callTimeout}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	s.stream = &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, ResponseHeaderTimeout: 30 * time.Second}}
	s.writes = newWriteQueue(writeShare, 30*time.Second)
	return nil
}

// Reload re-reads the configuration and the state file; a bad file keeps
// the old ones.
func (s *Server) Reload() error {
	c, err := LoadConfig(s.ConfigFile)
	if err != nil {
		return err
	}
	if err := s.state.load(StateFile(s.ConfigFile, c)); err != nil {
		return fmt.Errorf("state_file: %w", err)
	}
	s.cfg.Store(c)
	s.markSeen()
	s.rates.reset() // new rates apply at once
	return nil
}

// markSeen records the config file's current mtime, so Watch reloads only
// on a change it has not seen.
func (s *Server) markSeen() {
	if fi, err := os.Stat(s.ConfigFile); err == nil {
		s.mu.Lock()
		s.mtime = fi.ModTime()
		s.mu.Unlock()
	}
}

// Watch reloads when the file changes (polled every 200 ms, so a
// revocation takes effect within a second) until ctx ends.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			seen := s.mtime
			s.mu.Unlock()
			if fi, err := os.Stat(s.ConfigFile); err == nil && !fi.ModTime().Equal(seen) {
				if err := s.Reload(); err != nil {
					s.Log.Error("config change not applied", "err", err)
					s.markSeen()
				} else {
					s.Log.Info("config reloaded")
				}
			}
		}
	}
}

// Close closes the audit log.
func (s *Server) Close() error {
	if s.audit == nil {
		return nil
	}
	return s.audit.Close()
}
