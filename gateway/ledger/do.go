package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Do answers one tools/call carrying an op id. The first call with
// (c.Device, c.OpID) claims it, runs forward (the upstream call) and
// records its answer if the answer says the write was applied; a later
// one gets the recorded answer, under its own request id, without
// running forward. A call for an op id in flight is answered at once
// with ErrInFlight (retryable: the caller holds nothing, not even the
// gateway's write slot, which forward takes after the claim); one for an
// op id in doubt (its claim outlived its holder) with ErrInDoubt, unless
// c.Resend says why it may be forwarded again (OutcomeResent).
//
// forward must use the context it is given: it is not cancelled when ctx
// is (the answer is recorded even if the caller has hung up), only after
// Options.StaleAfter; Resent(ctx) tells it it forwards an op in doubt
// again. An error from forward (a transport failure) is
// returned as it is and nothing is recorded. ErrReused refuses a reuse of
// the op id; ErrUnavailable means the ledger could not be consulted and
// forward was not run. An answer that could not be recorded is returned
// with OutcomeUnrecorded and logged, not as an error: the write is made.
func (l *Ledger) Do(ctx context.Context, c Call, forward func(context.Context) (Answer, error)) (Answer, Outcome, error) {
	if c.Device == "" {
		return Answer{}, "", errors.New("ledger: a call needs a device")
	}
	if err := checkOpID(c.OpID); err != nil {
		return Answer{}, "", fmt.Errorf("ledger: op id: %w", err)
	}
	tk, err := l.claim(ctx, c)
	if err != nil {
		return Answer{}, "", err
	}
	if tk.recorded != nil {
		return Answer{Status: 200, Body: response(c.RequestID, tk.recorded), RecordOf: tk.recordOf}, OutcomeReplayed, nil
	}
	claim, resent := tk.claim, tk.resent
	settled := false
	defer func() {
		if !settled { // forward panicked: open the key again at once, not after StaleAfter
			l.settle(context.WithoutCancel(ctx), c, claim, nil)
		}
	}()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opt.StaleAfter)
	switch {
	case !resent:
		fctx = context.WithValue(fctx, firstSendKey{}, firstSend{l, c, claim})
	case !tk.held:
		fctx = context.WithValue(fctx, resentKey{}, true)
	}
	if resent && c.Resend != "operator" { // the operator's word sends it, whatever was noted
		fctx = context.WithValue(fctx, beforeKey{}, tk.before)
	}
	ans, ferr := forward(fctx)
	cancel()
	settled = true
	// Bookkeeping survives the caller hanging up, so no row stays inflight
	// (busy_timeout bounds it).
	bctx := context.WithoutCancel(ctx)
	result, ok := Recordable(ans)
	if ferr == nil && ok {
		if err := l.settle(bctx, c, claim, result); err != nil {
			l.opt.Log.Error("op-id ledger: answer not recorded; a retry will be forwarded again", "device", c.Device, "op_id", c.OpID, "err", err)
			return ans, OutcomeUnrecorded, nil
		}
		if resent {
			return ans, OutcomeResent, nil
		}
		return ans, OutcomeForwarded, nil
	}
	settleAs := l.settle
	if ferr == nil && ans.MaybeApplied {
		settleAs = l.settleInDoubt
	}
	if err := settleAs(bctx, c, claim, nil); err != nil {
		l.opt.Log.Error("op-id ledger: claim not released; the op stays in flight, then in doubt", "device", c.Device, "op_id", c.OpID, "err", err)
	}
	if ferr != nil {
		return Answer{}, "", ferr
	}
	return ans, OutcomeUnrecorded, nil
}

type resentKey struct{}

// Resent reports that a forward Do runs sends an op it held in doubt
// again (OutcomeResent) whose first send did not find its record on the
// upstream (Held): this device's op reached the upstream before without
// an answer, so what the upstream holds of it may be that send's.
func Resent(ctx context.Context) bool {
	on, _ := ctx.Value(resentKey{}).(bool)
	return on
}

type firstSendKey struct{}

// firstSend is the op a forward sends for the first time (not Resent).
type firstSend struct {
	l     *Ledger
	c     Call
	claim string
}

