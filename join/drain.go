package join

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// drain sends the join outbox with the outbox's own Flusher (its per-type
// replay rules, its lease: two joins of one palace never send at once),
// through a Primary whose calls are counted. A record the primary refuses
// stays dead in the join outbox, holding back only the records on its
// object, and is reported with the command that lists it (a later join
// tries it again); a primary that accepts nothing for o.Stall, or refuses
// the token, ends the drain with the rest queued for the next run. The
// high-water mark is checkpointed every few seconds.
func (j *joining) drain(ctx context.Context) {
	defer j.lap("send")
	j.connect()
	if err := j.store.ClearBackoff(ctx); err != nil {
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()})
		return
	}
	st, err := j.store.Stats(ctx)
	if err != nil {
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()})
		return
	}
	if j.tries, err = j.attempts(ctx); err != nil {
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()})
		return
	}
	total := st.ByState[outbox.Queued] + st.ByState[outbox.Inflight]
	if total == 0 {
		j.rep.Failed = append(j.rep.Failed, j.stuck(ctx)...)
		return
	}
	j.o.Progress.Phase("sending", total)
	defer j.o.Progress.Done()
	// A gateway refuses the replay of what an admin deleted on the primary.
	ctx = origin.WithJoin(ctx)
	ids, err := j.localIDs(ctx)
	if err != nil {
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()})
		return
	}
	ctx = origin.WithJoinDrawers(ctx, ids)
	if j.cfg.Device != "" {
		// A gateway attributes the writes to --origin-device (an admin's
		// join; any other device's only to itself): gateway/origin.
		ctx = origin.WithDevice(ctx, j.cfg.Device)
	}
	stop := j.watch(ctx)
	// A send's bound is the stall at most: one into a primary that hangs
	// ends within it (attack98 F4: the default 20 s came before the stall).
	f := &outbox.Flusher{S: j.store, P: j.flush, Log: j.log, Lease: j.cfg.Lease, SendTimeout: min(20*time.Second, j.o.Stall), MaxRefusals: 1, BaseDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second, History: true, Retries: -1, ListCommand: j.outboxCmd("list", "")}
	j.rep.Failed = append(j.rep.Failed, j.send(ctx, f, settledOps(st))...)
	stop()
	j.triedAnyway(context.WithoutCancel(ctx))
	stuck := j.stuck(context.WithoutCancel(ctx))
	j.rep.Failed = append(j.rep.Failed, stuck...)
	if slices.ContainsFunc(stuck, func(f Failure) bool { return strings.Contains(f.Error, "JSON-RPC error -31003") }) {
		j.grants(context.WithoutCancel(ctx)) // a gateway's refusals: the grants that let them through, as a dry run says
	}
	if n, oldest, err := j.store.Pending(context.WithoutCancel(ctx)); err == nil && n > 0 {
		j.markHighWater(oldest)
	}
}

// connect opens the primary (once), its calls counted.
func (j *joining) connect() {
	if j.primary != nil {
		return
	}
	j.primary = edge.NewPrimary(j.cfg.URL, j.cfg.Token, j.log, edge.PrimaryOptions{Timeout: j.cfg.Timeout, Version: j.cfg.Version, Quiet: true,
		ProbeMax: j.o.Stall / 4, // a primary back is used within the stall that would give up on it
		OnLedger: func(on bool) {
			if j.o.DryRun {
				return // a dry run writes nothing, an earlier join's outbox included
			}
			if err := outbox.RecordProtection(j.store, on); err != nil {
				j.log.Warn("the primary's protection not recorded in the join outbox", "err", err)
			}
		}})
	j.flush = countingPrimary{&counter{calls: j.rep.Calls, side: "primary"}, edge.FlushTarget(j.primary), &j.answered}
	j.sent = &callerOf{p: j.flush, stall: j.o.Stall}
}

