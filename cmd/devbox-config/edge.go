package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
)

// edgeConfig reads the edge's settings through the ladder (the one reader
// of MEMPALACE_*) and logs its warnings once.
func edgeConfig(stderr io.Writer) (edge.Config, *slog.Logger, error) {
	s, warns, err := ladder.ResolveEdge(os.LookupEnv, exec.LookPath)
	log := newLogger(stderr, s.LogLevel).With("component", "edge")
	if err != nil {
		return edge.Config{}, log, usageError("%v", err)
	}
	for _, w := range warns {
		log.Warn(w.Message, "var", w.Var)
	}
	return edge.ConfigFrom(s, ladder.TokenSource(os.LookupEnv), ladder.ChildEnviron(os.Environ()), version, log), log, nil
}

func newEdgeCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "edge",
		Short: "Run the local-first MemPalace MCP proxy on stdio (the harness's MCP command in edge mode)",
		Long: `edge is what the harness runs as its mempalace MCP server when MEMPALACE_EDGE=1.
It answers on stdio (stdout carries only MCP; logs go to stderr, level from
MEMPALACE_EDGE_LOG). The local palace (a child mempalace-mcp, or
MEMPALACE_EDGE_CHILD) is always written first; writes to replicated wings go
through a durable outbox in <palace>/edge/ to the primary at
MEMPALACE_REMOTE_URL (bearer MEMPALACE_REMOTE_TOKEN, read from the environment
only); reads merge both. With the primary down it answers from the local palace
and marks results degraded; tools never vanish. Without MEMPALACE_REMOTE_URL it
is a transparent pass-through to the child that creates no file and opens no
socket.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := edgeConfig(stderr)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			in, out := io.NopCloser(stdin), nopWriteCloser{stdout}
			if f, ok := stdin.(*os.File); ok {
				in = f
			}
			return edge.New(cfg).Serve(ctx, in, out)
		},
	}
	cmd.AddCommand(newEdgeStatusCmd(stdout), newEdgeOutboxCmd(stdout), newEdgeFlushCmd(stdout, stderr))
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func openOutbox(logTo io.Writer) (*outbox.Store, edge.Config, error) {
	cfg, _, err := edgeConfig(logTo)
	if err != nil {
		return nil, cfg, err
	}
	path := filepath.Join(cfg.StateDir(), outbox.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, cfg, exitError{1, noOutboxError{path}}
	} else if err != nil {
		return nil, cfg, exitError{1, fmt.Errorf("outbox %s: %w", path, err)}
	}
	s, err := outbox.Open(path, cfg.OriginDevice, cfg.OriginLabel)
	if err != nil {
		return nil, cfg, exitError{1, err}
	}
	return s, cfg, nil
}

// noOutboxError: the palace has no outbox file, because edge mode never
// ran on it. status and list answer that (exit 0) instead of failing, and
// nothing is created to answer it (R1).
type noOutboxError struct{ path string }

func (e noOutboxError) Error() string {
	return fmt.Sprintf("no outbox at %s (edge mode never ran on this palace?)", e.path)
}

// noOutbox reports whether err is openOutbox's "there is no outbox" and
// the path it looked at.
func noOutbox(err error) (string, bool) {
	var e noOutboxError
	if errors.As(err, &e) {
		return e.path, true
	}
	return "", false
}

func newEdgeStatusCmd(stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the outbox (queue depth by state, oldest queued, last flush and error), primary reachability and embedder state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, cfg, err := openOutbox(io.Discard)
			if path, ok := noOutbox(err); ok {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return statusWithoutOutbox(stdout, path, probePrimary(ctx, cfg), asJSON)
			}
			if err != nil {
				return err
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := s.Stats(ctx)
			if err != nil {
				return exitError{1, fmt.Errorf("outbox %s: %w", s.Path(), err)}
			}
			mismatch, _ := s.Meta(ctx, "embedder_mismatch")
			primary := probePrimary(ctx, cfg)
			protection := s.Protection(ctx)
			if protection == "" {
				protection = "not known yet (no answer from the primary recorded)"
			}
			if asJSON {
				b, _ := json.MarshalIndent(map[string]any{"outbox": s.Path(), "outbox_exists": true, "queue": st, "primary": primary, "embedder_mismatch": mismatch, "protection": protection}, "", "  ")
				fmt.Fprintln(stdout, string(b))
				return nil
			}
			fmt.Fprintf(stdout, "outbox     %s\n", s.Path())
			fmt.Fprintf(stdout, "queue      queued %d, inflight %d, dead %d, done %d\n", st.ByState[outbox.Queued], st.ByState[outbox.Inflight], st.ByState[outbox.Dead], st.ByState[outbox.Done])
			if st.OldestQueued != nil {
				fmt.Fprintf(stdout, "oldest     queued %s ago\n", time.Since(*st.OldestQueued).Round(time.Second))
			}
			if st.LastFlush != nil {
				fmt.Fprintf(stdout, "last flush %s\n", st.LastFlush.Local().Format(time.RFC3339))
			}
			if st.LastError != "" {
				fmt.Fprintf(stdout, "last error %s\n", st.LastError)
			}
			if st.FlushOwner != "" {
				fmt.Fprintf(stdout, "flushing   %s\n", st.FlushOwner)
			}
			fmt.Fprintf(stdout, "primary    %s\n", primary)
			fmt.Fprintf(stdout, "protected  %s\n", protection)
			if mismatch != "" {
				fmt.Fprintf(stdout, "embedder   MISMATCH (merged search off): %s\n", mismatch)
			} else {
				fmt.Fprintf(stdout, "embedder   no mismatch seen\n")
			}
			for _, o := range st.Dead {
				fmt.Fprintf(stdout, "DEAD       %s %s: %s (devbox-config edge outbox retry|drop %s)\n", o.ID[:12], o.Tool, o.Error, o.ID[:12])
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// statusWithoutOutbox is `edge status` on a palace where edge mode never
// ran: nothing is queued, and the primary is still probed. It opens and
// creates nothing.
func statusWithoutOutbox(stdout io.Writer, path, primary string, asJSON bool) error {
	const note = "no outbox yet: edge mode never ran on this palace"
	if asJSON {
		b, err := json.MarshalIndent(map[string]any{
			"outbox":        path,
			"outbox_exists": false,
			"note":          note,
			"queue":         outbox.Stats{ByState: map[string]int{outbox.Queued: 0, outbox.Inflight: 0, outbox.Dead: 0, outbox.Done: 0}},
			"primary":       primary,
		}, "", "  ")
		if err != nil {
			return exitError{1, fmt.Errorf("edge status: %w", err)}
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "outbox     none yet at %s (edge mode never ran on this palace)\n", path)
	fmt.Fprintf(stdout, "queue      empty\n")
	fmt.Fprintf(stdout, "primary    %s\n", primary)
	return nil
}

// probePrimary asks the primary's /healthz (token-free, as upstream).
func probePrimary(ctx context.Context, cfg edge.Config) string {
	if cfg.PrimaryURL == "" {
		return "not configured (MEMPALACE_REMOTE_URL unset)"
	}
	u := cfg.PrimaryURL
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "/"); j >= 0 {
			u = u[:i+3+j]
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "unreachable: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		return "reachable (/healthz ok)"
	}
	return fmt.Sprintf("answers /healthz with HTTP %d", resp.StatusCode)
}

func newEdgeOutboxCmd(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{Use: "outbox", Short: "Inspect and repair the outbox: list, retry ID, drop ID"}
	var all, asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "List queued, inflight and dead ops (--all: done ones too)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := openOutbox(io.Discard)
			if path, ok := noOutbox(err); ok {
				if asJSON {
					fmt.Fprintln(stdout, "[]")
				} else {
					fmt.Fprintf(stdout, "the outbox is empty: edge mode never ran on this palace (no %s yet)\n", path)
				}
				return nil
			}
			if err != nil {
				return err
			}
			defer s.Close()
			states := []string{}
			if all {
				states = []string{outbox.Queued, outbox.Inflight, outbox.Dead, outbox.Done}
			}
			ops, err := s.List(context.Background(), 10000, states...)
			if err != nil {
				return exitError{1, err}
			}
			if asJSON {
				if ops == nil {
					ops = []outbox.Op{} // an empty outbox is [], not null
				}
				b, _ := json.MarshalIndent(ops, "", "  ")
				fmt.Fprintln(stdout, string(b))
				return nil
			}
			w := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "SEQ\tOP\tSTATE\tTRIES\tTOOL\tWING\tCREATED\tERROR")
			for _, o := range ops {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.LocalSeq, o.ID[:12], o.State, o.Attempts, o.Tool, o.Wing, o.CreatedAt.Local().Format(time.DateTime), errorText(o.Error))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include ops already sent")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	act := func(use, short string, f func(*outbox.Store, string) (outbox.Op, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, _, err := openOutbox(io.Discard)
				if err != nil {
					return err
				}
				defer s.Close()
				o, err := f(s, args[0])
				if err != nil {
					return exitError{1, err}
				}
				fmt.Fprintf(stdout, "%s %s: %s\n", o.ID[:12], o.Tool, o.State)
				return nil
			},
		}
	}
	c.AddCommand(list,
		act("retry", "Requeue an op (e.g. a dead one after fixing the cause) with its attempts reset", func(s *outbox.Store, id string) (outbox.Op, error) { return s.Retry(context.Background(), id) }),
		act("drop", "Give up on an op: it is never sent, and the ops behind it move on", func(s *outbox.Store, id string) (outbox.Op, error) { return s.Drop(context.Background(), id) }))
	return c
}

func errorText(raw json.RawMessage) string {
	var e struct {
		Kind, Message string
	}
	if json.Unmarshal(raw, &e) != nil || e.Kind == "" {
		return ""
	}
	if len(e.Message) > 80 {
		e.Message = e.Message[:80] + "…"
	}
	return e.Kind + ": " + e.Message
}

func newEdgeFlushCmd(stdout, stderr io.Writer) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "flush",
		Short: "Send every queued write to the primary now and exit (e.g. before a laptop goes offline)",
		Long: `flush sends every queued write now, in order, whatever backoff an earlier