// Held records, in a forward Do runs that sends its op for the first
// time, before the send, that the upstream holds the op's record already
// (or could not say): a resend of the op, held in doubt, is then not
// Resent, whatever its own look-up finds, since what the upstream holds
// is not that send's (attack24 M1-M3). The record outlives a lost answer
// and a gateway stopping mid-forward; a send after one that was not
// applied is a first send again. Elsewhere (a resend, no op id) it does
// nothing. An error: the ledger could not be written (ErrUnavailable).
func Held(ctx context.Context) error {
	f, ok := ctx.Value(firstSendKey{}).(firstSend)
	if !ok {
		return nil
	}
	if _, err := f.l.stmt.held.ExecContext(context.WithoutCancel(ctx), f.c.Device, f.c.OpID, f.claim); err != nil {
		return fmt.Errorf("ledger %s: %w: %w", f.l.path, ErrUnavailable, err)
	}
	f.l.committed()
	return nil
}

type beforeKey struct{}

// NoteBefore records, in a forward Do runs that sends its op for the
// first time, before the send, what the forward found on the upstream
// (a diary room's size and newest entry: the gateway's settledDiary), so
// that a resend of the op, held in doubt after a lost answer or a gateway
// that stopped mid-forward, can compare it with what is there then
// (Before). Elsewhere it does nothing. An error: the ledger could not be
// written (ErrUnavailable).
func NoteBefore(ctx context.Context, seen string) error {
	f, ok := ctx.Value(firstSendKey{}).(firstSend)
	if !ok {
		return nil
	}
	if _, err := f.l.stmt.before.ExecContext(context.WithoutCancel(ctx), seen, f.c.Device, f.c.OpID, f.claim); err != nil {
		return fmt.Errorf("ledger %s: %w: %w", f.l.path, ErrUnavailable, err)
	}
	f.l.committed()
	return nil
}

// Before is, in a forward Do runs that sends an op it held in doubt
// again on the caller's look-up (not an operator's word), what the op's
// first send noted (NoteBefore); "" for none, and elsewhere.
func Before(ctx context.Context) string {
	s, _ := ctx.Value(beforeKey{}).(string)
	return s
}

func sameWrite(first, c Call) error {
	if first.Tool != c.Tool || first.ArgsDigest != c.ArgsDigest && (c.LegacyDigest == "" || first.ArgsDigest != c.LegacyDigest) {
		what := "other arguments"
		if first.Tool != c.Tool {
			what = "tool " + first.Tool
		}
		return fmt.Errorf("ledger: device %s, op id %s: %w (first used with %s; now %s)", c.Device, c.OpID, ErrReused, what, c.Tool)
	}
	return nil
}

// taken is what claim found: its claim token, or the recorded result.
// resent: a stale claim was taken over on the caller's word; held: its
// first send found its record there (Held); before: what its first send
// noted it found before sending (NoteBefore).
type taken struct {
	claim        string
	recorded     []byte
	recordOf     string // recorded is another device's (kin)
	resent, held bool
	before       string
}

