package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/join"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// outboxPath is the edge's outbox, or (joinOutbox) the join outbox of the
// primary MEMPALACE_REMOTE_URL names.
func outboxPath(cfg edge.Config, joinOutbox bool) (string, error) {
	if !joinOutbox {
		return filepath.Join(cfg.StateDir(), outbox.FileName), nil
	}
	if cfg.PrimaryURL == "" {
		return "", usageError("--join: MEMPALACE_REMOTE_URL is not set: which primary's join?")
	}
	return filepath.Join(cfg.StateDir(), join.OutboxFile(join.Target(cfg.PrimaryURL))), nil
}

// openOutbox opens the edge's outbox (or the join outbox): the ladder's
// warnings go to logTo, the outbox's own (a copied file given a new
// identity, its mode narrowed) to stderr, whatever the command.
func openOutbox(logTo, stderr io.Writer, joinOutbox bool) (*outbox.Store, edge.Config, error) {
	cfg, _, err := edgeConfig(logTo)
	if err != nil {
		return nil, cfg, err
	}
	path, err := outboxPath(cfg, joinOutbox)
	if err != nil {
		return nil, cfg, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, cfg, failed(noOutboxError{path})
	} else if err != nil {
		return nil, cfg, failed(fmt.Errorf("outbox %s: %w", path, err))
	}
	s, err := outbox.OpenOptions(path, outbox.Options{Device: cfg.OriginDevice, Label: cfg.OriginLabel, Token: cfg.Token, Log: newLogger(stderr, slog.LevelWarn).With("component", "edge")})
	if doctor.UnusableOutbox(err) { // a corrupt file: its fix, and what it loses, is doctor's (attack106 F3)
		err = fmt.Errorf("%w; `devbox-config doctor` (outbox-dead) says how to move it aside with its -wal and -shm and what that loses", err)
	}
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

const outboxHelp = `An op is one write queued for the primary. Tables print its id's first 12
hex digits; --json prints all 64; every command takes either (or any unique
prefix of 6 or more). --join acts on the join outbox of the primary
MEMPALACE_REMOTE_URL names (what devbox-config join queued) instead of the
edge's.

States: queued (waiting, maybe behind another op on the same object),
inflight (being sent: a drop or delivered stands whatever that send's
outcome, though the send may land; retry is refused until it settles), dead
(the primary refused it 5 times: fix the cause, then retry, or drop),
indoubt (it may have landed and nothing can look it up: retry sends it
again, delivered records it as landed), held (written while policy.json did
not parse: sent once it parses), done.`

func newEdgeOutboxCmd(stdout, stderr io.Writer) *cobra.Command {
	ctx := context.Background()
	var force bool
	retry := newOutboxActCmd(stdout, stderr, "retry", "Send an op again: a dead one after fixing its cause, or one in doubt (a second copy if the first landed)",
		func(s *outbox.Store, cfg edge.Config, id string) (outbox.Op, bool, error) {
			was, _ := s.GetByID(ctx, id) // unreadable: RetryAs says so
			o, err := s.RetryAs(ctx, id, tokenDevice(s, cfg), force)
			return o, was.TokenDevice != o.TokenDevice, err
		})
	retry.Flags().BoolVar(&force, "force", false, "send an op queued as another device before this outbox was copied anyway: the original machine holds it too, so only when it will never send it")
	g := group("outbox", "Inspect and repair the outbox: list, retry ID, drop ID, delivered ID, same-machine",
		newOutboxListCmd(stdout, stderr),
		retry,
		newOutboxActCmd(stdout, stderr, "drop", "Give up on an op: it is never sent, and the ops waiting behind it move on",
			func(s *outbox.Store, _ edge.Config, id string) (outbox.Op, bool, error) { return s.Drop(ctx, id) }),
		newOutboxActCmd(stdout, stderr, "delivered", "Record an op in doubt as landed on the primary (you checked it is there): never sent again",
			func(s *outbox.Store, _ edge.Config, id string) (outbox.Op, bool, error) {
				o, err := s.Delivered(ctx, id)
				return o, false, err
			}),
		newOutboxSameMachineCmd(stdout, stderr))
	g.Long = outboxHelp
	return g
}

// newOutboxSameMachineCmd is `edge outbox same-machine`: the operator's
// word that the copy the outbox is (edge status's COPY, doctor's
// outbox-copied) was made on this same machine, so the note goes.
func newOutboxSameMachineCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "same-machine",
		Short: "Record that the outbox's copy is this same machine (a backup restored, a new disk): edge status's COPY and doctor's outbox-copied go",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			s, _, err := openOutbox(io.Discard, stderr, false)
			if err != nil {
				return err
			}
			defer s.Close()
			c, err := s.SameMachine(context.Background())
			if err != nil {
				return failed(outbox.PathErr(s.Path(), err)) // a lock held: said plainly, as retry says it
			}
			fmt.Fprintf(stdout, "%s: recorded as this machine's own (a copy of the outbox whose identity began %s): edge status and doctor no longer note it; a later copy is noted again. If this is in fact a second machine, it writes under device %q's name: give it its own device id and token (docs/operator.md, A cloned devbox)\n", s.Path(), mailbox.Printable(c.Was), mailbox.Printable(c.Device))
			return nil
		},
	}
}

