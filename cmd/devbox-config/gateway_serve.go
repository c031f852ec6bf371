package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/ladder"
)

// gatewayServeCmd is `gateway --listen … --upstream …`: its flags, and run.
type gatewayServeCmd struct {
	config                         *gatewayConfig
	stderr                         io.Writer
	listen, upstream               string
	allowWildcard, noUpstreamToken bool
	newState                       bool // --new-state: start though kept state is missing
}

// run refuses, before it listens, every setting that cannot work (each
// with its fix), then serves.
func (sc *gatewayServeCmd) run() error {
	host, err := sc.checkFlags()
	if err != nil {
		return err
	}
	if _, err := os.Stat(sc.config.file); errors.Is(err, fs.ErrNotExist) {
		return sc.config.missing()
	}
	lost, err := sc.checkKept()
	if err != nil {
		return err
	}
	log := newLogger(sc.stderr, 0).With("component", "gateway")
	oneProc()
	s := &gateway.Server{ConfigFile: sc.config.file, Upstream: sc.upstream, BindHost: host, Log: log, Stderr: sc.stderr}
	if err := s.Open(); err != nil {
		return failed(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			log.Error("closing the audit log and the trash", "err", err)
		}
	}()
	for _, l := range lost {
		log.Warn("--new-state: made anew, empty; what it held is lost", "file", l)
	}
	if len(lost) > 0 {
		if err := s.NoteNewState(lost); err != nil {
			return failed(err)
		}
	}
	if _, err := s.Trash(); err != nil { // a delete it cannot keep is refused: say so now
		return failed(fmt.Errorf("trash_file: %w", err))
	}
	l, err := sc.open(s, log)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return sc.serve(ctx, s, log)
}

// checkKept refuses to start a gateway that has served on state that is
// missing or emptied (gateway.Config.CheckKept), unless --new-state: then
// it is what this start makes anew (gateway.Config.LostKept).
func (sc *gatewayServeCmd) checkKept() (lost []string, err error) {
	c, err := gateway.LoadConfig(sc.config.file)
	if err != nil {
		return nil, failed(err)
	}
	if !sc.newState {
		if err := c.CheckKept(sc.config.file); err != nil {
			return nil, failed(err)
		}
		return nil, nil
	}
	if _, lost, err = c.LostKept(sc.config.file); err != nil {
		return nil, failed(err)
	}
	return lost, nil
}

// oneProc runs the gateway's Go code on one processor unless the operator
// set GOMAXPROCS. Its upstream is one Python process and a read costs the
// gateway a tenth of a millisecond of CPU, so a second processor buys no
// throughput a fleet reaches; it does cost every call the runtime's
// spinning and waking on a small shared box: 0.05-0.18 ms per read against
// real serve (BENCHMARKS.md, the decision log).
func oneProc() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}

// open gives the server its op-id ledger (every write an edge resends
// reaches the upstream once, RFC 001 §4.3) and its upstream token.
func (sc *gatewayServeCmd) open(s *gateway.Server, log *slog.Logger) (*ledger.Ledger, error) {
	c, err := gateway.LoadConfig(sc.config.file)
	if err != nil {
		return nil, failed(err)
	}
	l, err := ledger.OpenOptions(c.LedgerPath(), ledger.Options{Retention: c.LedgerRetention(), Log: log})
	if err != nil {
		return nil, failed(fmt.Errorf("op-id ledger: %w", err))
	}
	s.Ledger = gateway.OpLedger{L: l, Log: log}
	if err := checkUpstreamToken(c, sc.config.file, sc.noUpstreamToken); err != nil {
		l.Close()
		return nil, err
	}
	if !sc.noUpstreamToken {
		s.UpstreamToken = upstreamTokenSource(os.LookupEnv, c.UpstreamTokenFile, log)
	}
	return l, nil
}

