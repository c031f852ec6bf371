package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/redact"
)

const edgeStatusHelp = `status prints one line per fact, each starting with its label:

  outbox      where the outbox is (or that edge mode never ran on this palace)
  queue       ops by state: queued, inflight, dead, in doubt, held, intent, done
  oldest      how long the oldest queued op has waited
  queued for  the primary URL the waiting ops were queued for (credentials
              stripped), and whether MEMPALACE_REMOTE_URL names another now
  last flush  when the last flush ended (last error: why the last send to
              MEMPALACE_REMOTE_URL failed, MEMPALACE_REMOTE_TOKEN masked in it;
              "past" when a later send got through; one from an earlier URL
              is not shown)
  flushing    the process that holds the flush lease now
  primary     whether the primary answers, and how
  policy      only when policy.json does not parse: writes are held until it does
  protected   how the primary absorbs a resend (an op-id ledger, or look-ups)
  embedder    whether the local palace's recorded model is the one configured
              (MemPalace refuses every write when it is not), and whether the
              last search that could tell found the primary's embedder
              different (one chunk, same text, two distances)
  COPY        the outbox is a copy of another's (a copied HOME), and
              MEMPALACE_ORIGIN_DEVICE is still the device its ops were made
              under: a second machine writing under the first one's name
              (the same machine, a backup restored: edge outbox same-machine)
  DEAD, IN DOUBT, HELD
              each op that needs you, with the command that settles it
              (a dead op: how many later ops on its objects wait behind it)
  LEFT OUT    a checkpoint the primary took without items an admin deleted
              there (done: they stay in this palace only), for 8 days
  CLOSED      a kg_invalidate of a fact the primary held closed already
              (another device's end came first: done, its end not kept), for 8 days
  NOT FILED   a kg_add of a fact the primary held current already, another
              device's or with other dates (done: nothing filed, its dates
              not kept), or a kg_supersede of a fact closed there while
              another value was current (done: nothing filed, its new value
              not made current), for 8 days
  INTENT      writes put in the outbox before the local palace answered,
              and whether their edge is alive (its lock under edge/live/
              held): its answer queues them; left by a stopped or killed
              edge, an edge running on this palace sends them within its
              lease, else the next edge start or devbox-config edge flush
  LOCAL ONLY  writes the local palace took that the outbox could not record
              (its disk full): only devbox-config join sends them; or that
              its record, edge/stayed-local.json, cannot be read (the fix)
  WAITING     updates of drawers a delete_by_source may remove, held
              until the local palace answers that delete
  JOIN        a join that stopped before it finished: what it queued
              waits in its join outbox until devbox-config join --resume
  deleted, ON PRIMARY
              records deleted on this device and hidden from its merged
              reads, those still on the primary, and those the primary
              does not show or could not look up (docs/trash.md)

Exit status 0, or 1 when the outbox cannot be read; --json prints the same
facts as one object.`

// edgeStatusCmd is `edge status`: its flags, and run.
type edgeStatusCmd struct {
	stdout, stderr io.Writer
	asJSON         bool
}

func newEdgeStatusCmd(stdout, stderr io.Writer) *cobra.Command {
	sc := &edgeStatusCmd{stdout: stdout, stderr: stderr}
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the outbox (queue depth by state, oldest queued, last flush and error), primary reachability and embedder state",
		Long:  edgeStatusHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return sc.run() },
	}
	c.Flags().BoolVar(&sc.asJSON, "json", false, "print JSON")
	return c
}

