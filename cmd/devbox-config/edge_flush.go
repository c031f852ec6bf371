package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
)

const edgeFlushHelp = `flush sends every queued write now, in order, whatever backoff an earlier
failure left it waiting out; a dead op (one the primary kept refusing) holds
the ops behind it until you retry or drop it. It prints what it sent, the
primary's state as it found it (unreachable, refused the token, or up), and
each op it could not send with the reason. Exit status 0 when nothing is
left, 1 otherwise.`

// edgeFlushCmd is `edge flush`: its flags, and run.
type edgeFlushCmd struct {
	stdout, stderr io.Writer
	timeout        time.Duration
}

func newEdgeFlushCmd(stdout, stderr io.Writer) *cobra.Command {
	fc := &edgeFlushCmd{stdout: stdout, stderr: stderr}
	c := &cobra.Command{
		Use:   "flush",
		Short: "Send every queued write to the primary now and exit (e.g. before a laptop goes offline)",
		Long:  edgeFlushHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return fc.run() },
	}
	c.Flags().DurationVar(&fc.timeout, "timeout", time.Minute, "give up after this long")
	return c
}

func (fc *edgeFlushCmd) run() error {
	s, cfg, err := openOutbox(fc.stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	if cfg.PrimaryURL == "" {
		return usageError("MEMPALACE_REMOTE_URL is not set: there is no primary to flush to")
	}
	ctx, cancel := context.WithTimeout(context.Background(), fc.timeout)
	defer cancel()
	if err := s.ClearBackoff(ctx); err != nil {
		return failed(fmt.Errorf("outbox %s: %w", s.Path(), err))
	}
	p := edge.NewPrimary(cfg.PrimaryURL, cfg.Token, cfg.Log, edge.PrimaryOptions{Timeout: cfg.CallTimeout, Version: version,
		OnLedger: func(on bool) { outbox.RecordProtection(s, on) }})
	defer p.Close()
	sent, drainErr := (&outbox.Flusher{S: s, P: edge.FlushTarget(p), Log: cfg.Log}).Drain(ctx)
	st, err := s.Stats(ctx)
	if err != nil {
		return failed(fmt.Errorf("sent %d, then could not read the outbox %s: %w", sent, s.Path(), err))
	}
	fmt.Fprintf(fc.stdout, "sent %d; left: queued %d, inflight %d, dead %d\n", sent, st.ByState[outbox.Queued], st.ByState[outbox.Inflight], st.ByState[outbox.Dead])
	left := st.ByState[outbox.Queued] + st.ByState[outbox.Inflight] + st.ByState[outbox.Dead]
	if left == 0 && drainErr == nil {
		return nil
	}
	fmt.Fprintf(fc.stdout, "primary: %s\n", flushPrimaryState(ctx, cfg, p))
	// The ops left, with why; a list that cannot be read leaves the count
	// above and the error below to say it.
	ops, _ := s.List(ctx, 20)
	for _, o := range ops {
		why := errorText(o.Error)
		if why == "" {
			why = "not tried: an op before it was not sent"
		}
		fmt.Fprintf(fc.stdout, "not sent: %s %s (%s): %s\n", o.ID[:12], o.Tool, o.State, why)
	}
	if drainErr != nil {
		return failed(drainErr)
	}
	return failed(fmt.Errorf("%d ops not sent", left))
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
