package edge

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// applyUnapplied sends to the local palace, once it is up, the deletes an
// earlier edge kept without its answer (given up at the stop grace, or
// left by a killed edge: outbox/intent.go): the user's delete, kept for
// the primary, must not leave the drawer in this device's local palace,
// where reads would show it once the tombstone goes (an admin's, when the
// delete lands). Only an answer about the delete settles one: applied, or
// "not found" (the local palace had applied it); a failure (a palace that
// cannot be reached, or whose store raised) leaves it to the next edge.
func (e *Edge) applyUnapplied(ctx context.Context) {
	select {
	case <-e.childKnown:
	case <-ctx.Done():
		return
	}
	if e.childDown.Load() {
		return
	}
	us, err := e.outbox.Unapplied(ctx)
	if err != nil {
		e.log.Error("deletes kept without the local palace's answer are not read: the local palace may still hold what they delete", "err", err)
	}
	for _, u := range us {
		var p mcp.CallToolParams
		if len(u.Call) > 0 && json.Unmarshal(u.Call, &p) == nil {
			c := newCall(&p)
			cctx, cancel := context.WithTimeout(ctx, e.cfg.WriteGrace)
			res, err := e.localServer.Call(cctx, c.params)
			cancel()
			if !e.localDeleteDone(c, res) {
				e.log.Warn("a delete kept without the local palace's answer was not applied there now; the next edge tries again", "tool", p.Name, "err", err, "answer", resultJSON(res))
				var rpcErr *jsonrpc.Error
				if err != nil && !errors.As(err, &rpcErr) {
					return // not reached: the others wait too
				}
				continue
			}
			e.log.Info("a delete kept without the local palace's answer was sent to it again", "tool", p.Name)
		}
		if err := e.outbox.DropUnapplied(ctx, u.Key); err != nil {
			e.log.Warn("a delete applied to the local palace stays noted: the next edge sends it again", "err", err)
		}
	}
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