func (sc *edgeStatusCmd) run() error {
	ctx := context.Background() // the outbox's reads are local; each ask of the primary has its own bound (primaryWait)
	s, cfg, err := openOutbox(io.Discard, sc.stderr, false)
	if path, ok := noOutbox(err); ok {
		return sc.withoutOutbox(path, checkPrimary(ctx, cfg), doctor.UnfinishedJoins(cfg.Palace, time.Now()))
	}
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil {
		return failed(outbox.PathErr(s.Path(), err))
	}
	// The primary's words as a send stored them, which a client that did
	// not mask (an older edge's) left whole: masked before they are made
	// printable (a line break in wrapped base64 becomes a space) or --json.
	st.LastError = redact.Secret(st.LastError, cfg.Token())
	v := edgeStatus{outbox: s.Path(), url: cfg.PrimaryURL, stats: st, primary: checkPrimary(ctx, cfg), protection: s.Protection(ctx), joins: doctor.UnfinishedJoins(cfg.Palace, time.Now())}
	if _, err := edge.LoadPolicy(cfg.StateDir()); err != nil {
		v.policy = "DOES NOT PARSE (writes are held, unsent, until it does): " + err.Error()
	}
	// An unreadable mark reads as none: status reports, it does not fail
	// on what it cannot tell.
	v.mismatch, _ = s.Meta(ctx, "embedder_mismatch")
	v.sidecar = doctor.EmbedderMismatch(cfg.Palace, environLookup(cfg.ChildEnv)) // the local MemPalace's own, the parent's with MEMPALACE_ENV_FROM_PARENT
	if v.protection == "" {
		v.protection = "not known yet (no answer from the primary recorded)"
	}
	if f, ok := doctor.CopiedOutbox(s.Path(), st.Copied, cfg.OriginDevice); ok {
		v.copied = &f
	}
	v.behind = deadBehind(ctx, s, st.Dead)
	if v.tombs, err = checkTombstones(ctx, s, cfg, strings.HasPrefix(v.primary, reachable)); err != nil {
		return failed(err)
	}
	if sc.asJSON {
		return printJSON(sc.stdout, "edge status", map[string]any{"outbox": v.outbox, "outbox_exists": true, "queue": st, "primary": v.primary, "embedder_mismatch": v.mismatch, "embedder_sidecar": v.sidecar, "protection": v.protection, "policy_error": v.policy, "intent_note": intentNote(st), "dead_behind": v.behind, "unfinished_joins": joinsJSON(v.joins),
			"copied":     v.copied,
			"tombstones": map[string]any{"total": v.tombs.Total, "on_primary": v.tombs.OnPrimary, "not_visible": v.tombs.NotSeen, "check_errors": v.tombs.CheckErrors, "unchecked": v.tombs.Unchecked}})
	}
	v.print(sc.stdout)
	return nil
}

// edgeStatus is what `edge status` found.
type edgeStatus struct {
	outbox, primary, protection, mismatch, policy string
	url                                           string // MEMPALACE_REMOTE_URL
	stats                                         outbox.Stats
	behind                                        map[string]int // a dead op's id: the ops waiting behind it
	tombs                                         edge.Remaining
	joins                                         []doctor.Finding // join-interrupted
	copied                                        *doctor.Finding  // outbox-copied
	sidecar                                       *doctor.Finding  // the palace's recorded model is not the one configured
}