// outboxListCmd is `edge outbox list`: its flags, and run.
type outboxListCmd struct {
	stdout, stderr          io.Writer
	all, asJSON, joinOutbox bool
}

func newOutboxListCmd(stdout, stderr io.Writer) *cobra.Command {
	lc := &outboxListCmd{stdout: stdout, stderr: stderr}
	c := &cobra.Command{
		Use: "list", Short: "List the ops not done: queued, inflight, dead, in doubt, held (--all: done ones too)", Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return lc.run() },
	}
	c.Flags().BoolVar(&lc.all, "all", false, "include ops already sent, dropped or recorded as delivered")
	c.Flags().BoolVar(&lc.asJSON, "json", false, "print JSON (full op ids)")
	c.Flags().BoolVar(&lc.joinOutbox, "join", false, "the join outbox of MEMPALACE_REMOTE_URL's primary")
	return c
}

func (lc *outboxListCmd) run() error {
	s, _, err := openOutbox(io.Discard, lc.stderr, lc.joinOutbox)
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
		states = []outbox.State{outbox.Queued, outbox.Inflight, outbox.Dead, outbox.InDoubt, outbox.Held, outbox.Done}
	}
	ops, err := s.List(context.Background(), 10000, states...)
	if err != nil {
		return failed(err)
	}
	if lc.asJSON {
		if ops == nil {
			ops = []outbox.Op{} // an empty outbox is [], not null
		}
		return printJSON(lc.stdout, "edge outbox list", ops)
	}
	if len(ops) == 0 {
		fmt.Fprintf(lc.stdout, "nothing waiting in %s\n", s.Path())
		return nil
	}
	behind, err := s.BehindDelete(context.Background(), 10000)
	if err != nil {
		return failed(err)
	}
	held := map[int64]bool{}
	for _, o := range behind {
		held[o.LocalSeq] = true
	}
	c, _ := s.CopyRecord(context.Background()) // unreadable: whose a held op is reads as not known, and is said so
	w := newTable(lc.stdout)
	fmt.Fprintln(w, "SEQ\tOP\tSTATE\tTRIES\tTOOL\tWING\tCREATED\tERROR")
	for _, o := range ops {
		state := string(o.State)
		if held[o.LocalSeq] {
			state += " (waits for a delete_by_source: edge status)"
		}
		_, whose, _ := otherDeviceFix(o, c)
		state += whose
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.LocalSeq, o.Short(), state, o.Attempts, o.Tool, o.Wing, o.CreatedAt.Local().Format(time.DateTime), errorText(o.Error))
	}
	return w.Flush()
}

// newOutboxActCmd is `edge outbox retry|drop|delivered ID`: act on one op.
func newOutboxActCmd(stdout, stderr io.Writer, use, short string, act func(*outbox.Store, edge.Config, string) (o outbox.Op, theirs bool, err error)) *cobra.Command {
	var joinOutbox bool
	c := &cobra.Command{
		Use: use + " ID", Short: short, Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			s, cfg, err := openOutbox(io.Discard, stderr, joinOutbox)
			if err != nil {
				return err
			}
			defer s.Close()
			o, theirs, err := act(s, cfg, args[0])
			if sqlitewal.Busy(err) { // another process holds its lock: said plainly, as flush says it (attack113 F4)
				err = outbox.PathErr(s.Path(), err)
			}
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(stdout, "%s %s: %s\n", o.Short(), o.Tool, outcome(use, o, theirs))
			return nil
		},
	}
	c.Flags().BoolVar(&joinOutbox, "join", false, "the join outbox of MEMPALACE_REMOTE_URL's primary")
	return c
}

