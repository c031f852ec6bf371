package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/warmconn"
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

// writeWait is how long a write waits for the write slot.
const writeWait = 30 * time.Second

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
	// Stderr is where audit anchors go when audit_anchor is "stderr"
	// (nil: os.Stderr).
	Stderr io.Writer

	cfg    atomic.Pointer[Config]
	key    []byte
	audit  *Audit
	client *http.Client        // tool calls
	warm   *warmconn.Transport // client's, nil if the upstream's scheme is not http(s)
	stream *http.Client        // GET routes (an SSE stream has no overall timeout)
	state  tokenState
	// refused: the upstream's last word on the gateway's token was a 401
	// (upstreamRefuses logs each change).
	refused atomic.Bool
	// palace is the primary's palace directory as it last named it (its
	// /statusz at start or when an answer names another path, a status's
	// sqlite_integrity): cutPaths cuts it
	// whole, spaces and all (nil: not known yet).
	palace atomic.Pointer[string]
	// palaceAsked is when an answer last made the gateway ask for the
	// palace directory again (relearnPalace; nil: never).
	palaceAsked atomic.Pointer[time.Time]
	// relearning is that ask, run in the background under life, which
	// Close ends before it waits for the ask.
	relearning sync.WaitGroup
	life       context.Context
	endLife    context.CancelFunc
	// callIDs numbers the gateway's calls to the upstream: each goes with
	// an id of its own, never a device's (upstreamCall).
	callIDs atomic.Uint64

	mu    sync.Mutex
	mtime time.Time
	// eventParams is what the upstream's event_list lists (objects.go).
	eventParams map[string]bool
	// eventScan bounds the events an event_list fill reads (evpage.go;
	// 0: eventScanMax); tests set fewer.
	eventScan atomic.Int64

	rates    limiters
	flight   inFlight // each device's requests being served (limits.go)
	refusals refusals // repeated refusals summarised (refusals.go)
	writes   *writeQueue

	binMu sync.Mutex
	bin   *trash.Store // opened by Trash

	prov *provenance.Store // who wrote what (opened by Open)

	// instance is the hold on the audit log (one gateway per log).
	instance *instanceLock

	// reloadRetry is how often Watch tries a refused config again (0:
	// the constant reloadRetry); tests set less.
	reloadRetry time.Duration

	// bodyGrace is how long any body may take beyond its length's time
	// (bodyTime; 0: the constant bodyGrace); tests set less.
	bodyGrace time.Duration

	// streams ends with EndStreams: every /logstream/stream relay then.
	streams    context.Context
	endStreams context.CancelFunc
	open       openStreams // each relay open now, by device (stream.go)
}

// EndStreams ends the /logstream/stream relays open now and any that
// start after: each client's stream ends cleanly, at once. A stream never
// ends by itself, so a graceful stop (http.Server.RegisterOnShutdown)
// calls it rather than wait out its grace for them.
func (s *Server) EndStreams() {
	if s.endStreams != nil {
		s.endStreams()
	}
}

// Open loads the configuration, the runtime state, the secret and the
// audit log, which it holds until Close: a second Server on the same
// audit log is refused (instance.go).
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
	read := time.Now()
	if err := s.Reload(); err != nil {
		return err
	}
	cfg := s.cfg.Load()
	key, err := LoadCheckedSecret(cfg, StateFile(s.ConfigFile, cfg))
	switch {
	case errors.Is(err, ErrCheckNotKept):
		s.Log.Warn("secret_file: starting unchecked", "err", err) // a read-only config directory
	case err != nil:
		return fmt.Errorf("secret_file: %w", err)
	}
	s.key = key
	if err := os.MkdirAll(filepath.Dir(cfg.AuditLog), 0o700); err != nil {
		return fmt.Errorf("audit_log: %w", err)
	}
	if s.instance, err = lockInstance(cfg.AuditLog); err != nil {
		return err
	}
	s.noteApplied(cfg.sum, read, nil)
	if err := s.openAudit(cfg); err != nil {
		s.instance.release()
		return err
	}
	if s.prov, err = provenance.Open(cfg.ProvenancePath(), s.Log); err != nil {
		s.audit.Close() // the index's error is the one to report
		s.instance.release()
		return fmt.Errorf("provenance_file: %w", err)
	}
	// Tool calls on a connection dialled ahead (serve closes each one);
	// https through a proxy, or any scheme warmconn does not serve, on
	// net/http's transport.
	var next http.RoundTripper = http.DefaultTransport
	if s.warm, err = warmconn.New(s.Upstream, http.DefaultTransport); err == nil {
		next = s.warm
	}
	s.client = upstreamClient(next, callTimeout)
	s.stream = upstreamClient(&http.Transport{DialContext: streamDialer, DisableKeepAlives: true, ResponseHeaderTimeout: 30 * time.Second}, 0)
	s.writes = newWriteQueue(writeShare, writeWait)
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.life, s.endLife = context.WithCancel(context.Background())
	return nil
}

