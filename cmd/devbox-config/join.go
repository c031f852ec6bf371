package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/join"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/shellword"
)

const joinHelp = `join replays the local palace into the primary at MEMPALACE_REMOTE_URL (bearer
MEMPALACE_REMOTE_TOKEN, from the environment or --env-file only), RFC 001 §4.4.
It reads the palace through the local server the edge starts (mempalace-mcp, or
MEMPALACE_EDGE_CHILD). Join writes none of the palace's files itself (it
reads two, read-only: the knowledge graph, and chroma.sqlite3 to tell a palace
without drawers from a broken one); the local MemPalace server may change
them when it opens them (MemPalace's own migrations, on a palace it has not
migrated yet), as any start of it would, in a dry run too. It sends each
record type with its own
dedupe rule: drawers and open facts by the server's guards, closed facts looked
up first, diary entries counted: of n equal entries (one wing, one text) the
primary gets as many as it lacks of n. Wings <palace>/edge/policy.json marks local
are never sent; --wing narrows further.

Every record goes through a join outbox in <palace>/edge, so a join killed at
any point resumes on the next run; <palace>/edge/bootstrap.json records each
target's state. A second join of the same palace sends nothing; one started
while another join of it runs (through any URL) is refused (exit 2).

Facts are asked of the primary first, one kg_query a subject. A fact closed
here that the primary holds open from the same valid_from is closed there
(kg_invalidate, as the edge replicates a close): MemPalace's kg_add would answer
the open one and file nothing. A fact open here that the primary has closed
since is not re-opened: the primary's close is newer; it counts as skipped, and
a note says so (so does one closed on both sides with other ends; --verify
names the two). One the primary holds open from another valid_from is not sent
(kg_add would file nothing): it is named "open on the primary", exit 1. One
open here whose triple the primary holds closed and replaced by another value
is not sent and is no mismatch: it counts on the "replaced" line, and a note
says how to make it the primary's value. A knowledge graph in two files (doctor's kg-split: the local
server reads one of them) fails the facts with doctor's finding and fix, and
none of them is sent.

Diary entries replay verbatim; their date on the primary becomes the join date.
Join one palace at a time: two palaces joining concurrently could both send a
diary entry or closed fact they share.

A record a gateway says an admin deleted on the primary since is not sent
again: it is counted on the output's "deleted" line (gateway trash restore
brings it back), and the exit status stays 0. Of equal diary entries, only as
many as the trash holds count as deleted; the rest are sent.

Exit status: 0 when everything selected is on the primary (or was deleted
there, or replaced there by another value) and what was verified matched, 1 when anything failed or mismatched (named in the output),
2 on usage errors (no URL, no token for a real join, no local server, a palace filled with
another embedder than the one configured). The local server's own
log lines are shown with MEMPALACE_EDGE_LOG=debug.`

// joinCmd is `join`: its flags, and run.
type joinCmd struct {
	stdout, stderr         io.Writer
	env                    ladder.Lookup
	dryRun, asJSON, resume bool
	device, verify         string
	envFile                string
	environ                []string // the local server's environment (before ChildEnviron)
	wings                  []string
	seed                   uint64
}

func newJoinCmd(stdout, stderr io.Writer, env ladder.Lookup) *cobra.Command {
	jc := &joinCmd{stdout: stdout, stderr: stderr, env: env}
	c := &cobra.Command{
		Use:   "join",
		Short: "Bring this palace's existing history into the primary, idempotently, verified by content",
		Long:  joinHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return jc.run() },
	}
	f := c.Flags()
	f.BoolVar(&jc.dryRun, "dry-run", false, "print the manifest (what would be sent, per record type) and send nothing; each drawer no join sent yet is looked up on the primary by its id, read-only, and one it holds is not counted; diary entries and facts are not looked up (the real run skips those the primary holds)")
	f.BoolVar(&jc.asJSON, "json", false, "print one JSON object with the outcome")
	f.StringVar(&jc.device, "origin-device", "", "stamp added_by = <agent>/<label>/<device> on every replayed drawer (an opaque id, e.g. a uuid; without it nothing is stamped)")
	f.StringArrayVar(&jc.wings, "wing", nil, "join only wings matching this glob (repeatable)")
	f.StringVar(&jc.verify, "verify", "25", "compare N drawers and diaries by content on both sides (a seeded sample), and read N facts back from the primary (open or closed as here), or all; 0: none")
	f.Uint64Var(&jc.seed, "seed", 1, "the verification sample's seed")
	f.BoolVar(&jc.resume, "resume", false, "only finish an interrupted join: send what it left queued, read nothing new")
	f.StringVar(&jc.envFile, "env-file", "", "read the MEMPALACE_* variables (the local server's too) from this .env file instead of the environment")
	return c
}

