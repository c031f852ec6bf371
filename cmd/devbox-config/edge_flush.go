package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
)

const edgeFlushHelp = `flush sends every queued write now, whatever backoff an earlier failure left it
waiting out; a write whose answer was lost, or that could not reach the
primary, is tried again a few times within --timeout. Writes made while
policy.json did not parse are released first, if it parses now. A dead op
(the primary refused it 5 times) and an op in doubt wait for you, and hold back
only the writes on the same object. An op a stopped process left in flight
is looked up first (or sent again under its op id, which a gateway's ledger
answers from its record). It prints what it sent and how many of those left
in flight it settled, the primary's
state (reachable with the token accepted, refused the token, unreachable, or
a gateway that answered for a primary behind it that failed),
and each op it could not send with what happened to it: the answer was lost,
not sent (unreachable), refused and why, in doubt; while another edge process
holds the flush lease, that the op is that process's to send; when --timeout
ended it, that it did, and the ops it had no time for. Writes queued for
another primary than MEMPALACE_REMOTE_URL names are sent to it all the same
(a palace moved to a new primary), said on stderr with the one they were
queued for. Exit status 0 when nothing is left, 1 otherwise.`

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
	c.Flags().DurationVar(&fc.timeout, "timeout", time.Minute, "give up after this long (a send under way then has 1 s more, and the primary's check 1 s)")
	return c
}

func (fc *edgeFlushCmd) run() error {
	if fc.timeout <= 0 {
		return usageError("--timeout must be positive")
	}
	s, cfg, err := openOutbox(fc.stderr, fc.stderr, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if cfg.PrimaryURL == "" {
		return usageError("MEMPALACE_REMOTE_URL is not set: there is no primary to flush to")
	}
	ctx, cancel := context.WithTimeout(context.Background(), fc.timeout)
	defer cancel()
	if err := readyToFlush(ctx, s, cfg); err != nil {
		return err
	}
	if st, err := s.Stats(ctx); err == nil && st.Waiting() > 0 && queuedElsewhere(st, cfg.PrimaryURL) != "" {
		// Moving a palace to a new primary is legitimate: said, not refused.
		fmt.Fprintf(fc.stderr, "devbox-config: the writes waiting in %s were queued for the primary %s; sending them to %s (%s) as asked (see docs/replication.md)\n", s.Path(), mailbox.Printable(st.QueuedFor), ladder.RedactURL(cfg.PrimaryURL), ladder.EnvRemoteURL)
	} // unreadable: Drain's own reads say so
	p := flushPrimary(ctx, s, cfg)
	defer p.Close()
	// A send under way at --timeout has flushGrace more to get its
	// answer (the op then ends sent, or queued again), not the edge's 3 s.
	before, inflight := leftOutIDs(ctx, s), inFlight(ctx, s)
	sent, drainErr := (&outbox.Flusher{S: s, P: edge.FlushTarget(p), Log: cfg.Log, SendTimeout: 2 * cfg.CallTimeout, StopGrace: flushGrace}).Drain(ctx)
	timedOut := ctx.Err() != nil
	// What is left is read even when the time ran out: the outbox's reads
	// are local, and the primary's check has its own bound.
	rctx := context.WithoutCancel(ctx)
	st, err := s.Stats(rctx)
	if err != nil {
		return failed(fmt.Errorf("sent %d, then could not read the outbox %s: %w", sent, s.Path(), err))
	}
	by := st.ByState
	fmt.Fprintf(fc.stdout, "%s; left: queued %d, inflight %d, dead %d, in doubt %d, held %d\n", sentWords(sent, settled(rctx, s, inflight)), by[outbox.Queued], by[outbox.Inflight], by[outbox.Dead], by[outbox.InDoubt], by[outbox.Held])
	if timedOut {
		fmt.Fprintf(fc.stdout, "--timeout %s ran out: what is left waits for the next flush (or the edge); `devbox-config edge flush --timeout %s` gives it longer\n", shortDuration(fc.timeout), shortDuration(max(5*time.Minute, 4*fc.timeout)))
	}
	printSentInPart(fc.stdout, before, st.LeftOut)
	printStayedLocalErr(fc.stdout, st)
	left := st.Waiting()
	if left == 0 && drainErr == nil {
		return nil
	}
	wait := primaryWait(cfg)
	if timedOut {
		wait = flushGrace // --timeout is spent: the check gets no more than the send's grace
	}
	fc.printLeft(rctx, s, p, wait, errors.Is(drainErr, outbox.ErrLeaseHeld), timedOut)
	if drainErr != nil && drainErr != context.DeadlineExceeded {
		return failed(drainErr)
	}
	return failed(fmt.Errorf("%d op(s) not sent", left))
}

// shortDuration is d as an operator types it: 5m, not 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, zero := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, zero) {
			s = s[:len(s)-2]
		}
	}
	return s
}

