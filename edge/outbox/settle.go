package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// deadAtOnce reads a failed send of op that no later try can change: an
// edge's replay of a drawer an admin deleted on the primary (told, Kind's
// doc), arguments refused as written (invalid), and an ack of an event the
// device does not know (unknownEvent), a checkpoint over a gateway's
// batch cap (batchCapped). final: the op is dead now.
// asWritten: refused as written, so it never lands as it is and holds
// nothing back (its causal keys go): the write the agent makes anew,
// corrected, on the same objects is sent. The other two are retried once
// a restore or a grant lets them through, so they keep their place.
func deadAtOnce(op Op, kind Kind, msg string, sendErr error) (k Kind, why string, final, asWritten bool) {
	msg = strings.ReplaceAll(msg, "<op>", op.Short()) // the gateway's words name no op: these do
	switch {
	case deletedOnPrimary(sendErr):
		return DeletedOnPrimary, msg, true, false
	case changedOnPrimary(sendErr):
		return ChangedOnPrimary, msg, true, false
	case unknownEvent(op, kind, msg):
		return kind, msg + " (" + UnknownEvent + "; not tried again: only the gateway's operator can make another's event visible, `gateway device set --coordinator`, after which `devbox-config edge outbox retry` sends it)", true, false
	case batchCapped(sendErr):
		return kind, msg + " (refused as written, whatever a grant: not tried again, nor sent again; the checkpoint stays in this device's palace)", true, true
	case invalid(kind, msg, sendErr):
		why := " (refused as written, whatever a grant: not tried again; write it anew, corrected)"
		switch {
		case strings.Contains(msg, "metadata exceeds maximum size"):
			why = " (MemPalace counts metadata re-encoded by Python's json.dumps, a space after every , and :, with the edge_op_id of 82 bytes the edge adds for exactly-once; an edge of this release refuses such metadata when it is made, naming that size; not tried again)"
		case OpIDReused(msg):
			why = " (not tried again; " + ReusedAdvice + ")"
		}
		return kind, msg + why, true, true
	}
	return kind, msg, false, false
}

// endedNothing reports an end neither palace held at its last refusal:
// refused before like any end the primary lacks (its add may still land
// from another palace of this device, and the end after it), it is then
// done, as ending nothing, rather than dead holding its lane. A join's
// ops are never so (their Ordinal counts copies).
func (f *Flusher) endedNothing(op Op, sendErr error) bool {
	return !f.History && endsNothing(op, sendErr) && op.Refusals+1 >= f.MaxRefusals
}

// settle records an attempt's outcome by the failure table (failure.go)
// and reports whether the op reached the primary. A record that cannot be
// written (the lease lost, the file unwritable) is logged: the op stays
// in flight, which the next attempt treats as maybe applied (its
// look-ups, or the gateway's ledger, keep it exactly once).
func (f *Flusher) settle(ctx context.Context, op Op, res map[string]any, sendErr error) bool {
	now := f.S.now()
	kind, msg := classify(res, sendErr)
	deleted := deletedOnPrimary(sendErr)
	nothing := f.endedNothing(op, sendErr)
	if nothing && op.Tool == catalogue.Prefix+"kg_supersede" {
		return f.asAdd(ctx, op, msg, now)
	}
	if kind == "" || alreadyGone(op, kind, msg) || nothing || deleted && f.History {
		f.done(ctx, op, res, kind, msg, deleted, now)
		return true
	}
	kind, msg, final, asWritten := deadAtOnce(op, kind, msg, sendErr)
	rule := Rules[kind]
	refusals := op.Refusals
	if rule.CountsTowardDead {
		refusals++
	}
	state, say := f.failedState(ctx, op, kind, msg, refusals, final, asWritten, sendErr)
	ej := failureJSON(kind, msg, now, op.Attempts, timeoutsOf(op), asWritten)
	next := now.Add(f.backoff(op.Attempts, kind))
	cancelled, recorded := false, false
	err := f.fenced(ctx, func(tx *sql.Tx) (err error) {
		recorded, err = asLeft(tx.ExecContext(ctx, `UPDATE ops SET state=?, error_json=?, next_attempt_at=?, refusals=?, maybe_applied=(maybe_applied OR ?), resend=(resend AND NOT ?) WHERE `+leftAs,
			state.String(), string(ej), next.UnixMilli(), refusals, rule.MaybeApplied, resendTaken(op, kind, sendErr), op.LocalSeq, op.State.String(), op.Attempts))
		if err != nil {
			return err
		}
		if err := f.noteLastError(ctx, tx, op.Tool, msg, now); err != nil {
			return err
		}
		if !recorded { // an operator settled it meanwhile: theirs stands
			return noteNotLanded(ctx, tx, op, kind, msg)
		}
		if state == Dead {
			return diedIn(ctx, tx, op, asWritten)
		}
		if state != Queued {
			return nil
		}
		cancelled, err = takeBackRequeued(ctx, tx, op, now) // deleted here while it was in flight
		return err
	})
	switch {
	case err != nil:
		f.Log.Error("outbox: a failed attempt not recorded", "op", op.Short(), "err", err)
	case !recorded:
		f.operatorFirst(ctx, op, "its attempt's outcome ("+kind.String()+") not recorded, nothing sent again")
	default:
		say()
		if cancelled {
			f.Log.Info("outbox op not sent, and deleted on this device while it was in flight: never sent", "op", op.Short(), "tool", op.Tool)
		}
	}
	f.S.notify(op.ID) // dead, in doubt, or queued with its error: a waiter learns it now
	return false
}