func (jc *joinCmd) run() error {
	n, err := parseVerify(jc.verify)
	if err != nil {
		return usageError("%v", err)
	}
	if err := jc.readEnvFile(); err != nil {
		return err
	}
	cfg, err := jc.config()
	if err != nil {
		return err
	}
	p := &join.Progress{W: jc.stderr}
	if f, ok := jc.stderr.(*os.File); ok {
		p.Terminal = isatty.IsTerminal(f.Fd())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rep, err := join.Run(ctx, cfg, join.Options{DryRun: jc.dryRun, Resume: jc.resume, Wings: jc.wings, Verify: n, Seed: jc.seed, Progress: p})
	var ue *join.UsageError
	if errors.As(err, &ue) {
		return usageError("join: %v", ue.Err)
	}
	if err != nil {
		return failed(err)
	}
	if jc.asJSON {
		if err := printJSON(jc.stdout, "encode the report", rep); err != nil {
			return err
		}
	} else {
		printJoin(jc.stdout, rep, n == join.All)
	}
	if !rep.OK() {
		return failed(nil) // the report names what failed
	}
	return nil
}

// readEnvFile makes --env-file's MEMPALACE_* variables (and the ladder's)
// the only ones join and its local server see, as doctor reads them.
func (jc *joinCmd) readEnvFile() error {
	jc.environ = os.Environ()
	if jc.envFile == "" {
		return nil
	}
	se, err := readStartEnv("", jc.envFile)
	if err != nil {
		return err
	}
	fromFile := func(name string) bool { return strings.HasPrefix(name, "MEMPALACE_") || ladderVar(name) }
	jc.env = envFileLookup(se.vars, fromFile)
	jc.environ = slices.DeleteFunc(jc.environ, func(kv string) bool { name, _, _ := strings.Cut(kv, "="); return fromFile(name) })
	for name, v := range se.vars {
		if fromFile(name) {
			jc.environ = append(jc.environ, name+"="+v)
		}
	}
	return nil
}

// config is join's configuration, read through the ladder.
// --origin-device is validated by the ladder as MEMPALACE_ORIGIN_DEVICE
// is; without the flag nothing is stamped, whatever the environment says.
func (jc *joinCmd) config() (join.Config, error) {
	lookup := func(k string) (string, bool) {
		if k == ladder.EnvOriginDevice {
			return jc.device, jc.device != ""
		}
		return jc.env(k)
	}
	s, warns, err := ladder.ResolveEdge(lookup, exec.LookPath)
	log := newLogger(jc.stderr, s.LogLevel).With("component", "join")
	if err != nil {
		return join.Config{}, usageError("%v", err)
	}
	if s.URLProblem != "" {
		return join.Config{}, usageError("join: %s: there is no primary to join", s.NoURL())
	}
	for _, w := range warns {
		if w.Var == ladder.EnvOriginDevice {
			return join.Config{}, usageError("--origin-device %+q: %s", jc.device, strings.TrimSuffix(w.Message, "; ignored, nothing will be stamped"))
		}
		if w.Var == ladder.EnvRemoteURL || w.Var == ladder.EnvOriginLabel || w.Var == ladder.EnvAgentName || w.Var == ladder.EnvEdgeTimeout {
			log.Warn(w.String())
		}
	}
	home, _ := jc.env("HOME")
	if home != "" {
		if err := existingHome(home, homeEnvOnly); err != nil {
			return join.Config{}, err
		}
	}
	if f := doctor.EmbedderMismatch(s.Palace, jc.env); f != nil {
		return join.Config{}, usageError("join: %s. Fix: %s (devbox-config doctor's %s)", strings.Replace(f.Message, "so the edge's local palace takes nothing", "and join can read none of it", 1), f.Fix, f.ID)
	}
	cfg := join.Config{
		URL: s.URL, Token: ladder.TokenSource(jc.env), Child: s.Child, ChildEnv: ladder.ChildEnviron(jc.environ, s.Palace),
		Palace: s.Palace, Home: home, Agent: s.Agent(), Label: s.OriginLabel, Device: s.OriginDevice,
		Timeout: s.Timeout, Version: version, Log: log, ChildStderr: io.Discard,
	}
	if jc.envFile != "" { // the commands the report prints find the join outbox as this run did
		cfg.OutboxEnv = "MEMPALACE_REMOTE_URL=" + shellword.Quote(join.Target(s.URL)) + " MEMPALACE_PALACE_PATH=" + shellword.Quote(s.Palace) + " "
	}
	if s.LogLevel <= slog.LevelDebug { // the local server's own lines too
		cfg.ChildStderr = jc.stderr
	}
	return cfg, nil
}

func parseVerify(v string) (int, error) {
	if v == "all" {
		return join.All, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--verify %q: want a number of drawers or all", v)
	}
	return n, nil
}

// printCounts prints the report's counts: a dry run's table, else what
// was sent, skipped, replaced and deleted (printJoin).
func printCounts(w io.Writer, r join.Report) {
	if r.DryRun {
		fmt.Fprintf(w, "join to %s: dry run, nothing is sent\n", r.Target)
		fmt.Fprintf(w, "%-16s %8s %10s\n", "record type", "local", "to send")
		for _, k := range join.Kinds {
			fmt.Fprintf(w, "%-16s %8d %10d\n", k, r.Manifest[k], r.Pending[k])
		}
		fmt.Fprintf(w, "%-16s %8d\n", "  facts open", r.Manifest["facts_open"])
		fmt.Fprintf(w, "%-16s %8d\n", "  facts closed", r.Manifest["facts_closed"])
	} else {
		fmt.Fprintf(w, "join to %s\n", r.Target)
		fmt.Fprintf(w, "sent      %s\n", kindCounts(r.Sent))
		fmt.Fprintf(w, "skipped   %s (already on the primary)\n", kindCounts(r.Skipped))
		if r.ReplacedOnPrimary > 0 {
			fmt.Fprintf(w, "replaced  facts %d (another value is current on the primary: not sent, see the note)\n", r.ReplacedOnPrimary)
		}
		if n := r.SentQueuedEarlier; n[join.Drawers]+n[join.Diaries]+n[join.Facts] > 0 {
			fmt.Fprintf(w, "also sent %s (queued by an earlier run, no longer among this run's records)\n", kindCounts(n))
		}
		if n := r.DeletedOnPrimary; n[join.Drawers]+n[join.Diaries] > 0 {
			fmt.Fprintf(w, "deleted   %s (deleted on the primary since, kept in the gateway's trash: not re-sent; its operator brings one back with `devbox-config gateway trash restore N`)\n", kindCounts(n))
		}
	}
}

// kindCounts is m's count of each record kind, in join.Kinds' order.
func kindCounts(m map[string]int) string {
	parts := make([]string, 0, len(join.Kinds))
	for _, k := range join.Kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// printJoin prints the report; verifyAll: every record was verified, no
// sample (whose seed would reproduce it).
func printJoin(w io.Writer, r join.Report, verifyAll bool) {
	printCounts(w, r)
	if len(r.Excluded.Wings) > 0 {
		fmt.Fprintf(w, "excluded  %s (local in policy.json)\n", strings.Join(r.Excluded.Wings, ", "))
	}
	if len(r.Excluded.Narrowed) > 0 {
		fmt.Fprintf(w, "not selected by --wing: %s\n", strings.Join(r.Excluded.Narrowed, ", "))
	}
	if r.Excluded.KnowledgeGraph {
		fmt.Fprintln(w, "excluded  the knowledge graph (local in policy.json)")
	}
	switch {
	case r.DryRun || r.Sampled == 0:
	case verifyAll:
		fmt.Fprintf(w, "verified  %d of %d by content\n", r.Verified, r.Sampled)
	default:
		fmt.Fprintf(w, "verified  %d of %d sampled by content (seed %d)\n", r.Verified, r.Sampled, r.VerifySeed)
	}
	for _, m := range r.Mismatches {
		id := m.LocalID
		if m.PrimaryID != "" && m.PrimaryID != m.LocalID {
			id += " (on the primary " + m.PrimaryID + ")" // a mined drawer's id there is its content's
		}
		fmt.Fprintf(w, "MISMATCH  %s %s: %s: %s\n", m.Kind, id, m.Verdict, m.Detail)
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "FAILED    %s %s: %s\n", f.Kind, f.Record, f.Error)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
	if r.Checkpoint != "" {
		fmt.Fprintf(w, "state     %s\n", r.Checkpoint)
	}
}