// outcome says what an operator command did to an op, in its words
// (theirs: a drop left the note that the palace takes the primary's text;
// a retry records the op as another device than it was queued as).
func outcome(use string, o outbox.Op, theirs bool) string {
	inFlight := strings.Contains(outbox.FailureOf(o.Error).Message, outbox.InFlightAtSettle) // Landed may follow it
	switch {
	case use == "drop" && inFlight:
		return "dropped; it was being sent (by a running edge, or one stopped mid-send): it may have landed on the primary (check with `devbox-config edge outbox list --all`, which notes a send of it that reached the primary, or on the primary); it is never sent again (the ops behind it move on)"
	case use == "delivered" && inFlight:
		return "recorded as delivered (never sent again); it was being sent: that send's outcome is not recorded over yours"
	}
	switch use {
	case "drop":
		switch {
		case theirs && o.Tool == catalogue.Prefix+"delete_drawer":
			return "dropped: never sent again (the ops behind it move on); " + outbox.ReadsTheirs
		case theirs:
			return "dropped: never sent again (the ops behind it move on); " + outbox.TakesTheirs + " (at once if an edge runs on this palace, else at the edge's next start), so its later edits of the drawer build on that text"
		}
		return "dropped: never sent again (the ops behind it move on)"
	case "delivered":
		return "recorded as delivered (never sent again)"
	}
	switch {
	case o.Resend && o.Tool == catalogue.Prefix+"update_drawer":
		return "queued to be sent again, without a look-up or its base: it overwrites the drawer's text on the primary, whoever wrote it since (the gateway's trash keeps the text it replaces)"
	case o.Resend:
		return "queued to be sent again: the gateway forwards it without its look-up (the edge still looks on the primary first where it can, for a diary entry, a fact or an event, so one that landed is recorded, not sent twice)"
	}
	switch outbox.FailureOf(o.Error).Kind {
	case outbox.ChangedOnPrimary:
		if o.Tool == catalogue.Prefix+"delete_drawer" {
			return "queued to be sent again without its base: it deletes the drawer's newer text on the primary (the gateway's trash keeps what it removes)"
		}
		return "queued to be sent again without its base: it overwrites the drawer's newer text on the primary (the gateway's trash keeps the text it replaces)"
	}
	// A held op, or one --force sent as another device than it was queued as.
	if (theirs || outbox.FailureOf(o.Error).Kind == outbox.OtherDevice) && o.TokenDevice != "" {
		return "queued to be sent again, as device " + mailbox.Printable(o.TokenDevice) + ", the gateway's for the token in .env"
	}
	return "queued to be sent again"
}

// tokenDevice asks the gateway which device it names the token in .env
// now: the device a retried op held as queued under another device is
// then sent as (outbox.Store.RetryAs). What it hears is kept as a flush
// keeps it.
func tokenDevice(s *outbox.Store, cfg edge.Config) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		p := flushPrimary(ctx, s, cfg)
		defer p.Close()
		ctx, cancel := context.WithTimeout(ctx, 2*cfg.CallTimeout)
		defer cancel()
		if dt, ok := edge.FlushTarget(p).(outbox.DeviceTarget); ok {
			if dev := dt.Device(ctx).ID; dev != "" {
				return dev, nil
			}
		}
		return "", fmt.Errorf("the gateway at %s did not say which device the token in .env is (not reached, or it refused the token: `devbox-config edge status` says which); retry once it answers", cfg.PrimaryURL)
	}
}

// otherDeviceFix is, for an op held as queued under another device than
// the gateway names the token (false: not such an op), the fix in full
// (edge status, flush) and the note `edge outbox list` gives it: the
// original's to send if it was queued before this outbox was copied,
// unless the original is gone for good (a devbox moved to new hardware,
// the old one retired), this machine's if after; with no copy recorded,
// which is not known.
func otherDeviceFix(o outbox.Op, c *outbox.Copied) (fix, note string, ok bool) {
	f := outbox.FailureOf(o.Error)
	if o.State != outbox.Dead || f.Kind != outbox.OtherDevice {
		return "", "", false
	}
	id, dev := o.Short(), mailbox.Printable(cmp.Or(f.Device, "the token's device"))
	switch before, known := c.QueuedBefore(o); {
	case before:
		return fmt.Sprintf("queued before this outbox was copied: the original machine holds it too and sends it as its own device: `devbox-config edge outbox drop %[1]s` (a plain retry from here is refused: an older gateway would file it twice); if the original machine is gone for good and never sent it: `devbox-config edge outbox retry --force %[1]s`", id),
			" (queued before this outbox was copied: the original sends it; drop it, or if the original is gone for good and never sent it: retry --force)", true
	case known:
		return fmt.Sprintf("written on this machine after its outbox was copied, before it took a device id of its own: `devbox-config edge outbox retry %s` sends it as %s (`drop %s` gives it up)", id, dev, id),
			" (written here after the copy: retry sends it as this device)", true
	}
	return fmt.Sprintf("whose it is cannot be told here (no copy of this outbox is recorded; a disk-level clone is not seen): if this outbox was copied from a machine still in use, that machine sends it: `devbox-config edge outbox drop %[1]s` (a retry is filed once by a gateway of this release, twice by an older one); if this devbox was renamed (a new device id or token in .env), or the machine it was copied from is gone for good and never sent it: `devbox-config edge outbox retry %[1]s` sends it as %[2]s; a lost or compromised device's write: drop it", id, dev),
		" (a copy's original still in use sends it: drop it; renamed here, or the original gone for good: retry it)", true
}

