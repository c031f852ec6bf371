package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
)

func openOutbox(logTo io.Writer) (*outbox.Store, edge.Config, error) {
	cfg, _, err := edgeConfig(logTo)
	if err != nil {
		return nil, cfg, err
	}
	path := filepath.Join(cfg.StateDir(), outbox.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, cfg, failed(noOutboxError{path})
	} else if err != nil {
		return nil, cfg, failed(fmt.Errorf("outbox %s: %w", path, err))
	}
	s, err := outbox.Open(path, cfg.OriginDevice, cfg.OriginLabel)
	if err != nil {
		return nil, cfg, failed(err)
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

func newEdgeOutboxCmd(stdout io.Writer) *cobra.Command {
	retry := func(s *outbox.Store, id string) (outbox.Op, error) { return s.Retry(context.Background(), id) }
	drop := func(s *outbox.Store, id string) (outbox.Op, error) { return s.Drop(context.Background(), id) }
	return group("outbox", "Inspect and repair the outbox: list, retry ID, drop ID",
		newOutboxListCmd(stdout),
		newOutboxActCmd(stdout, "retry", "Requeue an op (e.g. a dead one after fixing the cause) with its attempts reset", retry),
		newOutboxActCmd(stdout, "drop", "Give up on an op: it is never sent, and the ops behind it move on", drop))
}

// outboxListCmd is `edge outbox list`: its flags, and run.
type outboxListCmd struct {
	stdout      io.Writer
	all, asJSON bool
}

func newOutboxListCmd(stdout io.Writer) *cobra.Command {
	lc := &outboxListCmd{stdout: stdout}
	c := &cobra.Command{
		Use: "list", Short: "List queued, inflight and dead ops (--all: done ones too)", Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return lc.run() },
	}
	c.Flags().BoolVar(&lc.all, "all", false, "include ops already sent")
	c.Flags().BoolVar(&lc.asJSON, "json", false, "print JSON")
	return c
}

func (lc *outboxListCmd) run() error {
	s, _, err := openOutbox(io.Discard)
	if path, ok := noOutbox(err); ok {
		if lc.asJSON {
			fmt.Fprintln(lc.stdout, "[]")
		} else {
			fmt.Fprintf(lc.stdout, "the outbox is empty: edge mode never ran on this palace (no %s yet)\n", path)
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer s.Close()
	states := []outbox.State{}
	if lc.all {
		states = []outbox.State{outbox.Queued, outbox.Inflight, outbox.Dead, outbox.Done}
	}
	ops, err := s.List(context.Background(), 10000, states...)
	if err != nil {
		return failed(err)
	}
	if lc.asJSON {
		if ops == nil {
			ops = []outbox.Op{} // an empty outbox is [], not null
		}
		b, err := json.MarshalIndent(ops, "", "  ")
		if err != nil {
			return failed(fmt.Errorf("edge outbox list: %w", err))
		}
		fmt.Fprintln(lc.stdout, string(b))
		return nil
	}
	w := tabwriter.NewWriter(lc.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tOP\tSTATE\tTRIES\tTOOL\tWING\tCREATED\tERROR")
	for _, o := range ops {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.LocalSeq, o.ID[:12], o.State, o.Attempts, o.Tool, o.Wing, o.CreatedAt.Local().Format(time.DateTime), errorText(o.Error))
	}
	return w.Flush()
}

// newOutboxActCmd is `edge outbox retry|drop ID`: act on one op.
func newOutboxActCmd(stdout io.Writer, use, short string, act func(*outbox.Store, string) (outbox.Op, error)) *cobra.Command {
	return &cobra.Command{
		Use: use + " ID", Short: short, Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			s, _, err := openOutbox(io.Discard)
			if err != nil {
				return err
			}
			defer s.Close()
			o, err := act(s, args[0])
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(stdout, "%s %s: %s\n", o.ID[:12], o.Tool, o.State)
			return nil
		},
	}
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
