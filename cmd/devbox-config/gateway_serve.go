package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/ladder"
)

// gatewayServeCmd is `gateway --listen … --upstream …`: its flags, and run.
type gatewayServeCmd struct {
	config           *gatewayConfig
	stderr           io.Writer
	listen, upstream string
}

func (sc *gatewayServeCmd) run() error {
	if sc.listen == "" || sc.upstream == "" {
		return usageError("--listen and --upstream are required")
	}
	host, _, err := net.SplitHostPort(sc.listen)
	if err != nil || host == "" {
		return usageError("--listen %q: want HOST:PORT with an explicit host", sc.listen)
	}
	log := newLogger(sc.stderr, 0).With("component", "gateway")
	s := &gateway.Server{ConfigFile: sc.config.file, Upstream: sc.upstream, BindHost: host, Log: log}
	if err := s.Open(); err != nil {
		return failed(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			log.Error("closing the audit log", "err", err)
		}
	}()
	l, err := sc.open(s, log)
	if err != nil {
		return err
	}
	defer l.Close()
	return sc.serve(s, log)
}

// open gives the server its op-id ledger (every write an edge resends
// reaches the upstream once, RFC 001 §4.3) and its upstream token.
func (sc *gatewayServeCmd) open(s *gateway.Server, log *slog.Logger) (*ledger.Ledger, error) {
	c, err := gateway.LoadConfig(sc.config.file)
	if err != nil {
		return nil, failed(err)
	}
	l, err := ledger.Open(c.LedgerPath(), c.LedgerRetention())
	if err != nil {
		return nil, failed(fmt.Errorf("op-id ledger: %w", err))
	}
	s.Ledger = gateway.OpLedger{L: l, Log: log}
	if c.UpstreamTokenFile != "" {
		if _, err := gateway.ReadSecretFile(c.UpstreamTokenFile); err != nil {
			l.Close()
			return nil, failed(fmt.Errorf("upstream_token_file: %w", err))
		}
	}
	s.UpstreamToken = upstreamTokenSource(os.LookupEnv, c.UpstreamTokenFile, log)
	return l, nil
}

// serve answers until SIGTERM or SIGINT, reloading the config on SIGHUP and
// when the file changes; it returns once its goroutines have ended.
func (sc *gatewayServeCmd) serve(s *gateway.Server, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	srv := &http.Server{Addr: sc.listen, Handler: s, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for range hup {
			if err := s.Reload(); err != nil {
				log.Error("reload failed; the previous config stays", "err", err)
			}
		}
	}()
	go func() { defer wg.Done(); s.Watch(ctx) }()
	go func() { defer wg.Done(); <-ctx.Done(); srv.Close() }()
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