// deadFix is what to do about the dead op o: one held as another
// device's is dropped or retried as the token's device, as c, the
// outbox's record of being a copy, says (otherDeviceFix); one refused
// as written never lands as it is, so it is dropped (the write made anew,
// corrected, goes on: it holds nothing back), unless the gateway's ledger
// refused its op id as reused, which after a rollback is the same write
// (outbox.ReusedAdvice); one of a drawer the operator purged from the
// gateway's trash never lands either (its id is refused for good): dropped;
// any other is retried once its cause is fixed.
func deadFix(o outbox.Op, c *outbox.Copied) string {
	if fix, _, ok := otherDeviceFix(o, c); ok {
		return fix
	}
	f := outbox.FailureOf(o.Error)
	if f.AsWritten && outbox.OpIDReused(f.Message) {
		return fmt.Sprintf("the same write, if the gateway was rolled back: run the release that recorded it again, then `devbox-config edge outbox retry %s`; a different write under that op id: `devbox-config edge outbox drop %s`", o.Short(), o.Short())
	}
	if f.AsWritten {
		return fmt.Sprintf("it never lands as written, and a retry is refused again: `devbox-config edge outbox drop %s` (a write made anew, corrected, is sent)", o.Short())
	}
	switch {
	case f.Kind == outbox.ChangedOnPrimary && strings.HasSuffix(o.Tool, "delete_drawer"):
		return fmt.Sprintf("`devbox-config edge outbox retry %s` deletes the primary's text too (the gateway's trash keeps it), `drop %s` keeps theirs (this device reads it again)", o.Short(), o.Short())
	case f.Kind == outbox.ChangedOnPrimary:
		return fmt.Sprintf("`devbox-config edge outbox retry %s` overwrites the primary's text (the gateway's trash keeps it), `drop %s` keeps it (this device's palace takes it)", o.Short(), o.Short())
	case restoredAs(f):
		return fmt.Sprintf("a retry cannot land it: make the edit again on the new id, then `devbox-config edge outbox drop %s`", o.Short())
	case f.Kind == outbox.DeletedOnPrimary && strings.Contains(f.Message, ledger.PurgedWords):
		return fmt.Sprintf("purged for good, it never lands: `devbox-config edge outbox drop %s`", o.Short())
	}
	return fmt.Sprintf("fix the cause, then `devbox-config edge outbox retry %s` (or drop %s)", o.Short(), o.Short())
}

// restoredAs reports a refusal of a drawer's old id the operator restored
// under a new one (the gateway's rule restored-as-another-id, which names
// the new id first).
func restoredAs(f outbox.Failure) bool {
	return f.Kind == outbox.DeletedOnPrimary && strings.Contains(f.Message, ledger.RestoredAsWords)
}

// errorText is an op's last failure for one line of a listing: the
// failure table's words and the primary's message, cut at 100 characters,
// its control and invisible characters shown as escapes (the message is
// the primary's, and may repeat what a request carried).
func errorText(raw json.RawMessage) string {
	return mailbox.PrintableCut(outbox.Words(raw), 100, utf8.RuneCountInString)
}

// deadText is errorText for a DEAD line of edge status: cut at 300 for a
// drawer changed on the primary or restored under a new id, whose words
// name who changed it and when, or the new id, past 100.
func deadText(raw json.RawMessage) string {
	if f := outbox.FailureOf(raw); f.Kind == outbox.ChangedOnPrimary || restoredAs(f) {
		return mailbox.PrintableCut(outbox.Words(raw), 300, utf8.RuneCountInString)
	}
	return errorText(raw)
}