// diedIn records in tx what an op's death brings: its agent is told
// (news, read by DeadOps), and one dead as written (asWritten) lets go of
// its keys.
func diedIn(ctx context.Context, tx *sql.Tx, op Op, asWritten bool) error {
	if err := addNews(ctx, tx); err != nil {
		return err
	}
	if !asWritten {
		return nil
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM op_keys WHERE local_seq=?`, op.LocalSeq)
	return err
}

// timeoutsOf is how many of op's sends ran out of their bound, this one
// counted (Failure.Timeouts).
func timeoutsOf(op Op) int {
	n := FailureOf(op.Error).Timeouts
	if op.timedOut {
		n++
	}
	return n
}

// noteNotLanded notes on op, which an operator settled while its send was
// in flight, that the send did not land: not for a send that never left,
// nor for one that may have landed (InFlightAtSettle says so).
func noteNotLanded(ctx context.Context, tx *sql.Tx, op Op, kind Kind, msg string) error {
	if op.State != Inflight || Rules[kind].MaybeApplied {
		return nil
	}
	_, err := noteOnSettled(ctx, tx, op, "", NotLanded+" ("+kind.String()+"): "+msg, false)
	return err
}

// resendTaken reports whether a failed send of op may have reached the
// gateway (it refused it, held it in doubt, or its answer was lost),
// which ends an operator's resend (Op.Resend: one act, not a standing
// override): a later attempt is the edge's own, which the gateway's ledger
// checks, so a resend that landed unanswered is not sent unchecked again
// (review28 D2). One that never left, one answered "not now" or for the
// token alone, and a failed look-up leave it for the next attempt.
func resendTaken(op Op, kind Kind, sendErr error) bool {
	return op.State == Inflight && !errors.Is(sendErr, ErrLookup) && Rules[kind].Class != Transient
}

// failureJSON is the error_json of a failed attempt (timeouts: the op's
// sends that ran out of their bound, this one's included; asWritten:
// refused as written, deadAtOnce).
func failureJSON(kind Kind, msg string, now time.Time, attempt, timeouts int, asWritten bool) []byte {
	fields := map[string]any{"kind": kind, "class": Rules[kind].Class, "message": msg, "at": now.UTC(), "attempt": attempt}
	if asWritten {
		fields["as_written"] = true
	}
	if timeouts > 0 {
		fields["timeouts"] = timeouts
	}
	ej, err := json.Marshal(fields)
	if err != nil {
		ej = []byte(`{"kind":"` + kind.String() + `"}`) // msg held something JSON cannot encode
	}
	return ej
}

// leftAs is the WHERE of the flusher's record of an attempt (?1 the op's
// local_seq): the op still in the state (?2) and after the attempts (?3)
// the flusher left it in. An operator's drop, delivered or retry from
// another process meanwhile changed one or the other: the flusher's
// record is not made (asLeft false), and the operator's stands.
const leftAs = `local_seq=? AND state=? AND attempts=?`

// asLeft reports whether an UPDATE ... WHERE leftAs changed the op.
func asLeft(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// operatorFirst logs that something else settled op while the flusher
// was at it (an operator's drop, delivered or retry; a delete on this
// device): the flusher did only what says.
func (f *Flusher) operatorFirst(ctx context.Context, op Op, what string) {
	did := "changed it"
	if now, err := f.S.Get(ctx, op.LocalSeq); err != nil {
		did += " (unreadable now: " + err.Error() + ")"
	} else if k := FailureOf(now.Error).Kind; now.State == Done && k != "" {
		did = k.String()
	} else {
		did = "left it " + now.State.String()
	}
	f.Log.Info("outbox op settled elsewhere while this edge was sending it (an operator's command, or a delete on this device): that stands", "op", op.Short(), "tool", op.Tool, "settled", did, "flusher", what)
}

// noteLastError records a failed send as the outbox's last error: its
// words, its exact time (edge status tells a past one by it) and the
// primary it was sent to.
func (f *Flusher) noteLastError(ctx context.Context, tx *sql.Tx, tool, msg string, now time.Time) error {
	if err := setMeta(ctx, tx, "last_error", fmt.Sprintf("%s %s: %s", now.UTC().Format(time.RFC3339), tool, msg)); err != nil {
		return err
	}
	if err := setMeta(ctx, tx, metaLastErrorAt, now.UTC().Format(time.RFC3339Nano)); err != nil {
		return err
	}
	return setMeta(ctx, tx, metaLastErrorURL, f.url())
}

// failedState is what a failed send leaves op in (its refusals counted
// with this one): dead once refused for good or too often, in doubt when
// it may have landed and nothing can look it up, else queued; say says
// it in the log, once it is recorded (asWritten: a dead op that holds
// nothing back, deadAtOnce).
func (f *Flusher) failedState(ctx context.Context, op Op, kind Kind, msg string, refusals int, final, asWritten bool, sendErr error) (st State, say func()) {
	rec, _ := catalogue.Lookup(op.Tool)
	log := func(level slog.Level, words string, attrs ...any) func() {
		return func() { f.Log.Log(ctx, level, words, append([]any{"op", op.Short(), "tool", op.Tool}, attrs...)...) }
	}
	switch {
	case asWritten:
		return Dead, log(slog.LevelError, "outbox op is dead: the primary refused it as written; the ops sharing its keys go on ("+f.ListCommand+")", "err", msg)
	case refusals >= f.MaxRefusals || final:
		return Dead, log(slog.LevelError, "outbox op is dead: the primary refused it; the ops sharing its keys wait ("+f.ListCommand+")", "refusals", refusals, "err", msg)
	case kind == Lost && rec.Replay == catalogue.Unrepeatable && (!f.knownLedger(ctx) || isInDoubt(sendErr)),
		isInDoubt(sendErr) && op.MaybeApplied: // held in doubt though sent again after a look-up (an update edited over since)
		return InDoubt, log(slog.LevelError, "outbox op in doubt: it may have landed and nothing can look it up; devbox-config edge outbox retry (send it again) or delivered (it landed) settles it", "err", msg)
	case kind == Unauthorized:
		return Queued, log(slog.LevelError, "the primary refused the token; queued writes wait for a fixed MEMPALACE_REMOTE_TOKEN")
	}
	return Queued, log(slog.LevelDebug, "outbox op not sent; will retry", "kind", kind, "err", msg)
}

// done records a sent op as done: answered (kind ""), its object already
// gone, or refused by a gateway as what an admin deleted on the primary
// (deleted: nothing written, the note says why).
func (f *Flusher) done(ctx context.Context, op Op, res map[string]any, kind Kind, msg string, deleted bool, now time.Time) {
	result := []byte{}
	var err error
	if !deleted {
		result, err = json.Marshal(res)
	}
	note, kept, warning := f.doneNote(op, res, kind, msg, deleted, now)
	closed := kept != ""
	recorded := true
	if err == nil {
		err = f.fenced(ctx, func(tx *sql.Tx) error {
			if err := f.moveFence(ctx, tx, op, res); err != nil {
				return err
			}
			if closed { // its agent is told (DeadOps), found by its note
				if err := setMeta(ctx, tx, closedKey(op.ID), kept); err != nil {
					return err
				}
			}
			if warning != "" { // likewise
				if err := setMeta(ctx, tx, warnedNotes+op.ID, "1"); err != nil {
					return err
				}
			}
			var err error
			if recorded, err = settleSent(ctx, tx, op, now, string(result), note); err != nil || !recorded || note == "" || kind != "" {
				return err
			}
			return addNews(ctx, tx) // its agent is told (DeadOps)
		})
	}
	switch {
	case err != nil:
		f.Log.Error("outbox: a sent op's outcome not recorded", "op", op.Short(), "err", err)
	case !recorded:
		f.operatorFirst(ctx, op, "its answer (it reached the primary) noted on it, nothing sent again")
	}
	f.S.notify(op.ID)
}

// doneNote is the note a sent op is recorded done with ("": none), and
// what its agent is told of: kept, the closed key's value (the date a fact
// was closed already, or "held" for an add of a fact the primary holds
// current, or a supersede of one closed there while another value is
// current: gateway/kgorigin.go's supersedeHeld),
// and the gateway's warning on a coordination write.
func (f *Flusher) doneNote(op Op, res map[string]any, kind Kind, msg string, deleted bool, now time.Time) (note, kept, warning string) {
	switch {
	case deleted:
		f.Log.Info("the gateway did not file again what an admin deleted on the primary: done", "op", op.Short(), "tool", op.Tool, "answer", msg)
		note = noteOf(DeletedOnPrimary, msg, now)
	case kind != "":
		note = f.goneNote(op, msg, now)
	}
	if ended, _ := res["already_closed"].(string); ended != "" && kind == "" && op.Tool == catalogue.Prefix+"kg_invalidate" {
		f.Log.Info("the primary held the fact this invalidate ends closed already: done, nothing changed there", "op", op.Short(), "ended", ended)
		kept, note = ended, noteOf(AlreadyClosed, fmt.Sprint(res["note"]), now)
	}
	if by, held := res["held_by"].(string); held && kind == "" && (op.Tool == catalogue.Prefix+"kg_add" || op.Tool == catalogue.Prefix+"kg_supersede") {
		f.Log.Info("the primary held a fact current already that this add or supersede would file beside or again: done, nothing filed", "op", op.Short(), "tool", op.Tool, "held_by", by, "note", fmt.Sprint(res["note"])) // whole: what to do is its end (attack112 F3)
		kept, note = "held", noteOf(AlreadyCurrent, fmt.Sprint(res["note"]), now)
	}
	if warning = warnedOf(op, res, kind); warning != "" {
		f.Log.Warn("the gateway took a queued coordination write with a warning; its agent is told", "op", op.Short(), "tool", op.Tool, "warning", warning)
		note = noteOf(Warned, warning, now)
	}
	if words := leftOut(op, res); words != "" && kind == "" {
		f.Log.Info("the gateway left out of a checkpoint items an admin deleted on the primary: done", "op", op.Short(), "answer", words)
		note = noteOf(DeletedOnPrimary, words, now)
	}
	return note, kept, warning
}

// warnedOf is the gateway's warning on the answer of op, a coordination
// write it took ("": none; gateway/addressee.go).
func warnedOf(op Op, res map[string]any, kind Kind) string {
	w, _ := res["warning"].(string)
	if rec, _ := catalogue.Lookup(op.Tool); kind != "" || rec.Route != catalogue.CoordinationWrite {
		return ""
	}
	return w
}

// leftOut is what a checkpoint's answer says the gateway left out ("":
// nothing): "shared without N of its M items: …", naming their drawers.
// The gateway lists each item an admin deleted on the primary among the
// answer's errors, by rule origin.ReplayDeletedRule (gateway/replayitems.go).
func leftOut(op Op, res map[string]any) string {
	if op.Tool != catalogue.Prefix+"checkpoint" {
		return ""
	}
	errs, _ := res["errors"].([]any)
	var ids []string
	for _, e := range errs {
		m, _ := e.(map[string]any)
		item, _ := m["item"].(map[string]any)
		if m["rule"] != origin.ReplayDeletedRule || item == nil {
			continue
		}
		wing, _ := item["wing"].(string)
		room, _ := item["room"].(string)
		content, _ := item["content"].(string)
		ids = append(ids, catalogue.DrawerID(wing, room, content))
	}
	if len(ids) == 0 {
		return ""
	}
	named := strings.Join(ids[:min(len(ids), 3)], ", ")
	if len(ids) > 3 {
		named += fmt.Sprintf(" and %d more", len(ids)-3)
	}
	return fmt.Sprintf("shared without %d of its %d items: an admin deleted them on the primary (drawer %s); they stay in this devbox's palace only",
		len(ids), gjson.GetBytes(op.Payload, "items.#").Int(), named)
}

func isInDoubt(err error) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Code == ledger.CodeInDoubt
}

// settleDone marks an op done (with the primary's answer, or an
// operator's record in errJSON) and frees its causal keys.
func settleDone(ctx context.Context, tx *sql.Tx, seq int64, now time.Time, result, errJSON string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE ops SET state='done', flushed_at=?, result_json=COALESCE(NULLIF(?, ''), result_json), error_json=NULLIF(?, '') WHERE local_seq=?`, now.UnixMilli(), result, errJSON, seq); err != nil {
		return err
	}
	return freeDone(ctx, tx, seq, now, result)
}