// send drains with f until nothing sendable is left, the primary refuses
// the token or accepts nothing for o.Stall, or ctx ends. done is the ops
// settled before it (settledOps).
func (j *joining) send(ctx context.Context, f *outbox.Flusher, done int) []Failure {
	var failed []Failure
	lastProgress, inherited := time.Now(), !j.sent.quiet.IsZero()
	if inherited {
		lastProgress = j.sent.quiet // a look-up already waited for it: the stall is the run's, not the drain's
	}
	for ctx.Err() == nil {
		f.Drain(ctx) // an error is another process holding the lease: it sends, we wait
		st, err := j.store.Stats(ctx)
		if err != nil {
			return append(failed, Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()})
		}
		if d := settledOps(st); d != done {
			// from the primary's last answer, not the Drain's return: a
			// send cut unanswered after it took some is no progress
			done = d
			if at := time.Unix(0, j.answered.Load()); at.After(lastProgress) {
				lastProgress = at
			}
		}
		left := st.ByState[outbox.Queued] + st.ByState[outbox.Inflight]
		if left == 0 {
			return failed
		}
		if time.Since(lastProgress) > time.Second && j.allWaiting(ctx, st) {
			return failed // each op left waits behind a refused or in-doubt one: stuck reports them
		}
		if s := j.primary.State(); s == "unauthorized" {
			return append(failed, Failure{Kind: "primary", Record: "token", Error: fmt.Sprintf("the primary refused the token; %d records stay queued for the next run: %s", left, tokenFix)})
		} else if time.Since(lastProgress) > j.o.Stall && inherited && j.back(ctx) {
			inherited, lastProgress = false, time.Now() // back since the look-ups: the drain gets its own stall
		} else if time.Since(lastProgress) > j.o.Stall {
			j.sent.quiet = lastProgress // the look-ups after it do not wait for it again
			return append(failed, Failure{Kind: "primary", Record: "connection", Error: fmt.Sprintf("the primary accepted nothing for %s (%s); %d records stay queued: run devbox-config join again to resume (run devbox-config doctor to find why: it checks the primary, and a gateway's upstream behind it)", j.o.Stall, s, left)})
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return failed
}

// triedAnyway gives the drain's outcome to the records present could not
// ask the primary about (held: not queued) whose refused op an operator's
// retry queued meanwhile and the drain sent: its refusal, and the grants
// that let it through, are theirs, not "not tried: the primary was
// unreachable" (review30 F1).
func (j *joining) triedAnyway(ctx context.Context) {
	for i := range j.planned {
		p := &j.planned[i]
		n, queued := j.tries[p.op.ID]
		if !j.unasked[p.op.ID] || !queued {
			continue
		}
		op, err := j.store.Get(ctx, p.op.LocalSeq)
		if err != nil || op.Attempts <= n {
			continue // not sent (or unread): as present left it, counted not tried
		}
		delete(j.unasked, p.op.ID)
		p.held, p.unasked = false, ""
		j.rep.Pending[p.rec.Kind]++ // present took it off
	}
}

// back reports whether the primary, which a look-up found accepting
// nothing, answers a connect now: its breaker stays open until the
// prober's next probe (review30 F2: the drain gave up on a primary back
// since, at its first pass). One call timeout, for a primary still down.
func (j *joining) back(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	j.primary.Check(ctx) // what it found is Connected's
	return j.primary.Up() || j.primary.Connected()
}

// settledOps counts the ops settled (sent, refused or in doubt): one more
// is the drain's progress.
func settledOps(st outbox.Stats) int {
	return st.ByState[outbox.Done] + st.ByState[outbox.Dead] + st.ByState[outbox.InDoubt]
}

// allWaiting reports whether every op left waits behind another on its
// object (a refused or in-doubt op holds it): nothing more is sent until
// an operator settles those, so waiting longer would only delay the report.
func (j *joining) allWaiting(ctx context.Context, st outbox.Stats) bool {
	if st.ByState[outbox.Inflight] > 0 {
		return false
	}
	ops, err := j.store.List(ctx, 1<<30, outbox.Queued)
	if err != nil {
		return false // the stall's own deadline reports it
	}
	for _, op := range ops {
		if _, waits, err := j.store.Blocker(ctx, op); err != nil || !waits {
			return false
		}
	}
	return true
}

// attempts are the attempts of the ops to send, by op id.
func (j *joining) attempts(ctx context.Context) (map[string]int, error) {
	ops, err := j.store.List(ctx, 1<<30, outbox.Queued, outbox.Inflight)
	n := map[string]int{}
	for _, op := range ops {
		n[op.ID] = op.Attempts
	}
	return n, err
}

// outboxCmd is the `devbox-config edge outbox SUB --join [ID]` command
// that acts on this join's outbox, as it works where it is printed
// (Config.OutboxEnv first).
func (j *joining) outboxCmd(sub, id string) string {
	c := j.cfg.OutboxEnv + "devbox-config edge outbox " + sub + " --join"
	if id != "" {
		c += " " + id
	}
	return c
}

// stuck reports the ops that wait for an operator: refused (dead) or in
// doubt, each with the command that shows them. Those of wings --wing
// leaves out are not this run's: a note counts them. Those present could
// not ask the primary about are counted not tried (settle), not named
// with an earlier run's refusal.
func (j *joining) stuck(ctx context.Context) []Failure {
	ops, err := j.store.List(ctx, 1<<30, outbox.Dead, outbox.InDoubt)
	if err != nil {
		return []Failure{{Kind: "outbox", Record: j.obPath, Error: err.Error()}}
	}
	var failed []Failure
	others := 0
	for _, op := range ops {
		if j.unasked[op.ID] {
			continue
		}
		if slices.Contains(j.man.Narrowed, op.Wing) {
			others++
			continue
		}
		failed = append(failed, j.failureOf(op))
	}
	if others > 0 {
		j.rep.Notes = append(j.rep.Notes, fmt.Sprintf("%d records of wings --wing did not select wait in the join outbox (refused, or in doubt): a join that selects them reports them", others))
	}
	return failed
}

// watch reports progress (ops settled since it started: sent, refused or
// in doubt, as send counts them, so refused ops do not stall the rate and
// its ETA) and checkpoints the high-water mark every two seconds while the
// drain runs (the Flusher's Drain returns only when the queue is empty or
// its head cannot be sent); stop ends it, reports the last count and waits
// for it. It reads only the pending ops (Store.ToSend, Store.Pending): the
// done ops a join outbox keeps are never scanned.
func (j *joining) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	toSend0, err := j.store.ToSend(ctx)
	progress := func(ctx context.Context) {
		if n, serr := j.store.ToSend(ctx); serr == nil && err == nil {
			j.o.Progress.Set(toSend0 - n) // nothing is enqueued while the drain runs
		}
	}
	go func() {
		defer close(watched)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		lastCP := time.Now()
		for {
			select {
			case <-ctx.Done():
				progress(context.WithoutCancel(ctx))
				return
			case <-t.C:
			}
			progress(ctx)
			if time.Since(lastCP) <= 2*time.Second {
				continue
			}
			lastCP = time.Now()
			if n, oldest, perr := j.store.Pending(ctx); perr == nil && n > 0 {
				j.markHighWater(oldest)
			}
		}
	}()
	return func() { cancel(); <-watched }
}

