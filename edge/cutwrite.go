package edge

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/joakimp/devbox-config/edge/wire"
)

// keepCut notes a write whose local call the local palace server's death
// cut (errChildExited: it may or may not have applied it) when sending it
// there again cannot double it (resendable): the next local palace
// started gets it before any other call (firstCalls), and its answer
// drops the note (outbox.KeepCut). since is firstRun's before the call
// was sent: a local palace started since then may have read what it gets
// first before this note was kept, and is sent it here, before the agent
// is answered, when the order it lands in there changes nothing
// (orderFree); any other write is not sent: that palace may have taken a
// later write of the agent's, which it would undo. It says whether the
// write was noted.
func (e *Edge) keepCut(ctx context.Context, c *call, since uint64, down error) bool {
	if e.outbox == nil || !errors.Is(down, errChildExited) || !resendable(c) {
		return false
	}
	params, err := wire.EncodeCallParams(c.params)
	if err != nil {
		e.log.Warn("a write the local palace server's death cut is not noted: the local palace does not get it again", "tool", c.name, "err", err)
		return false
	}
	e.firstMu.Lock()
	missed := e.firstRuns != since
	if missed && !orderFree(c) {
		e.firstMu.Unlock()
		e.log.Warn("a write the local palace server's death cut is not sent to it again: the restarted server may have taken a later write of the agent's, which it would undo", "tool", c.name)
		return false
	}
	key, err := e.outbox.KeepCut(context.WithoutCancel(ctx), params)
	e.firstMu.Unlock()
	if err != nil {
		e.log.Error("a write the local palace server's death cut is not noted: the local palace does not get it again", "tool", c.name, "err", err)
		return false
	}
	e.lift(context.WithoutCancel(ctx), c) // the local palace's once it is back: a kept delete no longer removes it
	if missed {
		raw, rpcErr, err := e.localServer.Relay(ctx, params)
		e.cutAnswered(key, raw, rpcErr, err)
	}
	return true
}

// firstRun is how many local palaces started read what they get first.
func (e *Edge) firstRun() uint64 {
	e.firstMu.Lock()
	defer e.firstMu.Unlock()
	return e.firstRuns
}

// cutCalls are the cut writes for a local palace started (firstCalls),
// each settled by its answer.
func (e *Edge) cutCalls(ctx context.Context) []FirstCall {
	cs, err := e.outbox.Cut(ctx)
	if err != nil && ctx.Err() == nil {
		e.log.Error("writes the local palace server's death cut are not read: the local palace does not get them again now", "err", err)
	}
	out := make([]FirstCall, 0, len(cs))
	for _, u := range cs {
		out = append(out, FirstCall{Params: u.Call, Answered: func(line []byte, err error) {
			if err != nil {
				e.cutAnswered(u.Key, nil, nil, err)
				return
			}
			raw, rpcErr, err := childAnswer(line)
			e.side.Go(func() { e.cutAnswered(u.Key, raw, rpcErr, err) }) // off the reader
		}})
	}
	return out
}

// cutAnswered settles the cut write noted under key by the local
// palace's answer to it sent again: an answer (a refusal too: MemPalace
// decided), or a JSON-RPC error about the call itself (refusedForGood),
// drops the note; no answer, or an error about the palace's state (another
// writer, a store that raised), leaves it for the next local palace
// started.
func (e *Edge) cutAnswered(key string, raw []byte, rpcErr *jsonrpc.Error, err error) {
	if rpcErr != nil && !refusedForGood(rpcErr) {
		err = rpcErr
	}
	if err != nil {
		e.log.Warn("a write the local palace server's death cut was not applied by it sent again; it is sent again when the local palace is next started", "err", err)
		return
	}
	if err := e.outbox.DropUnapplied(context.Background(), key); err != nil {
		e.log.Warn("a cut write the local palace took again stays noted: it is sent again when the local palace is next started (it cannot double)", "err", err)
		return
	}
	e.log.Info("a write the local palace server's death cut was sent to it again", "answer", string(raw))
}

// resendable reports a write that can be sent to MemPalace (3.11.0) again
// without doubling it, whether or not it applied it: add_drawer (its
// drawer id is its wing, room and content's: the second is
// "already_exists"), a checkpoint without a diary entry (its items
// likewise), update_drawer (the same content again), create_tunnel (its
// id is its rooms': upserted), a kg_add of an open fact (MemPalace's
// open-fact guard), kg_invalidate and kg_supersede (nothing left open to
// close; the new fact open already). Not diary_write, nor a checkpoint's
// diary entry (the entry's id carries the time it was written: a second
// entry), nor a kg_add of a closed fact (no guard: a second row).
func resendable(c *call) bool {
	a := c.argsMap()
	switch c.tool.Name {
	case "add_drawer", "update_drawer", "create_tunnel", "kg_invalidate", "kg_supersede":
		return true
	case "checkpoint":
		return a["diary"] == nil
	case "kg_add":
		return a["valid_to"] == nil || a["valid_to"] == ""
	}
	return false
}

// orderFree reports a resendable write that leaves the local palace the
// same whatever the agent's other writes did before it lands: an
// add_drawer and a checkpoint's items (their drawer ids are their
// content's). An update_drawer, a create_tunnel (it sets its rooms'
// tunnel's label) and the knowledge graph's writes are not: landing after
// a later write of the same drawer, tunnel or fact, they would undo it.
func orderFree(c *call) bool {
	return c.tool.Name == "add_drawer" || c.tool.Name == "checkpoint"
}