// settleSent is settleDone of the op a send answered, as the flusher left
// it (leftAs), note its error_json ("": the write landed); recorded false:
// an operator settled it meanwhile. A drop or delivered stays, and the
// answer is noted on it: its result, and its message says the send landed
// (Landed), or what the primary answered instead (note's message: an
// object already gone, a checkpoint with items left out); as for an op
// settled by its answer, an answer the primary gave (result) ends its
// tombstones and sets last_flush (tookIt). A retry's queued op is sent
// again.
func settleSent(ctx context.Context, tx *sql.Tx, op Op, now time.Time, result, note string) (recorded bool, err error) {
	recorded, err = asLeft(tx.ExecContext(ctx, `UPDATE ops SET state='done', flushed_at=?, result_json=COALESCE(NULLIF(?, ''), result_json), error_json=NULLIF(?, '') WHERE `+leftAs,
		now.UnixMilli(), result, note, op.LocalSeq, op.State.String(), op.Attempts))
	if err != nil {
		return false, err
	}
	if recorded {
		return true, freeDone(ctx, tx, op.LocalSeq, now, result)
	}
	said := Landed
	if note != "" {
		said = "; the send in flight at the time reached the primary, which answered: " + FailureOf(json.RawMessage(note)).Message
	}
	noted, err := noteOnSettled(ctx, tx, op, result, said, note == "")
	if err != nil || !noted || result == "" {
		return false, err
	}
	return false, tookIt(ctx, tx, op.LocalSeq, now)
}