// checkFlags refuses a --listen or --upstream that cannot work; it returns
// the listen host.
func (sc *gatewayServeCmd) checkFlags() (string, error) {
	if sc.listen == "" && sc.upstream == "" {
		return "", usageError("--listen and --upstream are required (new here: 'devbox-config gateway --help' says what the gateway does; 'devbox-config gateway init' writes its config first)")
	}
	if sc.listen == "" || sc.upstream == "" {
		return "", usageError("--listen and --upstream are required")
	}
	host, port, err := net.SplitHostPort(sc.listen)
	if err != nil || host == "" {
		return "", usageError("--listen %q: want HOST:PORT with an explicit host", sc.listen)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return "", usageError("--listen %q: port %q is not a port (1 to 65535): want HOST:PORT, e.g. --listen %s", sc.listen, port, net.JoinHostPort(host, "8766"))
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() && !sc.allowWildcard {
		return "", usageError("--listen %s binds every interface, so anyone who can reach this host can try device tokens: bind the docker0 address behind the tunnel (--listen 172.17.0.1:PORT) or loopback, or say --allow-wildcard if a firewall really keeps the rest out", sc.listen)
	}
	if problem, fix := checkUpstream(sc.upstream); problem != "" {
		return "", usageError("--upstream %q %s: %s", sc.upstream, problem, fix)
	}
	return host, nil
}

// checkUpstream is why an --upstream URL cannot work and its fix ("" when
// it can): the gateway POSTs to it and builds /healthz and the GET routes
// beside it.
func checkUpstream(raw string) (problem, fix string) {
	if !strings.Contains(raw, "://") {
		return "has no scheme", "--upstream http://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "is not a URL", "--upstream http://127.0.0.1:8765/mcp (mempalace serve's address)"
	case u.User != nil:
		return "carries credentials", "give the upstream's token in the gateway's environment (" + ladder.EnvUpstreamToken + ") or the config's upstream_token_file, never in argv"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("has scheme %q", u.Scheme), "--upstream http://" + u.Host + u.Path
	case u.Host == "":
		return "has no host", "--upstream http://127.0.0.1:8765/mcp (mempalace serve's address)"
	case ladder.MCPPath(raw) != "" && strings.Trim(u.Path, "/") == "":
		return "has no path (mempalace serve answers on /mcp)", "--upstream " + ladder.MCPPath(raw)
	case ladder.MCPPath(raw) != "":
		return fmt.Sprintf("has the path %q (mempalace serve answers on /mcp, lower case with no trailing slash)", u.EscapedPath()), "--upstream " + ladder.MCPPath(raw)
	}
	return "", ""
}

// checkUpstreamToken refuses to go on without the upstream's token
// (every call would be the upstream's 401) unless noToken
// (--no-upstream-token) says the upstream has none; the environment's must
// be one token, as a token file's (never shown: it is a secret); a token
// file (upstream_token_file in the config file) must exist, be private
// and hold one. `gateway` and `gateway trash restore` both check it.
func checkUpstreamToken(c *gateway.Config, file string, noToken bool) error {
	env := ladder.UpstreamToken(os.LookupEnv)
	switch {
	case noToken && (env != "" || c.UpstreamTokenFile != ""):
		return usageError("--no-upstream-token, yet the upstream's token is set (%s or upstream_token_file): drop --no-upstream-token, or unset the token if the upstream really has none", ladder.EnvUpstreamToken)
	case strings.ContainsFunc(env, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return failed(fmt.Errorf("%s holds more than a token (a second line, a space or another control character inside it), which no upstream accepts: set it to the token alone, on one line (mempalace serve's MEMPALACE_MCP_HTTP_TOKEN)", ladder.EnvUpstreamToken))
	case noToken, env != "":
		return nil
	case c.UpstreamTokenFile == "":
		return failed(fmt.Errorf("no upstream token: every call would get the upstream's 401. Set %s in this command's environment to the primary's token (mempalace serve's MEMPALACE_MCP_HTTP_TOKEN), or upstream_token_file in %s; or pass --no-upstream-token if the upstream runs without one (loopback only)", ladder.EnvUpstreamToken, file))
	}
	tok, err := gateway.ReadSecretFile(c.UpstreamTokenFile)
	if err == nil && tok == "" {
		err = fmt.Errorf("%s is empty", c.UpstreamTokenFile)
	}
	if err != nil {
		return failed(fmt.Errorf("upstream_token_file: %w (write the primary's token to it, chmod 600, or set %s instead)", err, ladder.EnvUpstreamToken))
	}
	return nil
}

// gatewayStopGrace bounds how long the requests in flight at SIGTERM or
// SIGINT may still take.
const gatewayStopGrace = 5 * time.Second

// serve answers until stopped ends (SIGTERM or SIGINT; the requests in
// flight then are answered), reloading the config on SIGHUP and when the
// file changes, having probed the upstream once (its log line says what a
// device would meet); it returns once its goroutines have ended.
func (sc *gatewayServeCmd) serve(stopped context.Context, s *gateway.Server, log *slog.Logger) error {
	ctx, stop := context.WithCancel(stopped)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	// Headers within 10 s; a kept-alive connection idle for 2 min is
	// closed (an edge's client drops its own after 90 s). No overall read
	// or write timeout: a body's has its own, by its length (the gateway's
	// bodyTime), and a stream or an event_wait runs for as long as it runs.
	srv := &http.Server{Addr: sc.listen, Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	srv.RegisterOnShutdown(s.EndStreams) // a stream never ends by itself: the grace is for the requests
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); s.ProbeUpstream(ctx) }() // logs, never blocks listening
	go func() {
		defer wg.Done()
		for range hup {
			if err := s.Reload(); err != nil {
				log.Error("reload failed; the previous config stays", "err", err)
			}
		}
	}()
	go func() { defer wg.Done(); s.Watch(ctx) }()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		// Stop in order: no new connections, the streams end, the
		// requests in flight finish (at most gatewayStopGrace), then
		// every connection is closed.
		sctx, cancel := context.WithTimeout(context.Background(), gatewayStopGrace)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			log.Warn("stopping: requests still open after the grace are cut", "grace", gatewayStopGrace)
			srv.Close()
		}
	}()
	log.Info("listening", "addr", sc.listen, "upstream", sc.upstream)
	err := srv.ListenAndServe()
	stop() // ends Watch and the closer
	signal.Stop(hup)
	close(hup)
	wg.Wait()
	if err != nil && err != http.ErrServerClosed {
		return failed(err)
	}
	return nil
}

// upstreamTokenSource is the gateway's upstream token: the environment's
// MEMPALACE_UPSTREAM_TOKEN (looked up per call, so a rotated secret in a
// restarted sidecar's env applies), else the config's upstream_token_file
// (re-read per call). lookup is os.LookupEnv outside tests.
func upstreamTokenSource(lookup func(string) (string, bool), tokenFile string, log *slog.Logger) func() string {
	return func() string {
		if t := ladder.UpstreamToken(lookup); t != "" {
			return t
		}
		if tokenFile == "" {
			return ""
		}
		b, err := gateway.ReadSecretFile(tokenFile)
		if err != nil {
			log.Error("upstream token unreadable", "err", err)
			return ""
		}
		return b
	}
}
