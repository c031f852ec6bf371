package edge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A write (a delete too) sent to the local palace is applied there whatever becomes of
// its call: MemPalace does not stop a tool call on notifications/cancelled,
// and a palace being stopped finishes the call it is in. So once sent, the
// edge waits for the local answer (and queues the write) even when the
// agent cancels the call, for at most WriteGrace after that; and the edge
// stops its local palace only once those writes are answered
// (waitWrites), or a grace is over: WriteGrace at the end of the agent's
// input, what is left of StopGrace at a signal (a container stop's
// SIGKILL follows). A write still unanswered then is given up and queued
// all the same (write): the local palace may or may not apply it, and it
// was in the outbox before it was sent (outbox/intent.go), so not lost.
// One the local palace never answers (MemPalace stuck on a full disk) is
// given up likewise at WriteBound (boundWrite), and its call answered so.

// sentWrites counts the writes sent to the local palace that are not yet
// answered and queued; once the stop waits for them (closed), no write
// is sent any more.
type sentWrites struct {
	mu     sync.Mutex
	n      int
	closed bool          // waitWrites began: a write not sent yet never is
	idle   chan struct{} // closed when n drops to 0; nil when nobody waits
	// over ends when the edge stops waiting for them (waitWrites' grace
	// is over): every write in flight is given up at once.
	over      context.Context
	giveUpAll context.CancelFunc
}

// givenUp is the context that ends when every write in flight is given up.
func (w *sentWrites) givenUp() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over == nil {
		w.over, w.giveUpAll = context.WithCancel(context.Background())
	}
	return w.over
}

// add counts a write about to be sent; false once the stop waits for the
// writes sent (close): it is not sent.
func (w *sentWrites) add() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.n++
	return true
}

// close lets no write be sent after it.
func (w *sentWrites) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

func (w *sentWrites) done() {
	w.mu.Lock()
	w.n--
	if w.n == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
	w.mu.Unlock()
}

// wait returns once no write is in flight (0, nil), or when ctx ends: how
// many still are, and ctx's error.
func (w *sentWrites) wait(ctx context.Context) (int, error) {
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return 0, nil
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	idle := w.idle
	w.mu.Unlock()
	select {
	case <-idle:
		return 0, nil
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.n, ctx.Err()
	}
}

// sendingWrite is the context a write to the local palace runs on from
// the moment it is sent: the call's cancel (the agent's, or the edge
// stopping) does not end it, WriteGrace after that cancel does. end
// releases it once the write is answered and queued. ok is false once
// the stop waits for the writes sent (waitWrites): this one must not be
// sent (nothing waits for it, or answers it in time), and the caller
// takes its intent back and answers it as NOT applied (errNotApplied).
func (e *Edge) sendingWrite(ctx context.Context) (wctx context.Context, end func(), ok bool) {
	if !e.writes.add() {
		return ctx, func() {}, false
	}
	wctx, cancelCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func() { cancelCause(nil) }
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(e.cfg.WriteGrace)
		defer t.Stop()
		select {
		case <-wctx.Done():
		case <-t.C:
			cancel()
		}
	})
	stopAll := context.AfterFunc(e.writes.givenUp(), cancel)
	bounded := make(chan struct{})
	go func() {
		defer close(bounded)
		e.boundWrite(wctx, cancelCause)
	}()
	return wctx, func() {
		stop()
		stopAll()
		cancel()
		<-bounded // ends with wctx
		e.writes.done()
	}, true
}

// errUnanswered is the cause of a write given up at WriteBound.
var errUnanswered = errors.New("the local palace did not answer the write")

// boundWrite gives up the write wctx runs (cause errUnanswered) once the
// local palace has not answered it for WriteBound and has answered
// nothing else for as long, counted while it is at no long job: a mine
// ahead of the write is waited for, and so is the write's turn after it
// (the mine's answer a moment before the bound's tick is not the write's
// bound spent: the race tier gave a write behind a mine up so).
func (e *Edge) boundWrite(wctx context.Context, giveUp context.CancelCauseFunc) {
	bound := cmp.Or(e.cfg.WriteBound, DefaultWriteBound) // an Edge built without withDefaults (tests)
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case <-wctx.Done():
			return
		case <-t.C:
		}
		conn := e.liveChild()
		next := bound
		if conn != nil && conn.longJob() == "" {
			next = bound - time.Since(conn.lastAnswer())
		}
		if conn == nil || conn.longJob() == "" && next <= 0 {
			giveUp(errUnanswered)
			if conn != nil {
				e.restartStuck(conn, bound)
			}
			return
		}
		t.Reset(next)
	}
}

// restartStuck stops the local palace server that did not answer a write
// within bound: one stuck so (chromadb on a full disk) answers no later
// write either and holds the palace's writer lock. The supervisor starts
// a fresh one, which answers, or refuses, the writes after it. Off the
// write's answer; Serve waits for it.
func (e *Edge) restartStuck(conn *childConn, bound time.Duration) {
	e.log.Error("the local palace did not answer a write within the write bound: its server is restarted", "bound", bound)
	e.side.Go(func() { conn.Close() }) // its error: the supervisor logs the restart
}

// unanswered answers a write given up at WriteBound (errUnanswered), nil
// for any other.
func (e *Edge) unanswered(wctx context.Context) error {
	if !errors.Is(context.Cause(wctx), errUnanswered) {
		return nil
	}
	return &jsonrpc.Error{Code: -32000, Message: fmt.Sprintf("the local palace did not answer this write within %s (MemPalace stuck: its disk full, say; `devbox-config doctor` checks the palace), so the edge gave it up: it may or may not have been applied; as a write given up at a stop, it is queued for the primary all the same (a delete is kept, and sent to the local palace again)", e.cfg.WriteBound)}
}

// waitWrites holds the stop (before the local palace is stopped) until
// the writes already sent to it are answered and queued, until ctx ends
// or grace is over. Those still unanswered then are given up: settled at
// once (queued for the primary; the local palace, being stopped, may or
// may not apply them). A write not sent yet is not sent after this
// (sendingWrite): one that got past its turn and its intent while the
// stop began would otherwise reach a local palace being stopped with
// nothing waiting for its answer (the race tier's lost answer).
func (e *Edge) waitWrites(ctx context.Context, grace time.Duration) {
	e.writes.close()
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if n, err := e.writes.wait(ctx); err != nil {
		e.log.Error("stopping: writes sent to the local palace are still unanswered after the grace: given up, and queued for the primary (the local palace, being stopped, may or may not apply them)", "writes", n, "grace", grace)
		e.writes.givenUp()
		e.writes.giveUpAll()
	}
}

// beforeStop is ctx ending at the stop's signal too, for a write's
// look-up at the local palace before its intent is in the outbox (a
// delete's read of what it deletes, an update's of its drawer's wing): a
// slow call ahead of it holds the local palace past the stop grace, so
// the look-up is not waited for then, and the write is kept or answered
// as not applied (errNotApplied) while the grace runs.
func (e *Edge) beforeStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if e.halt == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(e.halt, cancel)
	return ctx, func() { stop(); cancel() }
}
