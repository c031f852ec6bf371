package outbox

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// Primary is what the flusher sends to: a tool call with the arguments'
// JSON bytes, sent as they are, returning the parsed JSON of the
// result's text. Errors: ErrUnauthorized, *RPCError, *HTTPError, an error
// wrapping ErrNotSent (the request never left), or anything else (a
// transport failure after sending: the call may or may not have landed).
type Primary interface {
	Call(ctx context.Context, tool string, args json.RawMessage) (map[string]any, error)
	Up() bool
}

// URLTarget is a Primary that names the URL it sends to: a failed send's
// last error is recorded with it (Stats.LastErrorURL), so that it is not
// taken for the primary's once .env names another.
type URLTarget interface {
	URL() string
}

// Flusher drains the outbox to the primary. Several processes may share
// one palace; the lease (lease.go) makes exactly one of them send.
//
// The story of one round: hold the lease (renewing it while anything is
// in flight); on each lane (palace writes, coordination writes) take the
// oldest op no earlier pending op shares a causal key with, that is due
// (none while one whose send ran out of its bound waits for its next
// send: behindStalled); send it with its record type's replay rule
// (replay.go); record what happened by the failure table (failure.go);
// take the next. A round ends
// when neither lane has anything due; the flusher then sleeps until the
// next backoff is due, an enqueue, the doorbell or the primary's recovery.
type Flusher struct {
	S     *Store
	P     Primary
	Log   *slog.Logger
	Owner string // this process's lease name
	// Lease is how long the lease holds between renewals (default 10 s);
	// it is renewed every Lease/3 while the flusher works, for at least
	// SendTimeout+Lease/3, so it outlasts a send of any bound while the
	// renewals succeed; a renewal that fails cuts the sends in flight.
	Lease time.Duration
	// SendTimeout bounds one send with its look-ups (default 20 s); an
	// op's send after one that ran out of its bound has twice that one's,
	// up to 16 times SendTimeout (sendBound).
	SendTimeout time.Duration
	// StopGrace is how long a send under way when Run or Drain is stopped
	// (its context ends) still has to get its answer, within SendTimeout
	// (default 3 s): the op then ends sent, or queued again when the
	// request never left, rather than in flight in doubt, which a delete
	// may not take back. A lease lost cuts the send at once.
	StopGrace time.Duration
	// MaxRefusals: attempts the primary refuses before an op is dead
	// (default 5). No other failure makes an op dead.
	MaxRefusals int
	// BaseDelay and MaxDelay bound the persisted backoff (500 ms, 5 min):
	// doubling with every attempt of the op, never reset while it keeps
	// failing (only an operator's retry, or the primary's recovery for an
	// op that never reached it, clears it).
	BaseDelay, MaxDelay time.Duration
	// History: the ops replay a palace's existing records (devbox-config
	// join, RFC 001 §4.4): a diary entry is looked up before it is sent
	// (the n-th of n equal local entries is on the primary when it holds
	// n). Otherwise (the edge's live writes) an entry is looked up only
	// after an attempt that may have landed.
	History bool
	// Poll is how often a flusher whose doorbell could not be bound (a
	// palace path too long for a Unix socket) re-checks the database for
	// another process's enqueue (default 100 ms).
	Poll time.Duration
	// Retention is how long done ops are kept (default 8 days: longer than
	// a gateway ledger's 7, so an op's outbox record outlives its
	// ledger record); Run prunes them at most every PruneEvery.
	Retention time.Duration
	// Retries bounds how often one Drain sends again an op whose answer was
	// lost, waiting up to Lease/10, 2·Lease/10, … for the primary's breaker
	// to close, before it gives up (default 3; negative: none, for a
	// caller that waits itself).
	Retries int
	// ListCommand is the command that lists this outbox's ops, named in
	// the log line of an op gone dead (default `devbox-config edge outbox
	// list`; a join's outbox is listed with --join).
	ListCommand string
	// Adopt, if set, resolves the intents and delete notes an edge process
	// that is gone left (as an edge's start does: ResolveIntents, then the
	// policy's release). Run calls it at its upkeep when it finds some:
	// another edge on this palace killed mid-write while this one runs.
	Adopt func(context.Context)

	held atomic.Pointer[lease] // nil: not held (mine)
	// stalled: per lane (catalogue.Lane), the local_seq (int64) of the op
	// whose send last ran out of its bound on a primary still up; the lane
	// sends nothing else while that op waits for its next send
	// (behindStalled).
	stalled   sync.Map
	lastPrune time.Time
	// others: another edge process, still running, has intents or delete
	// notes here; Run looks again within Lease, since its death rings no
	// doorbell.
	others bool
}