func (v edgeStatus) print(w io.Writer) {
	st := v.stats
	fmt.Fprintf(w, "outbox     %s\n", v.outbox)
	fmt.Fprintf(w, "queue      queued %d, inflight %d, dead %d, in doubt %d, held %d, intent %d, done %d\n", st.ByState[outbox.Queued], st.ByState[outbox.Inflight], st.ByState[outbox.Dead], st.ByState[outbox.InDoubt], st.ByState[outbox.Held], st.ByState[outbox.Intent], st.ByState[outbox.Done])
	if st.OldestQueued != nil {
		fmt.Fprintf(w, "oldest     queued %s ago\n", time.Since(*st.OldestQueued).Round(time.Second))
	}
	if st.QueuedFor != "" && st.Waiting() > 0 {
		fmt.Fprintf(w, "queued for %s%s\n", mailbox.Printable(st.QueuedFor), queuedElsewhere(st, v.url))
	}
	if st.LastFlush != nil {
		fmt.Fprintf(w, "last flush %s\n", st.LastFlush.Local().Format(time.RFC3339))
	}
	if e := st.LastErrorFrom(v.url); e != "" && st.LastErrorPast {
		fmt.Fprintf(w, "last error %s (past: a later send got through; its op may still be waiting: edge outbox list)\n", e)
	} else if e != "" {
		fmt.Fprintf(w, "last error %s\n", e)
	}
	if st.FlushOwner != "" {
		fmt.Fprintf(w, "flushing   %s\n", st.FlushOwner)
	}
	fmt.Fprintf(w, "primary    %s\n", v.primary)
	if v.policy != "" {
		fmt.Fprintf(w, "policy     %s\n", v.policy)
	}
	fmt.Fprintf(w, "protected  %s\n", v.protection)
	v.printEmbedder(w)
	if v.copied != nil {
		fmt.Fprintf(w, "COPY       %s (fix: %s)\n", v.copied.Message, v.copied.Fix)
	}
	v.printOps(w)
	if n := st.ByState[outbox.Held]; n > 0 {
		fmt.Fprintf(w, "HELD       %d write(s) made while %s did not parse: sent once it parses (fix it; the edge, or devbox-config edge flush, then sends them)\n", n, outbox.PolicyHint)
	}
	if n := len(st.BehindDelete); n > 0 {
		fmt.Fprintf(w, "WAITING    %d update_drawer(s) of drawers a delete_by_source may remove, held until the local palace has answered that delete (this edge, or the next edge start, sends it again): then cancelled if it removed the drawer, sent if not\n", n)
	}
	if note := intentNote(st); note != "" {
		fmt.Fprintf(w, "INTENT     %s\n", note)
	}
	for _, sl := range st.StayedLocal {
		fmt.Fprintf(w, "LOCAL ONLY %s\n", sl)
	}
	printStayedLocalErr(w, st)
	printJoins(w, v.joins)
	v.printTombstones(w)
}

// printOps lists the ops that need a look: dead, left out, closed, in
// doubt.
func (v edgeStatus) printOps(w io.Writer) {
	st := v.stats
	for _, o := range st.Dead {
		fmt.Fprintf(w, "DEAD       %s %s: %s%s (%s)\n", o.Short(), o.Tool, deadText(o.Error), behindNote(v.behind[o.ID]), deadFix(o, st.Copied))
	}
	for _, o := range st.LeftOut {
		fmt.Fprintf(w, "LEFT OUT   %s %s, done: %s (listed until the outbox prunes the op, 8 days after)\n", o.Short(), o.Tool, mailbox.Printable(outbox.FailureOf(o.Error).Message))
	}
	for _, o := range st.Closed {
		label := "CLOSED    "
		if outbox.FailureOf(o.Error).Kind == outbox.AlreadyCurrent {
			label = "NOT FILED "
		}
		fmt.Fprintf(w, "%s %s %s, done: %s (listed until the outbox prunes the op, 8 days after)\n", label, o.Short(), o.Tool, mailbox.Printable(strings.TrimPrefix(outbox.FailureOf(o.Error).Message, "devbox-config gateway: ")))
	}
	for _, o := range st.InDoubt {
		over := ""
		if strings.HasSuffix(o.Tool, "update_drawer") {
			over = " (overwriting whatever the primary holds now, another device's later edit too)"
		}
		fmt.Fprintf(w, "IN DOUBT   %s %s: it may have landed and nothing can look it up: devbox-config edge outbox retry %s sends it again%s, delivered %s records it as landed\n", o.Short(), o.Tool, o.Short(), over, o.Short())
	}
}

// printEmbedder says whether the local palace's embedder and the
// primary's were seen to differ, and how.
func (v edgeStatus) printEmbedder(w io.Writer) {
	if v.sidecar != nil {
		fmt.Fprintf(w, "embedder   MISMATCH: %s (fix: %s)\n", v.sidecar.Message, v.sidecar.Fix)
	}
	if v.mismatch != "" {
		fmt.Fprintf(w, "embedder   MISMATCH: %s (a search that finds a chunk at two distances answers the primary's results alone; cleared by the next search whose chunks on both sides agree)\n", v.mismatch)
	} else if v.sidecar == nil {
		fmt.Fprintf(w, "embedder   no mismatch seen (the local palace's recorded model is the one configured, and no search found the primary's distances differ)\n")
	}
}