// NoteNewState writes the audit line that says this start made lost
// (Config.LostKept's: each kept file's name, path and what it held) anew,
// empty, as --new-state does: the chain goes on, and an auditor sees when
// the state was reset.
func (s *Server) NoteNewState(lost []string) error {
	e := Entry{Time: s.Now().UTC(), Device: "operator", Method: "--new-state", Decision: VerdictNewState, Note: "made anew, empty: " + strings.Join(lost, "; ")}
	if err := s.audit.Append(e, true); err != nil {
		return fmt.Errorf("audit_log: noting --new-state: %w", err)
	}
	return nil
}

// openAudit opens the audit log (its directory created 0700), with its
// signing key, cadence and anchor.
func (s *Server) openAudit(cfg *Config) error {
	if err := os.MkdirAll(filepath.Dir(cfg.AuditLog), 0o700); err != nil {
		return fmt.Errorf("audit_log: %w", err)
	}
	a, err := OpenAudit(cfg.AuditLog, s.Log)
	if err != nil {
		return fmt.Errorf("audit_log: %w", err)
	}
	a.cadence, a.now, a.digestKey = cfg.Cadence(), s.Now, DigestKey(s.key)
	switch cfg.AuditAnchor {
	case "":
	case AnchorStderr:
		a.anchor.w = cmp.Or[io.Writer](s.Stderr, os.Stderr)
	default:
		a.anchor.file = cfg.AuditAnchor
	}
	if f := cfg.SigningKeyFile; f != "" {
		if a.key, err = SigningKey(f); err != nil {
			return fmt.Errorf("signing_key_file: %w", err)
		}
		if filepath.Dir(filepath.Clean(f)) == filepath.Dir(filepath.Clean(cfg.AuditLog)) {
			s.Log.Warn("signing_key_file is in the audit log's directory: whoever can rewrite the log and read the key can sign a rewritten log; move the key (and its .pub) elsewhere, readable by the gateway alone", "signing_key_file", f)
		}
	}
	s.audit = a
	return nil
}

// Reload re-reads the configuration and the state file; a bad file keeps
// the old ones. Either outcome is recorded for operators' commands
// (noteApplied).
func (s *Server) Reload() error {
	s.markSeen()       // before the read: a change after it is read at the next poll
	read := time.Now() // the operator's clock, not s.Now: ConfirmApplied compares it
	c, sum, err := loadConfig(s.ConfigFile)
	if err == nil {
		if err = s.state.load(StateFile(s.ConfigFile, c)); err != nil {
			err = fmt.Errorf("state_file: %w", err)
		}
	}
	if err != nil {
		s.noteApplied(sum, read, err)
		return err
	}
	s.cfg.Store(c)
	for _, why := range c.UnreachableAgents() {
		s.Log.Warn("an agent no session of its device could be: it can never post on the coordination log", "config", c.file, "agent", why)
	}
	s.mu.Lock()
	s.eventParams = nil // the upstream may have changed too: asked again
	s.mu.Unlock()
	s.rates.reset() // new rates apply at once
	s.noteApplied(sum, read, nil)
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
// revocation takes effect within a second, on open streams too), and
// every reloadRetry while the last reload failed (a cause outside the
// file, a state file's permissions, is corrected without saving it);
// reads the provenance index again when another process (a trash
// restore) wrote to it; and signs the audit log's unsigned lines when
// they are due, until ctx ends.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	var r retry
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.audit.CheckpointIfDue(); err != nil {
				s.Log.Error("audit checkpoint", "err", err)
			}
			if s.prov != nil {
				if err := s.prov.Refresh(); err != nil {
					s.Log.Error("provenance index not read again (a restore's origins wait)", "err", err)
				}
			}
			s.reloadIfDue(&r)
			s.recheckStreams() // a revocation, a change of scope, or a token past its time
		}
	}
}

// retry is Watch's memory of a reload that failed: its error (logged
// once, not at every try) and when to try again.
type retry struct {
	failed string // "": the last reload took the file
	next   time.Time
}

// reloadRetry is how often Watch tries a refused config again.
const reloadRetry = 2 * time.Second

