package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
)

// edgeStatusCmd is `edge status`: its flags, and run.
type edgeStatusCmd struct {
	stdout io.Writer
	asJSON bool
}

func newEdgeStatusCmd(stdout io.Writer) *cobra.Command {
	sc := &edgeStatusCmd{stdout: stdout}
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the outbox (queue depth by state, oldest queued, last flush and error), primary reachability and embedder state",
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return sc.run() },
	}
	c.Flags().BoolVar(&sc.asJSON, "json", false, "print JSON")
	return c
}

func (sc *edgeStatusCmd) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, cfg, err := openOutbox(io.Discard)
	if path, ok := noOutbox(err); ok {
		return sc.withoutOutbox(path, probePrimary(ctx, cfg))
	}
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil {
		return failed(fmt.Errorf("outbox %s: %w", s.Path(), err))
	}
	v := edgeStatus{outbox: s.Path(), stats: st, primary: probePrimary(ctx, cfg), protection: s.Protection(ctx)}
	// An unreadable mark reads as none: status reports, it does not fail
	// on what it cannot tell.
	v.mismatch, _ = s.Meta(ctx, "embedder_mismatch")
	if v.protection == "" {
		v.protection = "not known yet (no answer from the primary recorded)"
	}
	if sc.asJSON {
		b, err := json.MarshalIndent(map[string]any{"outbox": v.outbox, "outbox_exists": true, "queue": st, "primary": v.primary, "embedder_mismatch": v.mismatch, "protection": v.protection}, "", "  ")
		if err != nil {
			return failed(fmt.Errorf("edge status: %w", err))
		}
		fmt.Fprintln(sc.stdout, string(b))
		return nil
	}
	v.print(sc.stdout)
	return nil
}

// edgeStatus is what `edge status` found.
type edgeStatus struct {
	outbox, primary, protection, mismatch string
	stats                                 outbox.Stats
}

func (v edgeStatus) print(w io.Writer) {
	st := v.stats
	fmt.Fprintf(w, "outbox     %s\n", v.outbox)
	fmt.Fprintf(w, "queue      queued %d, inflight %d, dead %d, done %d\n", st.ByState[outbox.Queued], st.ByState[outbox.Inflight], st.ByState[outbox.Dead], st.ByState[outbox.Done])
	if st.OldestQueued != nil {
		fmt.Fprintf(w, "oldest     queued %s ago\n", time.Since(*st.OldestQueued).Round(time.Second))
	}
	if st.LastFlush != nil {
		fmt.Fprintf(w, "last flush %s\n", st.LastFlush.Local().Format(time.RFC3339))
	}
	if st.LastError != "" {
		fmt.Fprintf(w, "last error %s\n", st.LastError)
	}
	if st.FlushOwner != "" {
		fmt.Fprintf(w, "flushing   %s\n", st.FlushOwner)
	}
	fmt.Fprintf(w, "primary    %s\n", v.primary)
	fmt.Fprintf(w, "protected  %s\n", v.protection)
	if v.mismatch != "" {
		fmt.Fprintf(w, "embedder   MISMATCH (merged search off): %s\n", v.mismatch)
	} else {
		fmt.Fprintf(w, "embedder   no mismatch seen\n")
	}
	for _, o := range st.Dead {
		fmt.Fprintf(w, "DEAD       %s %s: %s (devbox-config edge outbox retry|drop %s)\n", o.ID[:12], o.Tool, o.Error, o.ID[:12])
	}
}

// withoutOutbox is `edge status` on a palace where edge mode never ran:
// nothing is queued, and the primary is still probed. It opens and
// creates nothing.
func (sc *edgeStatusCmd) withoutOutbox(path, primary string) error {
	const note = "no outbox yet: edge mode never ran on this palace"
	if sc.asJSON {
		b, err := json.MarshalIndent(map[string]any{
			"outbox":        path,
			"outbox_exists": false,
			"note":          note,
			"queue":         outbox.Stats{ByState: map[outbox.State]int{outbox.Queued: 0, outbox.Inflight: 0, outbox.Dead: 0, outbox.Done: 0}},
			"primary":       primary,
		}, "", "  ")
		if err != nil {
			return failed(fmt.Errorf("edge status: %w", err))
		}
		fmt.Fprintln(sc.stdout, string(b))
		return nil
	}
	fmt.Fprintf(sc.stdout, "outbox     none yet at %s (edge mode never ran on this palace)\n", path)
	fmt.Fprintf(sc.stdout, "queue      empty\n")
	fmt.Fprintf(sc.stdout, "primary    %s\n", primary)
	return nil
}

// probePrimary asks the primary's /healthz (token-free, as upstream).
func probePrimary(ctx context.Context, cfg edge.Config) string {
	if cfg.PrimaryURL == "" {
		s, _ := ladder.Resolve(os.LookupEnv, func(string) (string, error) { return "", exec.ErrNotFound })
		return "not configured (" + s.NoURL() + ")"
	}
	u := cfg.PrimaryURL
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "/"); j >= 0 {
			u = u[:i+3+j]
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/healthz", nil)
	if err != nil {
		return "unreachable: " + err.Error()
	}
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