// noteOnSettled notes on op, which an operator settled done (dropped,
// delivered) while a send of it was in flight, that send's outcome: said
// ends its message, landed whether it landed, and result, the primary's
// answer ("": none), is kept. noted false: the op is not done.
func noteOnSettled(ctx context.Context, tx *sql.Tx, op Op, result, said string, landed bool) (noted bool, err error) {
	return asLeft(tx.ExecContext(ctx, `UPDATE ops SET result_json=COALESCE(NULLIF(?, ''), result_json), error_json=json_set(error_json, '$.message', json_extract(error_json, '$.message')||?, '$.landed', json(?))
		WHERE local_seq=? AND state='done' AND json_valid(error_json)`, result, said, strconv.FormatBool(landed), op.LocalSeq))
}

// NotLanded begins what ends the message of an op an operator settled
// while a send of it was in flight that the primary did not take (it
// refused it, said not now, or was not reached): the kind and words follow.
const NotLanded = "; but the send in flight at the time did not land"

// Landed ends the message of an op an operator settled (dropped,
// delivered) while a send of it was in flight that reached the primary.
const Landed = "; but the send in flight at the time reached the primary: it landed there"

// freeDone is what follows an op marked done: its causal keys freed,
// and for an op the primary took (result), tookIt.
func freeDone(ctx context.Context, tx *sql.Tx, seq int64, now time.Time, result string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM op_keys WHERE local_seq=?`, seq); err != nil {
		return err
	}
	if result == "" {
		return nil
	}
	return tookIt(ctx, tx, seq, now)
}

// tookIt is what follows an op the primary took: a delete's tombstones
// have done their work there, and last_flush is now.
func tookIt(ctx context.Context, tx *sql.Tx, seq int64, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE op_id<>'' AND op_id=(SELECT op_id FROM ops WHERE local_seq=?)`, seq); err != nil {
		return err
	}
	return setMeta(ctx, tx, "last_flush", now.UTC().Format(time.RFC3339Nano))
}