func (f *Flusher) defaults() {
	if f.Owner == "" {
		b := make([]byte, 6)
		crand.Read(b) // never fails (crypto/rand)
		f.Owner = fmt.Sprintf("edge-%d-%s", os.Getpid(), hex.EncodeToString(b))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&f.Lease, 10*time.Second)
	def(&f.SendTimeout, 20*time.Second)
	def(&f.StopGrace, 3*time.Second)
	def(&f.BaseDelay, 500*time.Millisecond)
	def(&f.MaxDelay, 5*time.Minute)
	def(&f.Poll, 100*time.Millisecond)
	def(&f.Retention, DefaultRetention)
	if f.MaxRefusals <= 0 {
		f.MaxRefusals = 5
	}
	if f.Retries == 0 {
		f.Retries = 3
	}
	if f.ListCommand == "" {
		f.ListCommand = "devbox-config edge outbox list"
	}
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
}

// Run flushes until ctx ends. While nothing can be sent (the queue is
// empty, what is left waits for an operator, the primary is down) it
// holds no lease and sleeps without a timer: an enqueue in this process,
// the doorbell (an enqueue in any process on this palace) or the
// primary's recovery wakes it. Only a backoff that is due later sets a
// timer, and so does another edge process's intent or delete note (its
// owner's death rings nothing: upkeep looks at its lock within Lease).
func (f *Flusher) Run(ctx context.Context) {
	f.defaults()
	defer f.release()
	b, err := f.S.listenBell()
	if err != nil {
		f.Log.Warn("no doorbell for other processes' writes; polling the outbox instead", "err", err, "every", f.Poll)
	} else {
		defer b.Close()
	}
	for ctx.Err() == nil {
		ok, err := f.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			f.Log.Error("outbox lease unreadable; trying again", "err", err)
		}
		if !ok {
			f.sleep(ctx, f.Lease/4) // another process flushes, or the database failed
			continue
		}
		f.upkeep(ctx)
		r := f.round(ctx)
		if r.attempted > 0 {
			continue
		}
		if r.wait >= idle {
			// Nothing to do: let any process take it when there is.
			f.release()
			var wait time.Duration // 0: no timer, a wake only
			if f.others {
				wait = f.Lease // upkeep looks at their owners again
			}
			if b != nil {
				f.sleep(ctx, wait)
			} else {
				f.pollUntilChanged(ctx, wait)
			}
			continue
		}
		f.sleep(ctx, min(r.wait, f.Lease/3))
	}
}

// idle is a lane's answer when nothing can be sent until something happens.
const idle = time.Hour

// roundResult is what one round did.
type roundResult struct {
	attempted, done int
	wait            time.Duration // until the next op is due (idle: none)
}

// round sends on both lanes at once whatever is due, until neither has
// anything due, renewing the lease meanwhile; a lease lost ends it.
func (f *Flusher) round(ctx context.Context) roundResult {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var keeper sync.WaitGroup
	keeper.Add(1)
	go func() { defer keeper.Done(); f.keepLease(ctx, stop, func() { cancel(errLeaseLost) }) }()
	lanes := []catalogue.Lane{catalogue.PalaceLane, catalogue.CoordinationLane}
	res := make([]roundResult, len(lanes))
	var wg sync.WaitGroup
	for i, lane := range lanes {
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = f.lane(ctx, lane) }()
	}
	wg.Wait()
	close(stop)
	keeper.Wait()
	out := roundResult{wait: idle}
	for _, r := range res {
		out.attempted += r.attempted
		out.done += r.done
		out.wait = min(out.wait, r.wait)
	}
	return out
}

// lane sends one lane's due ops, one at a time, until none is due, or
// only ops behind one whose send ran out of its bound are (behindStalled).
func (f *Flusher) lane(ctx context.Context, lane catalogue.Lane) roundResult {
	run := &flushRun{counts: map[string]map[string]int{}}
	r := roundResult{wait: idle}
	for ctx.Err() == nil {
		op, wait, err := f.due(ctx, lane)
		if err != nil {
			if ctx.Err() == nil {
				f.Log.Error("outbox read failed", "err", err)
			}
			r.wait = time.Second
			return r
		}
		if op == nil {
			r.wait = wait
			return r
		}
		if !f.P.Up() {
			return r // idle: the primary's recovery kicks us
		}
		if f.leaseLeft() < f.SendTimeout {
			if ok, err := f.acquire(ctx); !ok || err != nil {
				return r // the lease is another's now: nothing more is sent
			}
		}
		r.attempted++
		if f.attempt(ctx, run, *op) {
			r.done++
		}
	}
	return r
}

