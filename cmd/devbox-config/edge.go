package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/ladder"
)

// edgeConfig reads the edge's settings through the ladder (the one reader
// of MEMPALACE_*) and logs its warnings once.
func edgeConfig(stderr io.Writer) (edge.Config, *slog.Logger, error) {
	// A HOME that is not an existing absolute directory is refused by
	// every edge command, before a palace or the local server makes a
	// new home (attack116 F5: edge status, flush and outbox list read
	// one below the working directory).
	if home := os.Getenv("HOME"); home != "" {
		if err := existingHome(home, homeEnvOnly); err != nil {
			return edge.Config{}, newLogger(stderr, slog.LevelWarn), err
		}
	}
	// MEMPALACE_ENV_FROM_PARENT=1: a harness that starts servers with a
	// fixed handful of variables (Auggie) still hands the edge, and the
	// child mempalace-mcp, its own.
	environ := ladder.ParentEnviron(os.Environ(), os.Getppid(), nil)
	env := ladder.WithParentEnv(os.LookupEnv, os.Getppid(), nil)
	s, warns, err := ladder.ResolveEdge(env, exec.LookPath)
	log := newLogger(stderr, s.LogLevel).With("component", "edge")
	if err != nil {
		return edge.Config{}, log, usageError("%v", err)
	}
	for _, w := range warns {
		log.Warn(w.String()) // "VAR: what (fix: how)", as render says it
	}
	cfg := edge.ConfigFrom(s, ladder.TokenSource(env), ladder.ChildEnviron(environ, s.Palace), version, log)
	cfg.OptedIn = edge.OptedIn(s, environ)
	return cfg, log, nil
}

const edgeHelp = `edge is what the harness runs as its mempalace MCP server when MEMPALACE_EDGE=1.
It answers on stdio (stdout carries only MCP; logs go to stderr, level from
MEMPALACE_EDGE_LOG). The local palace (a child mempalace-mcp, or
MEMPALACE_EDGE_CHILD) is always written first; writes to replicated wings go
through a durable outbox in <palace>/edge/ to the primary at
MEMPALACE_REMOTE_URL (bearer MEMPALACE_REMOTE_TOKEN, read from the environment
only); reads merge both. With the primary down it answers from the local palace
and marks results degraded; tools never vanish. Without MEMPALACE_REMOTE_URL it
is a transparent pass-through to the child that creates no file and opens no
socket; started from render's edge entry (MEMPALACE_EDGE_HARNESS set), or on a
palace with an edge/ outbox, it warns that the session's writes will not be
replicated.

Also read: MEMPALACE_PALACE_PATH (the local palace; set it in edge mode),
MEMPALACE_EDGE_TIMEOUT (every call to the primary, default 10s),
MEMPALACE_EDGE_LEASE (how long one process holds the outbox's flush before
another may take over, default 10s), MEMPALACE_AGENT_NAME,
MEMPALACE_ORIGIN_LABEL, MEMPALACE_ORIGIN_DEVICE (who writes: stamped on writes
to the primary), MEMPALACE_ENV_FROM_PARENT (1: read the MEMPALACE_* variables
its own environment lacks from the harness that started it).`

func newEdgeCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "edge",
		Short: "Run the local-first MemPalace MCP proxy on stdio (the harness's MCP command in edge mode)",
		Long:  edgeHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return serveEdge(stdin, stdout, stderr) },
	}
	cmd.AddCommand(newEdgeStatusCmd(stdout, stderr), newEdgeOutboxCmd(stdout, stderr), newEdgeFlushCmd(stdout, stderr))
	return cmd
}

// serveEdge is `edge`: the proxy on stdin and stdout until the harness
// closes its input or a signal stops it.
func serveEdge(stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, _, err := edgeConfig(stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A harness that is gone (stopped with its process group) leaves the
	// edge's stdout, and often its stderr, a pipe nobody reads. Go ends a
	// process writing there with SIGPIPE unless it is notified of it: the
	// edge would die mid-stop, before it stops its local palace server.
	// Notified, the write fails (EPIPE) and the stop goes on.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	in, out := io.NopCloser(stdin), nopWriteCloser{stdout}
	if f, ok := stdin.(*os.File); ok {
		in = f
	}
	return edge.New(cfg).Serve(ctx, in, out)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