// metaLastErrorURL is the meta key of the primary URL the last failed
// send went to (last_error's).
const metaLastErrorURL = "last_error_url"

// metaLastErrorAt is when last_error was recorded, to the nanosecond
// (last_error's own time is to the second): a last_flush after it is a
// send that got through since (Stats.LastErrorPast).
const metaLastErrorAt = "last_error_at"

// url is the URL the flusher sends to ("": its Primary names none).
func (f *Flusher) url() string {
	if t, ok := f.P.(URLTarget); ok {
		return t.URL()
	}
	return ""
}

// backoff is exponential in the op's attempts with full jitter, capped;
// the caller persists it. An op that keeps failing waits longer each
// time: nothing but an operator (or, for an op that never reached the
// primary, its recovery) resets it.
func (f *Flusher) backoff(attempts int, kind Kind) time.Duration {
	if kind == Unauthorized {
		return f.MaxDelay
	}
	d := f.BaseDelay << min(max(attempts-1, 0), 20)
	if d > f.MaxDelay || d <= 0 {
		d = f.MaxDelay
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// ClearBackoff makes every queued op due now (not the dead or in-doubt
// ones, which wait for an operator): `edge flush` means "send it now".
func (s *Store) ClearBackoff(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `UPDATE ops SET next_attempt_at=0 WHERE state IN ('queued','inflight')`)
	return err
}

// Resume is the primary's recovery, or its first answer to an edge that
// starts, the token accepted: the ops whose last attempt never reached it
// or was refused for the token (the kinds Rules marks ResetWhenUp) are
// due now (an op whose own send failed keeps its backoff), and the flusher
// wakes. An error leaves the backoff as it was.
func (s *Store) Resume(ctx context.Context) error {
	var errs []error
	for k, r := range Rules {
		if r.ResetWhenUp {
			errs = append(errs, s.dueNow(ctx, k))
		}
	}
	s.Kick()
	return errors.Join(errs...)
}

// failedAs selects the pending ops whose last attempt failed as a kind.
const failedAs = `state IN ('queued','inflight') AND json_extract(error_json,'$.kind')=?`

// dueNow makes the pending ops whose last attempt failed as kind due now.
func (s *Store) dueNow(ctx context.Context, kind Kind) error {
	_, err := s.flushDB.ExecContext(ctx, `UPDATE ops SET next_attempt_at=0 WHERE `+failedAs, kind.String())
	return err
}

// retriable counts the pending ops whose last attempt lost its answer or
// was answered "not now" (Drain sends them again).
func (s *Store) retriable(ctx context.Context) (int, error) {
	var n int
	err := s.flushDB.QueryRowContext(ctx, `SELECT count(*) FROM ops WHERE state IN ('queued','inflight') AND json_extract(error_json,'$.kind') IN (?,?)`, Lost.String(), Busy.String()).Scan(&n)
	return n, err
}

// goneNote is the note of a delete the primary answered "Drawer not
// found" (msg), done: gone there already, or, for a diary entry whose copy
// on the primary is not known (op.unnamed), not known to be gone: the
// primary may hold it under another id.
func (f *Flusher) goneNote(op Op, msg string, now time.Time) string {
	words := "already gone on the primary, nothing left to delete (" + msg + ")"
	switch {
	case op.Tool == catalogue.Prefix+"kg_invalidate":
		words = "neither the primary nor this devbox's palace held this fact, open or closed: nothing to end (" + msg + ")"
		f.Log.Info("a queued end of a fact no palace holds: done, nothing to end", "op", op.Short())
	case len(op.unnamed) > 0:
		words = "the primary holds no drawer by this id (" + msg + "), but it may hold this device's diary entry under another id (its own timestamp), which this outbox does not know: the entry may still be there; `devbox-config edge status` names what the primary still holds"
		f.Log.Warn("a queued delete of a diary entry named no copy on the primary: the primary may still hold the entry under another id", "op", op.Short(), "tool", op.Tool, "answer", msg)
	default:
		f.Log.Info("a queued delete's drawer is already gone on the primary: done", "op", op.Short(), "tool", op.Tool, "answer", msg)
	}
	return noteOf(Gone, words, now)
}

// noteOf is the error_json of an op settled done without the write it
// asked for.
func noteOf(kind Kind, message string, now time.Time) string {
	b, _ := json.Marshal(map[string]any{"kind": kind, "message": message, "at": now.UTC()}) // plain values: they encode
	return string(b)
}