// queuedElsewhere is a note when the ops were queued for a primary other
// than url, MEMPALACE_REMOTE_URL ("" when it is that one, or either is
// not known).
func queuedElsewhere(st outbox.Stats, url string) string {
	if st.QueuedFor == "" || url == "" || outbox.SamePrimary(st.QueuedFor, url) {
		return ""
	}
	return fmt.Sprintf(" (not the primary %s names now, %s: `devbox-config edge flush` sends them there; see docs/replication.md)", ladder.EnvRemoteURL, ladder.RedactURL(url))
}

// printStayedLocalErr says the record of writes that stayed local could
// not be read, with the fix (nothing when it was).
func printStayedLocalErr(w io.Writer, st outbox.Stats) {
	if e := st.StayedLocalErr; e != "" {
		fmt.Fprintf(w, "LOCAL ONLY the record of writes that stayed local cannot be read: %s (fix: %s)\n", mailbox.Printable(e), doctor.StayedLocalRecordFix)
	}
}

// deadBehind counts, for each dead op, the later ops on its objects it
// holds back: they wait until the operator retries or drops it
// (docs/replication.md). One that cannot be counted is left out.
func deadBehind(ctx context.Context, s *outbox.Store, dead []outbox.Op) map[string]int {
	behind := map[string]int{}
	for _, o := range dead {
		if n, err := s.Behind(ctx, o); err == nil && n > 0 {
			behind[o.ID] = n
		}
	}
	return behind
}

// behindNote says how many ops wait behind a dead one ("": none).
func behindNote(n int) string {
	switch {
	case n == 1:
		return "; 1 later op on the same objects waits behind it"
	case n > 1:
		return fmt.Sprintf("; %d later ops on the same objects wait behind it", n)
	}
	return ""
}

// intentNote says what becomes of the writes in the outbox before the
// local palace answered ("" with none): those whose edge is alive (its
// lock held) wait for its answer; those of an edge gone are sent by any
// edge running on the palace, or the next to start.
func intentNote(st outbox.Stats) string {
	n := st.ByState[outbox.Intent]
	if n == 0 {
		return ""
	}
	oldest := ""
	if len(st.Intents) > 0 {
		oldest = fmt.Sprintf(" (oldest %s, %s ago)", st.Intents[0].Short(), time.Since(st.Intents[0].CreatedAt).Round(time.Second))
	}
	var parts []string
	if alive := n - st.OrphanedIntents; alive > 0 {
		parts = append(parts, fmt.Sprintf("%d of an edge alive (its lock under edge/live/ held): it queues them on that answer (drops one refused)", alive))
	}
	if gone := st.OrphanedIntents; gone > 0 {
		parts = append(parts, fmt.Sprintf("%d of an edge stopped or killed (its lock free): an edge running on this palace sends them within its lease (MEMPALACE_EDGE_LEASE), else the next edge start or devbox-config edge flush", gone))
	}
	return fmt.Sprintf("%d write(s) put in the outbox before the local palace answered%s: %s", n, oldest, strings.Join(parts, "; "))
}

// printTombstones: what this device deleted, and what of it the primary
// still holds (docs/trash.md).
func (v edgeStatus) printTombstones(w io.Writer) {
	tb := v.tombs
	if tb.Total == 0 {
		return
	}
	fmt.Fprintf(w, "deleted    %d record(s) deleted on this device, hidden from its merged reads (docs/trash.md)\n", tb.Total)
	for _, l := range tb.OnPrimary {
		fmt.Fprintf(w, "ON PRIMARY %s\n", l)
	}
	for _, l := range slices.Concat(tb.NotSeen, tb.CheckErrors) {
		fmt.Fprintf(w, "deleted    %s\n", l)
	}
	if tb.Unchecked != "" {
		fmt.Fprintf(w, "deleted    not all checked against the primary: %s\n", tb.Unchecked)
	}
}