// reloadIfDue reloads when the config file changed or a failed reload is
// due to be tried again, and logs what came of it: a refusal once per
// distinct error.
func (s *Server) reloadIfDue(r *retry) {
	s.mu.Lock()
	seen := s.mtime
	s.mu.Unlock()
	fi, err := os.Stat(s.ConfigFile)
	changed := err == nil && !fi.ModTime().Equal(seen)
	if !changed && (r.failed == "" || time.Now().Before(r.next)) {
		return
	}
	err = s.Reload()
	switch {
	case err == nil:
		s.Log.Info("config reloaded")
		r.failed = ""
	case err.Error() != r.failed:
		abs, _ := filepath.Abs(s.ConfigFile) // "": the path as given is in err
		s.Log.Error("config change not applied; the previous config stays", "config", abs, "err", err, "fix", "correct what it names; the gateway tries again every few seconds, and at once when the file is saved")
		r.failed = err.Error()
	}
	if err != nil {
		r.next = time.Now().Add(cmp.Or(s.reloadRetry, reloadRetry))
	}
}

// Trash is the gateway's trash, opened on first use (a gateway that
// never forwards a delete never opens it; `gateway` opens it at start-up,
// so that a trash that cannot be opened stops the gateway, not a delete).
// Its file and retention are the config's when it is opened.
func (s *Server) Trash() (*trash.Store, error) {
	s.binMu.Lock()
	defer s.binMu.Unlock()
	if s.bin != nil {
		return s.bin, nil
	}
	c := s.cfg.Load()
	st, err := trash.Open(c.TrashPath(), c.TrashRetention(), s.Log)
	if err != nil {
		return nil, err
	}
	st.Now, st.Key = s.Now, PurgeKey(s.key)
	n, err := st.Prune(context.Background())
	if err != nil {
		st.Close() // the prune's error is the one to report
		return nil, fmt.Errorf("trash %s: pruning: %w", st.Path(), err)
	}
	if n > 0 {
		s.Log.Info("trash: pruned the deletes older than its retention", "deletes", n, "retention_days", int(st.Retention().Hours()/24))
	}
	s.bin = st
	return st, nil
}

// Close ends the palace's re-ask (relearnPalace) and waits for it,
// closes the audit log, the trash and the provenance index, and lets
// another gateway open the log.
func (s *Server) Close() error {
	if s.endLife != nil {
		s.endLife()
		s.relearning.Wait()
	}
	s.binMu.Lock()
	bin := s.bin
	s.bin = nil
	s.binMu.Unlock()
	var err error
	if bin != nil {
		err = bin.Close()
	}
	if s.audit != nil {
		s.appendAll(s.refusals.sweep(s.Now())) // what no sweep wrote yet
		err = errors.Join(err, s.audit.Close())
	}
	if s.prov != nil {
		err = errors.Join(err, s.prov.Close())
	}
	if s.warm != nil {
		s.warm.Close()
	}
	s.EndStreams()
	s.instance.release() // last: the log is closed
	return err
}

// upstreamClient is a client to the upstream through next
// (http.DefaultTransport when nil) that follows no redirect: every
// request to the upstream carries its token, which net/http keeps on a
// redirect to another port of the same host. The upstream is the final
// URL, or the gateway is set up wrong (--upstream).
func upstreamClient(next http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: ladder.RefuseRedirects(cmp.Or(next, http.DefaultTransport))}
}

// streamDialer dials the upstream for a GET route, its connection ended
// with a reset, not a close: a /logstream/stream relay's end then fails
// the primary's next write at once (its next ping), which frees the
// stream's slot there; after a close that write went through and only
// the one after failed, 15 s later (upstreamSlotLinger). One connection
// per request (DisableKeepAlives: serve is told to close it after its
// answer), so no reset ever meets a request the primary is reading.
func streamDialer(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // fails only on a socket already closed: nothing left to end
	}
	return c, err
}

// upstreamErr is a client's error from the upstream as a message may show
// it: a refused redirect (ladder.RedirectError, refused in the transport:
// the client parses a Location before any CheckRedirect, and its error
// for one that does not parse quoted the raw header) in the gateway's
// words, and an answer net/http could not read without the line it
// quotes (a header with a control character in it: a hostile upstream's
// escapes, a token in a Location's query).
func upstreamErr(err error) error {
	if re, ok := errors.AsType[*ladder.RedirectError](err); ok {
		to := re.To
		if to == ladder.UnparsedLocation {
			to = "a Location that does not parse"
		}
		return fmt.Errorf("%w (HTTP %d, it pointed at %s)", errUpstreamRedirect, re.Status, to)
	}
	return ladder.Unreadable(err)
}

// errUpstreamRedirect is an upstream's redirect, refused (upstreamErr):
// the upstream did not take the call, so it is answered as not applied.
var errUpstreamRedirect = errors.New("the upstream answered a redirect, which the gateway does not follow (its token would go with it): the gateway's operator sets --upstream to the final URL")