// claim takes the key for this call, or returns the recorded result, or
// refuses at once: ErrInFlight while another claim is fresh, ErrInDoubt
// once it is stale and c.Resend says nothing.
func (l *Ledger) claim(ctx context.Context, c Call) (taken, error) {
	claim := fmt.Sprintf("%s-%d", l.instance, l.claims.Add(1))
	// Each statement is short and bounded by busy_timeout; a cancellable
	// context would cost the driver a watcher goroutine per statement.
	sctx := context.WithoutCancel(ctx)
	for try := 0; try < 3; try++ {
		now := l.opt.Now().UnixMilli()
		res, err := l.stmt.insert.ExecContext(sctx, c.Device, c.OpID, c.Tool, c.ArgsDigest, claim, now, now, c.QueuedAs)
		if err != nil {
			return taken{}, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if n, _ := res.RowsAffected(); n == 1 { // unknown reads as not inserted: the row is read next
			l.committed()
			l.maybePrune(now)
			return l.kin(sctx, c, claim)
		}
		var first Call
		var state, holder string
		var result sql.NullString
		var updated int64
		var held bool
		var before string
		err = l.stmt.get.QueryRowContext(sctx, c.Device, c.OpID).Scan(&first.Tool, &first.ArgsDigest, &state, &holder, &result, &updated, &held, &before)
		if errors.Is(err, sql.ErrNoRows) {
			continue // pruned between the two statements
		}
		if err != nil {
			return taken{}, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if err := sameWrite(first, c); err != nil {
			return taken{}, err
		}
		stale := now - (l.opt.StaleAfter + l.opt.StaleGrace).Milliseconds()
		holder = l.deadHolder(state, holder, updated, now)
		switch {
		case state == "done":
			return taken{recorded: []byte(result.String)}, nil
		case state == "inflight" && updated >= stale && holder == "":
			return taken{}, fmt.Errorf("ledger: device %s, op id %s: %w", c.Device, c.OpID, ErrInFlight)
		case (state == "inflight" || state == "doubt") && c.Resend == "":
			return taken{}, fmt.Errorf("ledger: device %s, op id %s: %w", c.Device, c.OpID, ErrInDoubt)
		}
		res, err = l.stmt.take.ExecContext(sctx, claim, now, c.Device, c.OpID, c.Resend != "", stale, holder)
		if err != nil {
			return taken{}, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if n, _ := res.RowsAffected(); n == 1 { // unknown reads as not taken: the row is read again
			l.committed()
			if state != "open" {
				l.opt.Log.Warn("op-id ledger: an op in doubt taken again on the caller's word (forwarded, unless the gateway logs it kept in doubt or found made)", "device", c.Device, "op_id", c.OpID, "why", c.Resend)
			}
			if state == "open" { // a first send again: it looks again
				return l.kin(sctx, c, claim)
			}
			return taken{claim: claim, resent: true, held: held, before: before}, nil
		}
	}
	// Taken by another call between the read and the take, three times.
	return taken{}, fmt.Errorf("ledger: device %s, op id %s: %w", c.Device, c.OpID, ErrInFlight)
}

// kin answers the first send of c's op, for which c's device holds
// claim, from the record of the same write (tool and arguments digest)
// under another device: the one c says the op was queued as, or one
// whose row says its op was queued as c's device or as the same device
// c names. So an op queued before a devbox was copied, sent by the copy
// under the old device and retried by the renamed original as the new
// one, is filed once whichever sends first (attack76 F7), and so is one
// retried by two renamed copies (attack81 F2). Another write under that
// op id is not looked at:
// the call is then the caller's own first send, answered as if it named
// no device, so a claim can neither refuse a device's write, nor answer
// it with another's, nor tell what another device sent (attack80 F1).
// The same write in flight elsewhere is ErrInFlight; in doubt, ErrInDoubt
// unless c.Resend says it was looked up. Otherwise c holds its claim.
func (l *Ledger) kin(ctx context.Context, c Call, claim string) (taken, error) {
	rows, err := l.stmt.kin.QueryContext(ctx, c.QueuedAs, c.OpID, c.Device, c.Tool, c.ArgsDigest, c.LegacyDigest)
	if err != nil {
		return taken{}, l.release(ctx, c, claim, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err))
	}
	var dev, state, holder, best string
	var result, recorded sql.NullString
	var updated, bestAt int64
	for rows.Next() {
		if err = rows.Scan(&dev, &state, &holder, &result, &updated); err != nil {
			break
		}
		switch now := l.opt.Now().UnixMilli(); {
		case state == "done":
			best, recorded = dev, result
		case state == "inflight" && updated >= now-(l.opt.StaleAfter+l.opt.StaleGrace).Milliseconds() && l.deadHolder(state, holder, updated, now) == "":
			best, bestAt = cmp.Or(best, dev), max(bestAt, 1) // in flight
		case c.Resend == "" && bestAt == 0:
			best, bestAt = cmp.Or(best, dev), -1 // in doubt
		}
	}
	rows.Close() // read only: Err reports
	if err = cmp.Or(err, rows.Err()); err != nil {
		return taken{}, l.release(ctx, c, claim, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err))
	}
	switch {
	case recorded.Valid:
		if err := l.settle(ctx, c, claim, []byte(recorded.String)); err != nil {
			return taken{}, err
		}
		return taken{recorded: []byte(recorded.String), recordOf: best}, nil
	case bestAt > 0:
		return taken{}, l.release(ctx, c, claim, fmt.Errorf("ledger: device %s, op id %s (sent by device %s): %w", c.Device, c.OpID, best, ErrInFlight))
	case bestAt < 0:
		return taken{}, l.release(ctx, c, claim, fmt.Errorf("ledger: device %s, op id %s (sent by device %s): %w", c.Device, c.OpID, best, ErrInDoubt))
	}
	return taken{claim: claim}, nil
}

// release opens c's op again (its claim sent nothing) and returns err.
func (l *Ledger) release(ctx context.Context, c Call, claim string, err error) error {
	if rerr := l.settle(ctx, c, claim, nil); rerr != nil {
		l.opt.Log.Error("op-id ledger: claim not released; the op stays in flight, then in doubt", "device", c.Device, "op_id", c.OpID, "err", rerr)
	}
	return err
}

// deadHolder is holder, the claim of an op (its state, taken at updated),
// when a process that has ended took it (live.go), so that it is in
// doubt: once StaleGrace has passed since it was taken, since the
// upstream may still be applying what the dead process forwarded (serve
// does not stop when its client hangs up), and a look-up before then
// could miss it and let the resend apply it twice. "" otherwise: no claim
// is "", and a live one is taken over only by time.
func (l *Ledger) deadHolder(state, holder string, updated, now int64) string {
	stale := now - (l.opt.StaleAfter + l.opt.StaleGrace).Milliseconds()
	young := updated > now-l.opt.StaleGrace.Milliseconds()
	if state != "inflight" || updated < stale || young || !l.claimGone(holder) {
		return ""
	}
	return holder
}

// Abandoned reports whether device's op opID is in flight under a claim
// whose process has ended (live.go), taken StaleGrace ago or more: no
// process forwards it any more, and the upstream is past applying it (a
// resend finds it in doubt, deadHolder). An op the ledger does not hold,
// or holds otherwise, is not.
func (l *Ledger) Abandoned(ctx context.Context, device, opID string) (bool, error) {
	var state, holder string
	var updated int64
	err := l.db.QueryRowContext(ctx, `SELECT state, claim, updated_at FROM ops WHERE device=? AND op_id=?`, device, opID).Scan(&state, &holder, &updated)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
	}
	young := updated > l.opt.Now().Add(-l.opt.StaleGrace).UnixMilli()
	return state == "inflight" && !young && l.claimGone(holder), nil
}