failure left it waiting out; a dead op (one the primary kept refusing) holds
the ops behind it until you retry or drop it. It prints what it sent, the
primary's state as it found it (unreachable, refused the token, or up), and
each op it could not send with the reason. Exit status 0 when nothing is
left, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, cfg, err := openOutbox(stderr)
			if err != nil {
				return err
			}
			defer s.Close()
			if cfg.PrimaryURL == "" {
				return usageError("MEMPALACE_REMOTE_URL is not set: there is no primary to flush to")
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := s.ClearBackoff(ctx); err != nil {
				return exitError{1, fmt.Errorf("outbox %s: %w", s.Path(), err)}
			}
			p := edge.NewPrimary(cfg.PrimaryURL, cfg.Token, cfg.Log, edge.PrimaryOptions{Timeout: cfg.CallTimeout, Version: version,
				OnLedger: func(on bool) { outbox.RecordProtection(s, on) }})
			defer p.Close()
			sent, err := (&outbox.Flusher{S: s, P: edge.FlushTarget(p), Log: cfg.Log}).Drain(ctx)
			st, _ := s.Stats(ctx)
			fmt.Fprintf(stdout, "sent %d; left: queued %d, inflight %d, dead %d\n", sent, st.ByState[outbox.Queued], st.ByState[outbox.Inflight], st.ByState[outbox.Dead])
			left := st.ByState[outbox.Queued] + st.ByState[outbox.Inflight] + st.ByState[outbox.Dead]
			if left == 0 && err == nil {
				return nil
			}
			fmt.Fprintf(stdout, "primary: %s\n", flushPrimaryState(ctx, cfg, p))
			ops, _ := s.List(ctx, 20)
			for _, o := range ops {
				why := errorText(o.Error)
				if why == "" {
					why = "not tried: an op before it was not sent"
				}
				fmt.Fprintf(stdout, "not sent: %s %s (%s): %s\n", o.ID[:12], o.Tool, o.State, why)
			}
			if err != nil {
				return exitError{1, err}
			}
			return exitError{1, fmt.Errorf("%d ops not sent", left)}
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	return c
}

// flushPrimaryState says what flush found the primary to be: the breaker's
// word when a call was made, else what /healthz answers (a primary never
// asked is not "up").
func flushPrimaryState(ctx context.Context, cfg edge.Config, p *edge.Primary) string {
	switch st := p.State(); {
	case st == "unauthorized":
		return "refused the token (check MEMPALACE_REMOTE_TOKEN)"
	case strings.HasPrefix(st, "down"):
		return "unreachable (" + strings.TrimPrefix(st, "down: ") + ")"
	}
	return probePrimary(ctx, cfg)
}
