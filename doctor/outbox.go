package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/redact"
	"github.com/joakimp/devbox-config/shellword"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// outboxState is what doctor read from the edge's outbox.
type outboxState struct {
	path     string
	exists   bool
	stats    outbox.Stats
	mismatch string // the edge's embedder canary: its record of a mismatch
	err      error
	// unusable: the outbox could not be opened (not a database, or one
	// that fails its integrity check), so nothing can read it.
	unusable bool
	device   string // .env's MEMPALACE_ORIGIN_DEVICE (outbox-copied)
	edge     bool   // the devbox is in edge mode: an edge sends what waits
	// storage: its file system refused the open (full, read-only, not
	// this user's); peek is then what a read-only look counted.
	storage *outbox.StorageError
	peek    string
}

// OutboxPath is where the edge keeps its queue: <palace>/edge/outbox.sqlite.
func OutboxPath(palace string) string { return filepath.Join(palace, "edge", outbox.FileName) }

// readOutbox opens the outbox only if it exists (outbox.Open would create
// it), read-only: doctor never creates files, and writes nothing to the
// outbox (a copy is not given its own identity, an older build's is not
// brought to this schema). It is read in every mode, since ops queued
// before edge mode was turned off still wait for the primary.
func readOutbox(ctx context.Context, opts Options, st State) outboxState {
	if st.Palace == "" {
		return outboxState{}
	}
	ob := outboxState{path: OutboxPath(st.Palace), device: st.Settings.OriginDevice, edge: st.Settings.Mode == ladder.Edge}
	fi, err := os.Stat(ob.path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return ob
	}
	ob.exists = true
	s, err := outbox.OpenOptions(ob.path, outbox.Options{Label: "doctor", ReadOnly: true, StatFS: opts.StatFS})
	if errors.Is(err, outbox.ErrOlderSchema) || errors.Is(err, sqlitewal.ErrNewerSchema) {
		ob.err = err // whole, and not this build's to read: never moved aside
		return ob
	} else if err != nil {
		return failedOutbox(ob, err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if ob.stats, err = s.Stats(ctx); err != nil {
		ob.err = fmt.Errorf("outbox %s: %w", ob.path, err)
		return ob
	}
	ob.mismatch, _ = s.Meta(ctx, "embedder_mismatch")
	return ob
}

// failedOutbox is ob for an outbox that would not open: one its file
// system refused is looked at read only (outbox.Peek) for what it holds;
// any other is unusable.
func failedOutbox(ob outboxState, err error) outboxState {
	ob.err = err
	if UnusableOutbox(err) {
		ob.unusable = true
		return ob
	}
	errors.As(err, &ob.storage) // true: neither unusable nor a schema's (readOutbox took those)
	n, complete, err := outbox.Peek(ob.path)
	switch {
	case err != nil:
		ob.peek = fmt.Sprintf("what it holds is not known (a read-only look failed too: %v)", err)
	case !complete:
		ob.peek = fmt.Sprintf("it holds at least %d queued write(s) not yet on the primary, which stay there (its -wal could not be read)", n[outbox.Queued]+n[outbox.Inflight])
	default:
		ob.peek = fmt.Sprintf("it holds %d queued write(s) not yet on the primary, which stay there", n[outbox.Queued]+n[outbox.Inflight])
	}
	return ob
}

// UnusableOutbox says whether err, an outbox's open's, is outbox-dead's:
// the file is no usable outbox (corrupt, not a database), neither its file
// system's fault (outbox.StorageError), another release's schema, nor a
// lock another process holds past the busy retries (review33 R4: a
// healthy outbox, whose unsent writes moving it aside would lose), which
// leave it whole.
func UnusableOutbox(err error) bool {
	return err != nil && !errors.Is(err, outbox.ErrOlderSchema) && !errors.Is(err, sqlitewal.ErrNewerSchema) && !errors.As(err, new(*outbox.StorageError)) && !sqlitewal.Busy(err)
}

// CheckOutbox is outbox-dead and outbox-backlog (§4.3): writes the edge
// gave up on, and how long the oldest queued write has waited; and
// outbox-copied.
func CheckOutbox(opts Options, ob outboxState) []Finding {
	if !ob.exists {
		return nil
	}
	if ob.err != nil {
		recs, _ := outbox.ReadStayedLocal(ob.path) // unreadable too: the outbox's finding stands alone
		return append([]Finding{unreadableOutbox(opts, ob)}, stayedLocals(opts, ob.path, recs)...)
	}
	var out []Finding
	if f, ok := deadOps(opts, ob); ok {
		out = append(out, f)
	}
	if n := ob.stats.ByState[outbox.Held]; n > 0 {
		out = append(out, Finding{ID: IDOutboxHeld, Severity: Error, Section: "§5",
			Message: fmt.Sprintf("%d write(s) in %s are held, unsent: they were made while %s did not parse, and whether they replicate is not known until it does", n, ob.path, filepath.Join(filepath.Dir(ob.path), "policy.json")),
			Fix:     "fix policy.json (`devbox-config edge status` shows its error); the running edge, or `devbox-config edge flush`, then sends them"})
	}
	if n := ob.stats.ByState[outbox.InDoubt]; n > 0 {
		msg := fmt.Sprintf("%d write(s) in %s are in doubt: each may or may not have reached the primary, and no MemPalace tool can look it up", n, ob.path)
		id := "ID"
		if len(ob.stats.InDoubt) > 0 {
			d := ob.stats.InDoubt[0]
			msg += fmt.Sprintf("; the first is %s op %s", d.Tool, d.Short())
			id = d.Short()
		}
		out = append(out, Finding{ID: IDOutboxInDoubt, Severity: Warn, Section: "§4.3", Message: msg,
			Fix: fmt.Sprintf("check the primary for it, then `devbox-config edge outbox delivered %s` if it is there, or `devbox-config edge outbox retry %s` to send it again", id, id)})
	}
	if n := ob.stats.OrphanedIntents; n > 0 {
		out = append(out, Finding{ID: IDOutboxIntents, Severity: Warn, Section: "§4.3",
			Message: fmt.Sprintf("%d write(s) in %s were put in the outbox before the local palace answered, by an edge stopped or killed since: an edge running on this palace sends them within its lease (MEMPALACE_EDGE_LEASE, 10 s by default); with none running, nothing sends them until one starts", n, ob.path),
			Fix:     "`devbox-config edge flush` sends them (or start any harness session in edge mode)"})
	}
	out = append(out, stayedLocals(opts, ob.path, ob.stats.StayedLocal)...)
	if e := ob.stats.StayedLocalErr; e != "" {
		out = append(out, Finding{ID: IDStayedLocalRecord, Severity: Warn, Section: "§4.3",
			Message: "the record of writes that stayed in the local palace only (a full disk) cannot be read, so none is reported: " + mailbox.Printable(opts.mask(e)),
			Fix:     StayedLocalRecordFix})
	}
	if f, ok := CopiedOutbox(ob.path, ob.stats.Copied, ob.device); ok {
		out = append(out, f)
	}
	if f, ok := backlog(opts, ob); ok {
		out = append(out, f)
	}
	return out
}

// backlog is outbox-backlog: writes queued longer than BacklogAge, or,
// with no edge to send them (back to solitary or remote), any: a note
// until they are that old (attack88 F8: deleting edge/ lost them for the
// primary, and nothing said they waited).
func backlog(opts Options, ob outboxState) (Finding, bool) {
	if ob.stats.OldestQueued == nil {
		return Finding{}, false
	}
	age := opts.Now().Sub(*ob.stats.OldestQueued)
	if age <= opts.BacklogAge && ob.edge {
		return Finding{}, false
	}
	n := ob.stats.ByState[outbox.Queued] + ob.stats.ByState[outbox.Inflight]
	f := Finding{ID: IDOutboxBacklog, Severity: Warn, Section: "§4.3",
		Message: fmt.Sprintf("%d write(s) wait in %s for the primary%s; the oldest was queued %s ago", n, ob.path, queuedFor(ob.stats), age.Round(time.Second)),
		Fix:     "make the primary reachable (see primary-* findings) and run the edge (any harness session flushes it), or `devbox-config edge flush`"}
	if ob.stats.LastErrorFrom(opts.env(ladder.EnvRemoteURL)) != "" && !ob.stats.LastErrorPast {
		// the primary's words, masked before Printable turns a line
		// break inside the token's wrapped base64 into a space
		f.Message += "; last error: " + mailbox.Printable(opts.mask(ob.stats.LastError))
	}
	if !ob.edge {
		f.Message += "; this devbox is not in edge mode, so no edge sends them (they are in the local palace)"
		primary := "the primary they are for (its URL is not recorded: queued by an older devbox-config)"
		if ob.stats.QueuedFor != "" {
			primary = "the primary they were queued for, " + shellword.Quote(mailbox.Printable(ob.stats.QueuedFor)) + " (with its credentials, if it had any: they are not recorded)"
		}
		f.Fix = fmt.Sprintf("before you delete %s: `devbox-config edge flush` with %s and %s set for %s sends them (`devbox-config edge status` shows them)", shellword.Quote(filepath.Dir(ob.path)), ladder.EnvRemoteURL, ladder.EnvRemoteToken, primary)
		if age <= opts.BacklogAge {
			f.Severity = Info
		}
	}
	return f, true
}

// queuedFor names the primary st's ops were queued for, if recorded.
func queuedFor(st outbox.Stats) string {
	if st.QueuedFor == "" {
		return ""
	}
	return " " + mailbox.Printable(st.QueuedFor)
}

// deadOps is outbox-dead for writes the primary refused for good.
func deadOps(opts Options, ob outboxState) (Finding, bool) {
	n := ob.stats.ByState[outbox.Dead]
	if n == 0 {
		return Finding{}, false
	}
	msg := fmt.Sprintf("%d write(s) in %s are dead: they are in the local palace but the primary refused them and they will never be sent", n, ob.path)
	if len(ob.stats.Dead) > 0 {
		d := ob.stats.Dead[0]
		msg += fmt.Sprintf("; the first is %s op %s (%s)", d.Tool, d.Short(), cmp.Or(outbox.Words(redact.JSONWith(d.Error, opts.mask)), "no error recorded")) // the primary's words, masked before Words makes them printable
	}
	return Finding{ID: IDOutboxDead, Severity: Error, Section: "§4.3", Message: msg,
		Fix: "`devbox-config edge outbox list` to see them and why (each holds back only the writes on its object); fix the cause, then `devbox-config edge outbox retry ID` (or `drop ID` to give up on one)"}, true
}

// unreadableOutbox is outbox-dead for an outbox doctor could not read
// (outbox-storage, outbox-older, outbox-newer where it says why).
func unreadableOutbox(opts Options, ob outboxState) Finding {
	if se := ob.storage; se != nil {
		return Finding{ID: IDOutboxStorage, Severity: Error, Section: "§4.3",
			Message: fmt.Sprintf("the outbox %s cannot be opened for writing: %s (%s). That is no damage to the file: %s; new writes cannot be queued until it opens", ob.path, se.Why(), opts.mask(se.Err.Error()), ob.peek),
			Fix:     se.Fix() + "; run doctor again to check"}
	}
	if errors.Is(ob.err, outbox.ErrOlderSchema) {
		return Finding{ID: IDOutboxOlder, Severity: Info, Section: "§4.3",
			Message: fmt.Sprintf("the outbox %s was made by an older devbox-config: the next edge start (any harness session in edge mode) or any `devbox-config edge` command brings it to this build's schema, keeping what it holds; doctor only reads, so its dead, held and backlog checks wait until then", ob.path),
			Fix:     "`devbox-config edge status` (it migrates the outbox and shows what waits), then run doctor again"}
	}
	if errors.Is(ob.err, sqlitewal.ErrNewerSchema) {
		return Finding{ID: IDOutboxNewer, Severity: Error, Section: "§4.3",
			Message: "this build cannot read the outbox: " + opts.mask(ob.err.Error()),
			Fix:     "run the devbox-config release that made it, or a newer one (rolling back is not supported: docs/operator.md, Upgrading (and rolling back)); keep the file: it holds the queued writes"}
	}
	f := Finding{ID: IDOutboxDead, Severity: Error, Section: "§4.3",
		Message: "cannot read the outbox: " + opts.mask(ob.err.Error()),
		Fix:     "run doctor again once no edge is busy on this palace; if it persists, `devbox-config edge outbox list` shows the outbox"}
	if ob.unusable {
		f.Fix = unusableOutboxFix(ob.path)
	}
	return f
}

// stayedLocals is outbox-stayed-local for each primary's record.
func stayedLocals(opts Options, path string, recs []outbox.StayedLocal) []Finding {
	var out []Finding
	for _, sl := range recs {
		out = append(out, stayedLocal(path, sl, opts.env(ladder.EnvRemoteURL)))
	}
	return out
}

// stayedLocal is outbox-stayed-local: writes the outbox could not record
// (outbox.StayedLocal), which no op sends. now is the primary this palace
// replicates to now ("": none): a record for another (the palace moved,
// or that primary is gone for good) is cleared by no join to now's.
func stayedLocal(path string, sl outbox.StayedLocal, now string) Finding {
	primary := mailbox.Printable(sl.Primary) // read from a file in the palace
	f := Finding{ID: IDOutboxStayedLocal, Severity: Warn, Section: "§4.3",
		Message: fmt.Sprintf("%d write(s) stayed in the local palace only: the outbox %s could not record them (a full disk, a read-only mount, an outbox a newer devbox-config made, or a corrupt one) since %s, so no op sends them to the primary %s", sl.N, path, sl.Since.Local().Format(time.RFC3339), primary),
		Fix:     fmt.Sprintf("%s, run `devbox-config edge flush` (it sends the writes queued before; join refuses while a diary entry it would send is still queued), then `devbox-config join` to %s: it compares this palace with the primary by content and sends what the primary lacks", outbox.OnceItTakesWrites, primary)}
	if now != "" && !outbox.SamePrimary(sl.Primary, now) {
		record := shellword.Quote(filepath.Join(filepath.Dir(path), outbox.StayedLocalFile))
		f.Fix = fmt.Sprintf("this palace now replicates to %s, not %s: `devbox-config join` sends what that primary lacks (by content, these writes among it); if %s is gone for good, the record of it is then only a count: remove %s once no edge runs on this palace (the next edge start makes it again)",
			mailbox.Printable(ladder.RedactURL(now)), primary, primary, record)
	}
	return f
}

// StayedLocalRecordFix is the fix for an unreadable
// <palace>/edge/stayed-local.json, for doctor and `edge status`.
const StayedLocalRecordFix = "remove it (only the count of such writes is lost: `devbox-config join --dry-run` shows what the primary lacks, and `devbox-config join` sends it); the next edge start makes it again"

// unusableOutboxFix is the fix for an outbox nothing can open: no
// devbox-config command reads it, so it is moved aside whole (its -wal
// holds writes the main file may lack) and kept, the loss said, and the
// sqlite3 shell's .recover named as the one way to look inside.
func unusableOutboxFix(path string) string {
	kept, q := path+".broken", shellword.Quote
	return fmt.Sprintf("stop every edge on this palace (end its harness sessions), then move the file aside with its -wal and -shm, keeping them: "+
		"`mv %[1]s %[2]s; mv %[3]s %[4]s; mv %[5]s %[6]s` (the last two if they exist); the next edge starts a new, empty outbox. "+
		"Lost with it: writes queued there and not yet on the primary (they stay in the local palace, and nothing sends them), dead and in-doubt ops, and the edge's record of deletes (merged reads may show the primary's copy of something deleted here). "+
		"To see what it held, if the sqlite3 shell is installed: `sqlite3 %[2]s .recover > outbox-recovered.sql`, then look for ops rows whose state is not 'done' (tool_name, payload_json) and redo those writes through the agent",
		q(path), q(kept), q(path+"-wal"), q(kept+"-wal"), q(path+"-shm"), q(kept+"-shm"))
}