// settleInDoubt ends a claim whose forward reached the upstream without
// an answer: the op is in doubt (result is unused).
func (l *Ledger) settleInDoubt(ctx context.Context, c Call, claim string, _ []byte) error {
	if _, err := l.stmt.doubt.ExecContext(ctx, l.opt.Now().UnixMilli(), c.Device, c.OpID, claim); err != nil {
		return fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
	}
	l.committed()
	return nil
}

// settle ends a claim: records result (state done) or, with none, opens
// the key again. A claim taken over in the meantime is left alone.
func (l *Ledger) settle(ctx context.Context, c Call, claim string, result []byte) error {
	now := l.opt.Now().UnixMilli()
	var err error
	if result != nil {
		_, err = l.stmt.done.ExecContext(ctx, string(result), now, c.Device, c.OpID, claim)
	} else {
		_, err = l.stmt.reopen.ExecContext(ctx, now, c.Device, c.OpID, claim)
	}
	if err != nil {
		return fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
	}
	l.committed()
	return nil
}

// Applied records result as the answer of device's op opID when the
// ledger holds none for it (in doubt, open, or in flight past its
// holder's bound or in a process that ended: live.go): the operator's
// word that the write was applied (a restore of what a delete removed,
// which the op's resend must not delete again). ok: it did; an op
// answered already, or in flight now, is left alone.
func (l *Ledger) Applied(ctx context.Context, device, opID string, result []byte) (ok bool, err error) {
	now := l.opt.Now()
	stale := now.Add(-l.opt.StaleAfter - l.opt.StaleGrace).UnixMilli()
	var holder string
	err = l.db.QueryRowContext(ctx, `SELECT claim FROM ops WHERE device=? AND op_id=? AND state='inflight'`, device, opID).Scan(&holder)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
	}
	if !l.claimGone(holder) {
		holder = "" // no claim is "": one in flight is settled only by time
	}
	res, err := l.db.ExecContext(ctx, `UPDATE ops SET state='done', claim='', result=?, updated_at=? WHERE device=? AND op_id=?
		AND (state IN ('doubt','open') OR (state='inflight' AND (updated_at < ? OR claim = ?)))`, string(result), now.UnixMilli(), device, opID, stale, holder)
	if err != nil {
		return false, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
	}
	l.committed()
	n, err := res.RowsAffected()
	return n == 1, err
}