// markHighWater checkpoints the high-water mark: the last local_seq before
// oldest, the first op still to send.
func (j *joining) markHighWater(oldest int64) {
	j.cp.HighWater = max(j.cp.HighWater, oldest-1)
	j.saveCheckpoint()
}

// failureOf names a refused op by its record.
func (j *joining) failureOf(op outbox.Op) Failure {
	kind := kindOfTool(op.Tool)
	var args map[string]any
	if err := json.Unmarshal(op.Payload, &args); err != nil {
		// the outbox stores canonical JSON objects; an op that is not one
		// is named by its id
		return Failure{Kind: kind, Record: op.Short(), Wing: op.Wing, Error: j.whyStuck(op)}
	}
	name := recordName(Record{Kind: kind, Args: args})
	if kind != Facts {
		c := []rune(str(args, "content") + str(args, "entry"))
		if len(c) > 60 {
			c = append(c[:60], '…')
		}
		where := op.Wing // a diary entry names no room
		if room := str(args, "room"); room != "" {
			where += "/" + room
		}
		name = fmt.Sprintf("%s: %q", where, string(c))
	}
	return Failure{Kind: kind, Record: name, Wing: op.Wing, Error: j.whyStuck(op)}
}

// whyStuck says why an op waits for an operator, and where to act on it.
func (j *joining) whyStuck(op outbox.Op) string {
	if op.State == outbox.InDoubt {
		return fmt.Sprintf("it may or may not have reached the primary, and nothing can look it up: see `%s`, then `%s` or `%s`", j.outboxCmd("list", ""), j.outboxCmd("retry", op.Short()), j.outboxCmd("delivered", op.Short()))
	}
	return fmt.Sprintf("the primary refused it: %s (op %s in the join outbox: `%s`; the next join tries it again, or `%s`)", errText(op.Error), op.Short(), j.outboxCmd("list", ""), j.outboxCmd("drop", op.Short()))
}

// allOps reads every op of the join outbox, by op id.
func allOps(ctx context.Context, s *outbox.Store) (map[string]outbox.Op, error) {
	out := map[string]outbox.Op{}
	if s == nil {
		return out, nil
	}
	ops, err := s.List(ctx, 1<<30, outbox.Queued, outbox.Inflight, outbox.Dead, outbox.Done)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		out[op.ID] = op
	}
	return out, nil
}

// priorOps indexes earlier runs' ops (allOps) by the write they carry;
// of two ops for one write, one that reached the primary wins.
func priorOps(ops map[string]outbox.Op) map[string]outbox.Op {
	out := map[string]outbox.Op{}
	for _, op := range ops {
		var args map[string]any
		if json.Unmarshal(op.Payload, &args) != nil {
			continue
		}
		k := keyOf(op.Tool, args, op.Ordinal)
		if cur, ok := out[k]; ok && cur.State == outbox.Done && len(cur.Error) == 0 {
			continue
		}
		out[k] = op
	}
	return out
}
