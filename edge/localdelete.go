package edge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// watchUnapplied sends the kept deletes to the local palace again and
// settles them by its answers (each local palace started got them first,
// unanswered: keptDeleteCalls): an earlier edge's once the local palace
// is up, and one this edge keeps without its answer (a cancel past the
// write grace: keptUnapplied) once the palace has had the write grace
// again for it, then further apart, until none is left. The updates a kept delete_by_source holds wait for
// its answer, not for the next edge start. It gives the local palace the
// primary's text of the drawers whose conflicting edits were dropped
// (takeTheirs, theirs.go) then too, whenever the outbox is kicked, and
// when the primary comes back (primaryUp).
func (e *Edge) watchUnapplied(ctx context.Context) {
	if notes, err := e.outbox.Theirs(ctx); err == nil && len(notes) == 0 {
		e.firstTheirsDone() // none to take: no tool call waits
	}
	select {
	case <-e.childKnown:
	case <-ctx.Done():
		return
	}
	held := map[string]bool{} // notes of dropped edits the primary did not answer for (takeTheirs)
	e.takeTheirs(ctx, held)
	e.firstTheirsDone()
	left := e.applyUnapplied(ctx)
	wait := e.cfg.WriteGrace
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		due := t.C
		if left == 0 {
			due = nil // nothing to send until this edge keeps one
		}
		select {
		case <-ctx.Done():
			return
		case <-e.keptUnapplied:
			wait = e.cfg.WriteGrace
			t.Reset(wait)
			left = 1 // at least the one just kept
			continue
		case <-e.outbox.Kicked():
			e.takeTheirs(ctx, held) // a drop in another process rings the doorbell
			continue
		case <-e.primaryUp:
			clear(held)
			e.takeTheirs(ctx, held)
			continue
		case <-due:
		}
		if left = e.applyUnapplied(ctx); left > 0 {
			wait = min(2*wait, maxUnappliedWait)
			t.Reset(wait)
		}
	}
}

// firstCalls are what each local palace started gets before any other
// call (ChildOptions.First): the local calls of the kept deletes, then
// the cut writes (cutwrite.go). It answers one call at a time, in the
// order sent, so no read it answers shows what they delete, nor lacks
// what they write, however late watchUnapplied sends the deletes (it
// waits for no write to be at the local palace). The deletes' answers are
// dropped: watchUnapplied's send settles them ("not found" then:
// applied). A delete the local palace fails at leaves its drawer in local
// reads until a later send applies it. A cut write's answer settles it.
func (e *Edge) firstCalls(ctx context.Context) []FirstCall {
	if e.outbox == nil {
		return nil
	}
	e.firstMu.Lock()
	defer e.firstMu.Unlock()
	e.firstRuns++
	us, err := e.outbox.Unapplied(ctx)
	if err != nil && ctx.Err() == nil {
		e.log.Error("deletes kept without the local palace's answer are not read: local reads may show what they delete until they are sent", "err", err)
	}
	var out []FirstCall
	for _, u := range us {
		if len(u.Call) > 0 {
			out = append(out, FirstCall{Params: u.Call})
		}
	}
	return append(out, e.cutCalls(ctx)...)
}

// maxUnappliedWait bounds the wait between two sends of the kept deletes
// the local palace did not settle.
const maxUnappliedWait = 10 * time.Minute

// keepUnapplied tells watchUnapplied this edge kept a delete without the
// local palace's answer.
func (e *Edge) keepUnapplied() {
	select {
	case e.keptUnapplied <- struct{}{}:
	default: // one is told already
	}
}

// applyUnapplied sends the kept deletes to the local palace again (the
// user's delete, kept for the primary, must not leave the drawer in this
// device's local palace, where reads would show it once the tombstone
// goes: an admin's, when the delete lands) and says how many are left.
// Only an answer about the delete settles one: applied, "not found" (the
// local palace had applied it), or refused for good (a call this MemPalace
// does not take: refusedForGood); a failure (a palace that cannot be
// reached, or whose store raised) leaves it for later, or the next edge. A
// delete_by_source's note holds the unsent updates of its source's drawers
// until then: those it removed are then cancelled.
func (e *Edge) applyUnapplied(ctx context.Context) (left int) {
	if e.childDown.Load() {
		return 0 // the next edge's
	}
	if us, err := e.outbox.Unapplied(ctx); err == nil && len(us) == 0 {
		return 0 // none kept: no write waits for this pass
	}
	// A write at the local palace now would land before a delete sent
	// behind it, and its lift, which takes back what it rewrites, comes
	// with its answer: the kept deletes are read once no write is there.
	if !e.lockResending(ctx) {
		return 0 // the edge stopped while a write was at the local palace: the next edge's
	}
	defer e.resending.Unlock()
	us, err := e.outbox.Unapplied(ctx)
	if err != nil && ctx.Err() == nil {
		e.log.Error("deletes kept without the local palace's answer are not read: the local palace may still hold what they delete", "err", err)
	}
	for i, u := range us {
		settled, reached := e.resendUnapplied(ctx, u.Call)
		if !reached {
			return len(us) - i // the others wait too
		}
		if !settled || !e.cancelUpdatesGone(ctx, u) {
			left++
			continue
		}
		if err := e.outbox.DropUnapplied(ctx, u.Key); err != nil {
			e.log.Warn("a delete applied to the local palace stays noted: the next edge sends it again", "err", err)
		}
	}
	return left
}

