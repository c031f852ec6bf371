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

	"github.com/joakimp/devbox-config/bridge"
	"github.com/joakimp/devbox-config/ladder"
)

const bridgeHelp = `bridge is what a harness that cannot reference the token from the
environment in a header (Cline, Auggie, Zed, Goose) runs as its mempalace MCP
server in remote mode. It answers on stdio (stdout carries only MCP; logs go to
stderr) and forwards every tool to the primary at MEMPALACE_REMOTE_URL with the
bearer MEMPALACE_REMOTE_TOKEN, both read from the environment only. With
MEMPALACE_ENV_FROM_PARENT=1 it reads the MEMPALACE_* variables its own
environment lacks from the harness that started it.`

func newBridgeCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "bridge",
		Short: "Forward a harness's stdio MCP session to the primary, the token read from the environment",
		Long:  bridgeHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return serveBridge(stdin, stdout, stderr) },
	}
}

// serveBridge is `bridge`: the forwarder on stdin and stdout until the
// harness closes its input or a signal stops it.
func serveBridge(stdin io.Reader, stdout, stderr io.Writer) error {
	env := ladder.WithParentEnv(os.LookupEnv, os.Getppid(), nil)
	// The ladder's check, as render's: a URL render refuses is not used.
	s, _ := ladder.Resolve(env, func(string) (string, error) { return "", exec.ErrNotFound })
	if s.URLProblem != "" {
		return usageError("bridge: %s", s.NoURL())
	}
	log := newLogger(stderr, slog.LevelInfo).With("component", "bridge")
	b, err := bridge.New(bridge.Config{URL: s.URL, Token: ladder.TokenSource(env), Version: version, Log: log})
	if err != nil {
		return usageError("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	in := io.NopCloser(stdin)
	if f, ok := stdin.(*os.File); ok {
		in = f
	}
	return b.Serve(ctx, in, nopWriteCloser{stdout})
}
