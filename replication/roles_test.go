package replication

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// The test binary plays three parts: the test, a flusher (an edge's
// outbox flusher, alone in its process), and the gateway.
const roleEnv = "REPLICATION_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "flusher":
		os.Exit(flusherMain())
	case "gateway":
		os.Exit(gatewayMain())
	}
	os.Exit(m.Run())
}

// The waits every part runs with: short, so that a schedule of faults
// settles in seconds.
const (
	callTimeout = 800 * time.Millisecond
	lease       = 300 * time.Millisecond
	staleAfter  = 1500 * time.Millisecond
	staleGrace  = 200 * time.Millisecond
)

func env(k string) string { return os.Getenv("REPLICATION_" + k) }

// flusherMain runs one outbox's flusher until SIGTERM (or SIGKILL).
func flusherMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := outbox.OpenOptions(env("OUTBOX"), outbox.Options{Device: "dev1", Label: "lab", Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	p := edge.NewPrimary(env("PRIMARY"), func() string { return env("TOKEN") }, log, edge.PrimaryOptions{Timeout: callTimeout, Probe: 20 * time.Millisecond, ProbeMax: 200 * time.Millisecond,
		OnUp: func() {
			if err := s.Resume(context.Background()); err != nil {
				log.Warn("resume", "err", err)
			}
		}})
	f := &outbox.Flusher{S: s, P: edge.FlushTarget(p), Log: log, Lease: lease, SendTimeout: 3 * callTimeout, BaseDelay: 20 * time.Millisecond, MaxDelay: 400 * time.Millisecond, Poll: 20 * time.Millisecond}
	fmt.Fprintln(os.Stderr, "flushing")
	f.Run(ctx)
	p.Close()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return 0
}

// gatewayMain serves the gateway with its op-id ledger until killed.
func gatewayMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l, err := ledger.OpenOptions(env("LEDGER"), ledger.Options{Retention: time.Hour, StaleAfter: staleAfter, StaleGrace: staleGrace, Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := &gateway.Server{ConfigFile: env("CONFIG"), Upstream: env("UPSTREAM"), UpstreamToken: func() string { return upstreamToken }, BindHost: "127.0.0.1", Log: log,
		Ledger: gateway.OpLedger{L: l, Log: log}}
	if err := s.Open(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var ln net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// The port of the gateway that was killed may linger a moment.
		if ln, err = net.Listen("tcp", env("LISTEN")); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "listening")
	return exitOf(http.Serve(ln, s))
}

func exitOf(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// start runs this test binary in role with vars (a process of its own,
// no build), and waits for ready on its output.
func start(t *testing.T, role, ready string, vars map[string]string) *testbed.Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), roleEnv+"="+role)
	for k, v := range vars {
		env = append(env, "REPLICATION_"+k+"="+v)
	}
	return testbed.Start(t, env, ready, exe, "-test.run=^$")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