// checkTombstones asks the primary which tombstoned records it still
// holds, bounded: a primary that is down or slow is said, never a failure.
func checkTombstones(ctx context.Context, s *outbox.Store, cfg edge.Config, up bool) (edge.Remaining, error) {
	var p *edge.Primary
	if cfg.PrimaryURL != "" && up {
		p = edge.NewPrimary(cfg.PrimaryURL, cfg.Token, cfg.Log, edge.PrimaryOptions{Timeout: primaryWait(cfg), Version: version})
		defer p.Close()
	}
	cctx, cancel := context.WithTimeout(ctx, primaryWait(cfg))
	defer cancel()
	r, err := edge.CheckTombstones(cctx, s, p)
	if cfg.PrimaryURL != "" && !up && r.Unchecked != "" {
		r.Unchecked = "the primary did not answer its check (the primary line): none checked"
	}
	return r, err
}

// primaryWait bounds each ask of the primary a status or a flush report
// makes: the edge's call timeout, at most 5 s.
func primaryWait(cfg edge.Config) time.Duration { return min(cfg.CallTimeout, 5*time.Second) }

// reachable begins the primary's check when it answered (edge.Primary.Check).
const reachable = "reachable"

// withoutOutbox is `edge status` on a palace where edge mode never ran:
// nothing is queued, and the primary is still probed. It opens and
// creates nothing.
func (sc *edgeStatusCmd) withoutOutbox(path, primary string, joins []doctor.Finding) error {
	const note = "no outbox yet: edge mode never ran on this palace"
	if sc.asJSON {
		return printJSON(sc.stdout, "edge status", map[string]any{
			"outbox":           path,
			"outbox_exists":    false,
			"note":             note,
			"queue":            outbox.Stats{ByState: map[outbox.State]int{outbox.Queued: 0, outbox.Inflight: 0, outbox.Dead: 0, outbox.Done: 0}},
			"primary":          primary,
			"unfinished_joins": joinsJSON(joins),
		})
	}
	fmt.Fprintf(sc.stdout, "outbox     none yet at %s (edge mode never ran on this palace)\n", path)
	fmt.Fprintf(sc.stdout, "queue      empty\n")
	fmt.Fprintf(sc.stdout, "primary    %s\n", primary)
	printJoins(sc.stdout, joins)
	return nil
}

// printJoins prints a JOIN line for each join that stopped half-way.
func printJoins(w io.Writer, joins []doctor.Finding) {
	for _, f := range joins {
		fmt.Fprintf(w, "JOIN       %s (fix: %s)\n", f.Message, f.Fix)
	}
}

// joinsJSON is --json's unfinished_joins: each join-interrupted finding.
func joinsJSON(joins []doctor.Finding) []doctor.Finding {
	if joins == nil {
		return []doctor.Finding{}
	}
	return joins
}

// checkPrimary asks the primary with an authenticated call (edge.Primary
// Check): a revoked token is "refused the token", not "reachable".
func checkPrimary(ctx context.Context, cfg edge.Config) string {
	if cfg.PrimaryURL == "" {
		s, _ := ladder.Resolve(os.LookupEnv, func(string) (string, error) { return "", exec.ErrNotFound })
		return "not configured (" + s.NoURL() + ")"
	}
	p := edge.NewPrimary(cfg.PrimaryURL, cfg.Token, cfg.Log, edge.PrimaryOptions{Timeout: primaryWait(cfg), Version: version})
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, primaryWait(cfg))
	defer cancel()
	began := time.Now()
	said := p.Check(ctx)
	// The wait used up is no answer, whichever timer spoke first: said is
	// "context deadline exceeded", or a dial's "i/o timeout" when the
	// call's own timer ran out a moment before ctx's.
	if !strings.HasPrefix(said, reachable) && (ctx.Err() != nil || time.Since(began) >= primaryWait(cfg)) {
		f := doctor.Unanswered(ladder.RedactURL(cfg.PrimaryURL), primaryWait(cfg), "devbox-config doctor")
		return fmt.Sprintf("unreachable: no answer within %s (fix: %s)", primaryWait(cfg), f.Fix)
	}
	return said
}

// environLookup looks a variable up in environ (os.Environ's form; the
// last of a name counts, as for exec).
func environLookup(environ []string) ladder.Lookup {
	return func(name string) (string, bool) {
		for i := len(environ) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}