// attempt sends one op and records the outcome; it reports whether the
// op reached the primary.
func (f *Flusher) attempt(ctx context.Context, run *flushRun, op Op) bool {
	// Once an attempt may have landed, the op stays "maybe applied" until
	// it is done, whatever a later attempt's own error was (a look-up that
	// failed says nothing about the write).
	ambiguous := op.MaybeApplied || op.State == Inflight
	if dev := f.otherDevice(ctx, op); dev != "" {
		f.holdForDevice(context.WithoutCancel(ctx), op, dev)
		return false
	}
	if !ambiguous {
		pctx, cancel := context.WithTimeout(ctx, f.SendTimeout)
		err := f.prepareDiary(pctx, op)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return false // shutting down: the op was not sent, and is not in flight
		case err != nil:
			return f.settle(context.WithoutCancel(ctx), op, nil, err)
		}
	}
	payload, unnamed, err := f.S.primaryIDs(ctx, op) // a diary entry's edit or delete names its copy on the primary
	switch {
	case err != nil && ctx.Err() != nil:
		return false
	case err != nil:
		return f.settle(context.WithoutCancel(ctx), op, nil, fmt.Errorf("%w: %w", ErrLookup, err))
	}
	op.Payload, op.unnamed = payload, unnamed
	marked := false
	err = f.fenced(ctx, func(tx *sql.Tx) (err error) {
		marked, err = asLeft(tx.ExecContext(ctx, `UPDATE ops SET maybe_applied=CASE WHEN state='inflight' THEN 1 ELSE maybe_applied END, state='inflight', attempts=attempts+1
			WHERE `+leftAs, op.LocalSeq, op.State.String(), op.Attempts))
		return err
	})
	switch {
	case err != nil && ctx.Err() == nil:
		f.Log.Warn("outbox op not sent: its record could not be marked in flight", "op", op.Short(), "err", err)
	case err == nil && !marked:
		f.operatorFirst(ctx, op, "not sent")
	}
	if err != nil || !marked {
		return false
	}
	op.State, op.Attempts = Inflight, op.Attempts+1
	sctx, cancel := f.sendContext(ctx, f.sendBound(op))
	res, err := f.send(sctx, run, op, ambiguous)
	cut := err != nil && ctx.Err() != nil && sctx.Err() != nil
	op.timedOut = err != nil && ranOut(sctx) && f.P.Up() // on a live primary, not an outage (the breaker opened)
	cancel()
	if kind, _ := classify(res, err); op.timedOut {
		f.stalled.Store(op.Lane, op.LocalSeq)
	} else if Rules[kind].Class != Transient || lateBody(err) {
		f.stalled.CompareAndDelete(op.Lane, op.LocalSeq) // answered: the primary files (or refuses) again, or the link is too slow for this body alone
	}
	if cut && !errors.Is(err, ErrNotSent) {
		return false // cut after it may have left (past the grace, or the lease lost): the op stays in flight, maybe applied next time
	}
	return f.settle(context.WithoutCancel(ctx), op, res, err) // an answer (in the grace too), or never sent: queued again
}

// ranOut reports whether a send's context sctx reached its deadline, not
// cut (stopped, the lease lost): its Err may be nil still when the
// connection's deadline (warmconn's) ended the send first.
func ranOut(sctx context.Context) bool {
	dl, _ := sctx.Deadline()
	return !errors.Is(sctx.Err(), context.Canceled) && !time.Now().Before(dl)
}

// due is lane's next op to send (Store.next), none while the lane waits
// behind its stalled op (behindStalled).
func (f *Flusher) due(ctx context.Context, lane catalogue.Lane) (*Op, time.Duration, error) {
	if stall, err := f.behindStalled(ctx, lane); err != nil || stall > 0 {
		return nil, stall, err
	}
	return f.S.next(ctx, lane)
}

