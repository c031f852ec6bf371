package join

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// drain sends the join outbox with the outbox's own Flusher (its per-type
// replay rules, its lease: two joins of one palace never send at once).
// A record the primary refuses is reported and dropped so the rest move
// on (a later join queues it again); a primary that accepts nothing for
// o.Stall, or refuses the token, ends the drain with the rest queued for
// the next run. checkpoint gets the high-water mark every few seconds.
func drain(ctx context.Context, store *outbox.Store, primary outbox.Primary, state func() string, o Options, log *slog.Logger, checkpoint func(highWater int64)) []Failure {
	if err := store.ClearBackoff(ctx); err != nil {
		return []Failure{{Kind: "outbox", Record: store.Path(), Error: err.Error()}}
	}
	f := &outbox.Flusher{S: store, P: primary, Log: log, MaxPerm: 1, BaseDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second, History: true}
	st0, err := store.Stats(ctx)
	if err != nil {
		return []Failure{{Kind: "outbox", Record: store.Path(), Error: err.Error()}}
	}
	total := st0.ByState[outbox.Queued] + st0.ByState[outbox.Inflight] + st0.ByState[outbox.Dead]
	done0 := st0.ByState[outbox.Done]
	if total == 0 {
		return nil
	}
	o.Progress.Phase("sending", total)
	defer o.Progress.Done()

	// Progress and checkpoints while Drain runs (it returns only when the
	// queue is empty or its head cannot be sent).
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		lastCP := time.Now()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-t.C:
			}
			if st, err := store.Stats(watchCtx); err == nil {
				o.Progress.Set(st.ByState[outbox.Done] - done0)
			}
			if time.Since(lastCP) > 2*time.Second {
				lastCP = time.Now()
				if hw, ok := highWater(watchCtx, store); ok {
					checkpoint(hw)
				}
			}
		}
	}()

	var failed []Failure
	lastDone, lastProgress := done0, time.Now()
	for ctx.Err() == nil {
		f.Drain(ctx) // an error is another process holding the lease: it sends, we wait
		dead, _ := store.List(ctx, 1000, outbox.Dead)
		for _, op := range dead {
			failed = append(failed, failureOf(op))
			if _, err := store.Drop(ctx, op.ID); err != nil {
				log.Warn("could not drop a refused op", "op", op.ID[:12], "err", err)
			}
		}
		st, err := store.Stats(ctx)
		if err != nil {
			failed = append(failed, Failure{Kind: "outbox", Record: store.Path(), Error: err.Error()})
			break
		}
		if d := st.ByState[outbox.Done]; d != lastDone {
			lastDone, lastProgress = d, time.Now()
		}
		left := st.ByState[outbox.Queued] + st.ByState[outbox.Inflight] + st.ByState[outbox.Dead]
		if left == 0 {
			break
		}
		if s := state(); s == "unauthorized" {
			failed = append(failed, Failure{Kind: "primary", Record: "token", Error: fmt.Sprintf("the primary refused the token (check MEMPALACE_REMOTE_TOKEN); %d records stay queued for the next run", left)})
			break
		} else if time.Since(lastProgress) > o.Stall {
			failed = append(failed, Failure{Kind: "primary", Record: "connection", Error: fmt.Sprintf("the primary accepted nothing for %s (%s); %d records stay queued: run devbox-config join again to resume", o.Stall, s, left)})
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopWatch()
	<-watched
	if hw, ok := highWater(context.WithoutCancel(ctx), store); ok {
		checkpoint(hw)
	}
	return failed
}

// highWater is the last local_seq before the first op still to send.
func highWater(ctx context.Context, store *outbox.Store) (int64, bool) {
	ops, err := store.List(ctx, 1)
	if err != nil || len(ops) == 0 {
		return 0, false
	}
	return ops[0].LocalSeq - 1, true
}

// failureOf names a refused op by its record.
func failureOf(op outbox.Op) Failure {
	var args map[string]any
	json.Unmarshal(op.Payload, &args)
	kind := kindOfTool(op.Tool)
	name := recordName(Record{Args: args})
	if kind != Facts {
		c := []rune(str(args, "content") + str(args, "entry"))
		if len(c) > 60 {
			c = append(c[:60], '…')
		}
		name = fmt.Sprintf("%s/%s: %q", op.Wing, str(args, "room"), string(c))
	}
	return Failure{Kind: kind, Record: name, Wing: op.Wing, Error: "the primary refused it: " + errText(op.Error)}
}