// lockResending takes e.resending whole once no write holds it, asking
// again every 20 ms rather than waiting in Lock, where it would hold
// every new write back behind the one at the local palace; false when
// ctx ends first.
func (e *Edge) lockResending(ctx context.Context) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !e.resending.TryLock() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		e.resending.Unlock()
		return false
	}
	return true
}

// cancelUpdatesGone cancels the held updates of the drawers a kept
// delete_by_source u removed, once it is applied (updatesGone), and
// tombstones them, as when the local palace answers it at once
// (outbox.KeptRemoved); the others go once its note is dropped. It is
// false when which it removed is not known (a look-up unanswered, the
// outbox failed): the note stays, holding them, for the next edge.
func (e *Edge) cancelUpdatesGone(ctx context.Context, u outbox.Unapplied) bool {
	if len(u.Updated) == 0 {
		return true
	}
	gone, known := e.updatesGone(ctx, u.Updated)
	if !known {
		e.log.Warn("a kept delete_by_source is applied, but which drawers it removed is not known: the unsent updates of its source's drawers stay held for the next edge", "drawers", len(u.Updated))
		return false
	}
	if err := e.outbox.KeptRemoved(ctx, u, gone); err != nil {
		e.log.Error("the drawers a kept delete_by_source removed are not tombstoned, or their unsent updates not cancelled: they stay held for the next edge", "err", err)
		return false
	}
	return true
}

// resendUnapplied sends a kept delete's local call raw to the local palace
// again: settled when the answer settles it, reached false when the local
// palace was not reached. A call that does not parse has nothing to send.
func (e *Edge) resendUnapplied(ctx context.Context, raw json.RawMessage) (settled, reached bool) {
	var p mcp.CallToolParams
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil {
		return true, true
	}
	c := newCall(&p)
	cctx, cancel := context.WithTimeout(ctx, max(e.cfg.CallTimeout, e.cfg.WriteGrace))
	res, err := e.localServer.Call(cctx, c.params)
	cancel()
	var rpcErr *jsonrpc.Error
	switch {
	case e.localDeleteDone(c, res):
		e.log.Info("a delete kept without the local palace's answer was sent to it again", "tool", p.Name)
		return true, true
	case errors.As(err, &rpcErr) && refusedForGood(rpcErr):
		e.log.Error("the local palace refuses a delete kept without its answer for good: its note is dropped, and what it deletes may stay in the local palace; delete it again with a call this MemPalace takes",
			"tool", p.Name, "deletes", deletes(c), "reason", rpcErr.Message, "code", rpcErr.Code)
		return true, true
	}
	e.log.Warn("a delete kept without the local palace's answer was not applied there now; it is sent again later, or by the next edge", "tool", p.Name, "err", err, "answer", resultJSON(res))
	return false, err == nil || rpcErr != nil
}

// deletes names what the delete c removes: its drawer ids, or its source.
func deletes(c *call) string {
	if src, ok := c.argsMap()["source_file"].(string); ok {
		return "source_file " + src
	}
	return strings.Join(drawerIDs(c), ",")
}

// refusedForGood reports a local palace's JSON-RPC error about the call
// itself: an invalid request (-32600), a tool it does not have (-32601),
// arguments it does not take (-32602). Sent again to the same MemPalace,
// the call is refused again. Its other errors (-32000 a handler that
// raised, -32001 another writer, -32003 read-only, -32002/-32004/-32005 a
// store to repair or a library to restart) are about the palace's state,
// which changes.
func refusedForGood(err *jsonrpc.Error) bool {
	switch err.Code {
	case jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
		return true
	}
	return false
}

// localDeleteDone reports a local answer that says the delete c is applied
// there: done, or nothing of it found (every drawer of a delete_drawers,
// or a palace that holds no drawers yet).
func (e *Edge) localDeleteDone(c *call, res *mcp.CallToolResult) bool {
	if res == nil {
		return false
	}
	if e.lacksLocally(res) {
		return true
	}
	m := resultJSON(res)
	if _, ok := deletedCount(c, m); !ok || res.IsError {
		return false
	}
	items, _ := m["results"].([]any) // delete_drawers: one per id
	for _, x := range items {
		r, _ := x.(map[string]any)
		if msg, failed := r["error"].(string); failed && !notFound(msg) {
			return false
		}
	}
	return true
}