// behindStalled is how long lane waits for its op whose send last ran out
// of its bound on a primary that still answers (stalled): until that op is
// due again (its next send has twice the time); 0 once it is due, or has
// left the queue, or a send of it was answered other than "not now" (or
// "its body did not arrive in time": lateBody, which it never does over
// that link). A
// primary's write path can hang while it answers a ping (MemPalace
// answers it outside the lock its writes hold), so the breaker stays
// closed: this keeps such a hang to that one op, sent again as it comes
// due, not every op behind it, each sent into the hang to run out of its
// bound and be left maybe applied (review29 F1). On a slow link the ops
// behind a write cut at its bound wait for it to get through.
func (f *Flusher) behindStalled(ctx context.Context, lane catalogue.Lane) (time.Duration, error) {
	v, ok := f.stalled.Load(lane)
	if !ok {
		return 0, nil
	}
	op, err := f.S.Get(ctx, v.(int64))
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && op.State != Queued && op.State != Inflight:
		f.stalled.CompareAndDelete(lane, v)
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("outbox: the op a lane waits for: %w", err)
	}
	return max(op.NextAttemptAt.Sub(f.S.now()), 0), nil
}

// sendBound is how long one send of op may take: SendTimeout, doubled
// with each earlier send of the op that ran out of its bound (its
// error_json's timeouts), up to 16 times SendTimeout. A write that a slow
// primary or link cannot take within SendTimeout (a checkpoint of
// megabytes) is not cut at the same point on every send, each time sent
// whole again: a later send has the time it needs. An attempt that
// failed otherwise (paced, refused, never sent) says nothing of the time
// the write needs, and does not grow it.
func (f *Flusher) sendBound(op Op) time.Duration {
	return f.SendTimeout << min(FailureOf(op.Error).Timeouts, 4)
}

// sendContext bounds one send by bound. ctx ending (the flusher stopped)
// leaves it StopGrace more to get its answer; a lease lost cuts it at
// once (another process may be sending).
func (f *Flusher) sendContext(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), errLeaseLost) {
			cancel()
			return
		}
		time.AfterFunc(f.StopGrace, cancel) // a no-op once the send is over
	})
	return sctx, func() { stop(); cancel() }
}

// Drain sends everything sendable now and returns when nothing is left
// that can be sent (for `edge flush` and join). An op whose connection
// dropped after it was sent (a lost answer: the primary is there) is sent
// again, with its look-up, up to Retries times, waiting a little longer
// each time for the primary's breaker to close, and so is one the primary
// answered "not now" (busy: a gateway's write rate, whose refusals the
// flush target paces); an op that never reached the primary (it is down)
// is left for the next run.
func (f *Flusher) Drain(ctx context.Context) (sent int, err error) {
	f.defaults()
	defer f.release()
	for retries, fruitless := 0, 0; ctx.Err() == nil; {
		ok, err := f.acquire(ctx)
		if err != nil {
			return sent, err
		}
		if !ok {
			return sent, f.leaseHeld(ctx)
		}
		r := f.round(ctx)
		sent += r.done
		if r.done > 0 {
			fruitless = 0
			continue
		}
		if r.attempted > 0 && fruitless < 3 {
			fruitless++ // failed attempts due again already (a short backoff): a few more rounds
			continue
		}
		again, err := f.S.retriable(ctx)
		if err != nil {
			return sent, err
		}
		if again == 0 || retries >= f.Retries {
			return sent, nil // what never reached the primary waits for it: not retried here
		}
		retries++
		// Wait (polling) for the primary's breaker to close, a little
		// longer each time.
		for deadline := time.Now().Add(time.Duration(retries) * f.Lease / 10); !f.P.Up() && ctx.Err() == nil && time.Now().Before(deadline); {
			f.sleep(ctx, 50*time.Millisecond)
		}
		if err := errors.Join(f.S.dueNow(ctx, Lost), f.S.dueNow(ctx, Busy)); err != nil {
			return sent, err
		}
	}
	return sent, ctx.Err()
}

// pollUntilChanged waits for a wake or another process's commit (PRAGMA
// data_version), for an outbox whose doorbell could not be bound, or for
// d (0: no limit); a commit signals Kicked, as the doorbell's ring does.
func (f *Flusher) pollUntilChanged(ctx context.Context, d time.Duration) {
	var last int64 = -1
	for start := time.Now(); ctx.Err() == nil && (d == 0 || time.Since(start) < d); {
		select {
		case <-ctx.Done():
			return
		case <-f.S.wake:
			return
		case <-time.After(f.Poll):
		}
		var v int64
		if err := f.S.flushDB.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err == nil {
			if last >= 0 && v != last {
				f.S.signalKicked() // another process's commit: a drop's note, say, as a doorbell would say
				return
			}
			last = v
		}
	}
}

// sleep waits for a wake, or d (0: no timer, only a wake).
func (f *Flusher) sleep(ctx context.Context, d time.Duration) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
	case <-f.S.wake:
	case <-timeout:
	}
}
