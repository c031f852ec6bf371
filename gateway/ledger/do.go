package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Do answers one tools/call carrying an op id. The first call with
// (c.Device, c.OpID) runs forward (the upstream call) and records its
// answer if the answer says the write was applied; a later one gets the
// recorded answer, under its own request id, without running forward; a
// duplicate while the first is in flight waits for it.
//
// forward must use the context it is given: it is not cancelled when ctx
// is (the answer is recorded even if the caller has hung up), only after
// Options.StaleAfter. An error from forward (a transport failure) is
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
	k := key{c.Device, c.OpID}
	for {
		l.mu.Lock()
		f := l.flights[k]
		if f == nil {
			// errAbandoned stands if forward panics: the duplicates waiting
			// are released with an error, not an empty answer.
			f = &flight{call: c, done: make(chan struct{}), err: errAbandoned}
			l.flights[k] = f
			l.mu.Unlock()
			defer func() {
				if f.err == errAbandoned && f.claim != "" {
					// Reopen the key at once rather than after StaleAfter.
					l.settle(context.WithoutCancel(ctx), c, f.claim, nil)
				}
				l.mu.Lock()
				delete(l.flights, k)
				l.mu.Unlock()
				close(f.done)
			}()
			f.ans, f.out, f.err = l.lead(ctx, c, forward, &f.claim)
			return f.ans, f.out, f.err
		}
		l.mu.Unlock()
		if err := sameWrite(f.call, c); err != nil {
			return Answer{}, "", err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Answer{}, "", ctx.Err()
		}
		if f.err != nil {
			if isCtxErr(f.err) && ctx.Err() == nil {
				continue // the first caller gave up waiting; this one has not
			}
			return Answer{}, "", f.err
		}
		return Answer{Status: f.ans.Status, Body: WithID(f.ans.Body, c.RequestID)}, OutcomeJoined, nil
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func sameWrite(first, c Call) error {
	if first.Tool != c.Tool || first.ArgsDigest != c.ArgsDigest {
		what := "other arguments"
		if first.Tool != c.Tool {
			what = "tool " + first.Tool
		}
		return fmt.Errorf("ledger: device %s, op id %s: %w (first used with %s; now %s)", c.Device, c.OpID, ErrReused, what, c.Tool)
	}
	return nil
}

// lead is Do for the first caller of a key in this process.
func (l *Ledger) lead(ctx context.Context, c Call, forward func(context.Context) (Answer, error), claimed *string) (Answer, Outcome, error) {
	claim, recorded, err := l.claim(ctx, c)
	if err != nil {
		return Answer{}, "", err
	}
	*claimed = claim
	if recorded != nil {
		return Answer{Status: 200, Body: response(c.RequestID, recorded)}, OutcomeReplayed, nil
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opt.StaleAfter)
	ans, ferr := forward(fctx)
	cancel()
	// Bookkeeping survives the caller hanging up, so no row stays inflight
	// (busy_timeout bounds it).
	bctx := context.WithoutCancel(ctx)
	result, ok := Recordable(ans)
	if ferr == nil && ok {
		if err := l.settle(bctx, c, claim, result); err != nil {
			l.opt.Log.Error("op-id ledger: answer not recorded; a retry will be forwarded again", "device", c.Device, "op_id", c.OpID, "err", err)
			return ans, OutcomeUnrecorded, nil
		}
		return ans, OutcomeForwarded, nil
	}
	if err := l.settle(bctx, c, claim, nil); err != nil {
		l.opt.Log.Error("op-id ledger: claim not released; a retry waits until it is stale", "device", c.Device, "op_id", c.OpID, "err", err)
	}
	if ferr != nil {
		return Answer{}, "", ferr
	}
	return ans, OutcomeUnrecorded, nil
}

// claim takes the key for this process (returning its claim token) or
// returns the recorded result. It waits, polling, while another process
// holds a fresh claim.
func (l *Ledger) claim(ctx context.Context, c Call) (claim string, recorded []byte, err error) {
	claim = fmt.Sprintf("%s-%d", l.instance, l.claims.Add(1))
	wait := 2 * time.Millisecond
	// Each statement is short and bounded by busy_timeout; a cancellable
	// context would cost the driver a watcher goroutine per statement.
	// ctx ends the wait between polls.
	sctx := context.WithoutCancel(ctx)
	for {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		now := l.opt.Now().UnixMilli()
		res, err := l.stmt.insert.ExecContext(sctx, c.Device, c.OpID, c.Tool, c.ArgsDigest, claim, now, now)
		if err != nil {
			return "", nil, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if n, _ := res.RowsAffected(); n == 1 { // unknown reads as not inserted: the row is read next
			l.committed()
			l.maybePrune(now)
			return claim, nil, nil
		}
		var first Call
		var state string
		var result sql.NullString
		err = l.stmt.get.QueryRowContext(sctx, c.Device, c.OpID).
			Scan(&first.Tool, &first.ArgsDigest, &state, &result)
		if errors.Is(err, sql.ErrNoRows) {
			continue // pruned between the two statements
		}
		if err != nil {
			return "", nil, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if err := sameWrite(first, c); err != nil {
			return "", nil, err
		}
		if state == "done" {
			return "", []byte(result.String), nil
		}
		res, err = l.stmt.take.ExecContext(sctx, claim, now, c.Device, c.OpID, now-(l.opt.StaleAfter+staleGrace).Milliseconds())
		if err != nil {
			return "", nil, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if n, _ := res.RowsAffected(); n == 1 { // unknown reads as not taken: the row is polled
			l.committed()
			return claim, nil, nil
		}
		// Another process is forwarding it: wait for its answer.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
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