// inFlight is the ids of the ops in flight as the flush starts: a process
// stopped mid-send left them (or another edge process is sending them).
func inFlight(ctx context.Context, s *outbox.Store) []string {
	ops, _ := s.List(ctx, 1000, outbox.Inflight) // unread: none is said settled, as before
	ids := make([]string, len(ops))
	for i, o := range ops {
		ids[i] = o.ID
	}
	return ids
}

// settled counts the ops of ids done now.
func settled(ctx context.Context, s *outbox.Store, ids []string) int {
	n := 0
	for _, id := range ids {
		if o, err := s.GetByID(ctx, id); err == nil && o.State == outbox.Done {
			n++
		}
	}
	return n
}

// sentWords is what a flush did: the ops it sent, and, apart, those a
// stopped process left in flight that are settled now (looked up, or
// answered from a gateway's record: "sent 0" read as nothing went out,
// attack74 F3).
func sentWords(sent, settled int) string {
	if settled == 0 {
		return fmt.Sprintf("sent %d", sent)
	}
	return fmt.Sprintf("sent %d, settled %d left in flight", max(sent-settled, 0), settled)
}

// flushPrimary is the primary a flush sends to, keeping what it learns
// as the edge does: the primary's protection, and what the gateway names
// this token (the ops queued next record it: outbox.Op.TokenDevice).
func flushPrimary(ctx context.Context, s *outbox.Store, cfg edge.Config) *edge.Primary {
	return edge.NewPrimary(cfg.PrimaryURL, cfg.Token, cfg.Log, edge.PrimaryOptions{Timeout: cfg.CallTimeout, Version: version,
		OnLedger: func(on bool) {
			if err := outbox.RecordProtection(s, on); err != nil {
				cfg.Log.Debug("the primary's protection not recorded", "err", err)
			}
		},
		OnDevice: func(header string) { edge.KeepDeviceHeader(s, header, cfg.Log) }})
}

// leftOutIDs is the checkpoints the outbox holds as done without items an
// admin deleted on the primary (outbox.Store.LeftOut), so that a flush
// names those it sent; none when they cannot be read (the flush then names
// every one Stats lists).
func leftOutIDs(ctx context.Context, s *outbox.Store) map[string]bool {
	ops, _ := s.LeftOut(ctx, 100) // unread: every one listed after is named, which says more, not less
	ids := map[string]bool{}
	for _, o := range ops {
		ids[o.ID] = true
	}
	return ids
}

// printSentInPart names the checkpoints of leftOut this flush sent (not
// in before) that the primary took without items an admin deleted there.
func printSentInPart(w io.Writer, before map[string]bool, leftOut []outbox.Op) {
	for _, o := range leftOut {
		if !before[o.ID] {
			fmt.Fprintf(w, "sent in part: %s %s: %s\n", o.Short(), o.Tool, outbox.Words(o.Error))
		}
	}
}

// readyToFlush readies the outbox for the flush: the intents an edge killed
// mid-write left resolved (not a running one's), the writes held while
// policy.json did not parse released if it parses now, every backoff
// cleared.
func readyToFlush(ctx context.Context, s *outbox.Store, cfg edge.Config) error {
	if _, err := s.ResolveIntents(ctx); err != nil {
		return failed(outbox.PathErr(s.Path(), err))
	}
	if pol, err := edge.LoadPolicy(cfg.StateDir()); err == nil {
		if _, _, err := edge.ReleaseHeld(ctx, s, pol, cfg.Stamp()); err != nil {
			return failed(fmt.Errorf("outbox %s: releasing the writes held while the policy did not parse: %w", s.Path(), err))
		}
	}
	if err := s.ClearBackoff(ctx); err != nil {
		return failed(outbox.PathErr(s.Path(), err))
	}
	return nil
}

// printLeft prints the primary's state (checked within wait) and the ops
// left, with what happened to each; a list that cannot be read leaves the
// count printed before and the error after to say it. leased: another
// process holds the flush lease; timedOut: --timeout ended the flush.
func (fc *edgeFlushCmd) printLeft(ctx context.Context, s *outbox.Store, p *edge.Primary, wait time.Duration, leased, timedOut bool) {
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fmt.Fprintf(fc.stdout, "primary: %s\n", p.Check(cctx))
	ops, _ := s.List(ctx, 20)
	c, _ := s.CopyRecord(ctx) // unreadable: whose a held op is reads as not known, and is said so
	for _, o := range ops {
		fmt.Fprintf(fc.stdout, "not sent: %s %s (%s): %s\n", o.Short(), o.Tool, o.State, leftWhy(notSentWhy(ctx, s, c, o, leased), o, timedOut))
	}
}

// leftWhy is why (notSentWhy's) op o is left, with what a flush's end by
// --timeout (timedOut) tells: an op then in flight may have landed
// (attack76 F4), unless why knows more than its last error (another
// process's lease, an op it waits behind).
func leftWhy(why string, o outbox.Op, timedOut bool) string {
	switch {
	case timedOut && o.State == outbox.Inflight && why == outbox.Words(o.Error):
		return "in flight when --timeout ran out: may have landed; the next flush settles it"
	case timedOut && why == "":
		return "not tried before --timeout ran out"
	}
	return cmp.Or(why, "not tried yet")
}

// flushGrace bounds what edge flush does past its --timeout: a send under
// way then gets it to finish, and the primary's check.
const flushGrace = time.Second

// notSentWhy says, in words, why an op is still waiting ("": nothing is
// known: it was not tried). leased: another
// process holds the flush lease, so this flush tried nothing: an op it
// would have sent is that process's to send, whatever its last error was.
// c is the outbox's record of being a copy (deadFix).
func notSentWhy(ctx context.Context, s *outbox.Store, c *outbox.Copied, o outbox.Op, leased bool) string {
	switch o.State {
	case outbox.InDoubt:
		return fmt.Sprintf("it may have landed and nothing can look it up: `devbox-config edge outbox retry %s` sends it again, `delivered %s` records it as landed", o.Short(), o.Short())
	case outbox.Held:
		return "held until " + outbox.PolicyHint + " parses"
	}
	why := outbox.Words(o.Error)
	if b, blocked, err := s.Blocker(ctx, o); err == nil && blocked && b.ID != o.ID {
		why = fmt.Sprintf("waits behind %s (%s, %s) on the same object", b.Short(), b.Tool, b.State)
	} else if leased && (o.State == outbox.Queued || o.State == outbox.Inflight) {
		why = "another edge process holds the flush lease; it sends it"
	}
	if o.State == outbox.Dead && !strings.Contains(why, "edge outbox retry") { // the gateway's words name the fix already
		why += "; " + deadFix(o, c)
	}
	return why
}
