package edge

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// takeTheirs gives the local palace the primary's text of each drawer
// whose edit, refused as changed on the primary, the operator dropped
// (outbox.Theirs: "drop keeps theirs"), so that this device's reads show
// it and its later edits of the drawer build on it, carrying its base,
// rather than being refused alike. watchUnapplied calls it when the edge
// starts and whenever the outbox is kicked (a drop in another process
// rings the doorbell). A note waits, for the next kick or the next edge,
// while the primary or the local palace cannot be read.
func (e *Edge) takeTheirs(ctx context.Context) {
	if e.childDown.Load() {
		return // the next edge's
	}
	notes, err := e.outbox.Theirs(ctx)
	if err != nil && ctx.Err() == nil {
		e.log.Error("the drawers whose dropped edit keeps the primary's text are not read: this device's palace keeps its own text of them for now", "err", err)
	}
	for _, t := range notes {
		if ctx.Err() != nil {
			return
		}
		if e.takeTheirsOf(ctx, t) {
			if err := e.outbox.TookTheirs(ctx, t); err != nil {
				e.log.Warn("the note of a dropped edit stays: the drawer is read on the primary again later", "drawer", t.Drawer, "err", err)
			}
		}
	}
}

// takeTheirsOf reads t's drawer on the primary and, once no write is at
// the local palace, writes its text there (an update_drawer, not queued)
// if the local copy is still the dropped edit's. It says whether t is
// settled: taken, or nothing to take (the drawer gone on the primary or
// locally, or a later local edit of it, which wins here).
func (e *Edge) takeTheirsOf(ctx context.Context, t outbox.Theirs) bool {
	res, err := e.callPrimary(ctx, getDrawer(t.Drawer), true)
	m := resultJSON(res)
	theirs, ok := m["content"].(string)
	if err != nil || res == nil || res.IsError || !ok {
		msg, _ := m["error"].(string)
		if notFound(msg) {
			e.log.Info("a dropped edit's drawer is gone from the primary: this device's palace keeps its own text", "drawer", t.Drawer, "op", t.Op)
			return true
		}
		e.log.Debug("a dropped edit's drawer not read on the primary: this device's palace takes its text later", "drawer", t.Drawer, "err", err, "answer", m)
		return false
	}
	if !e.lockResending(ctx) {
		return false // the edge stopped while a write was at the local palace: the next edge's
	}
	defer e.resending.Unlock()
	lctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	local, err := e.localServer.Call(lctx, getDrawer(t.Drawer).params)
	if err != nil {
		e.log.Warn("a dropped edit's drawer not read in the local palace: it takes the primary's text later", "drawer", t.Drawer, "err", err)
		return false
	}
	mine, ok := resultJSON(local)["content"].(string)
	switch {
	case !ok || mine == theirs:
		return true
	case origin.Base(mine) != t.Base:
		e.log.Info("this device's palace holds a later edit of a drawer whose dropped edit kept the primary's text: the later edit stays", "drawer", t.Drawer, "op", t.Op)
		return true
	}
	up := newCall(&mcp.CallToolParams{Name: catalogue.Prefix + "update_drawer", Arguments: map[string]any{"drawer_id": t.Drawer, "content": theirs}})
	res, err = e.localServer.Call(lctx, up.params)
	if err != nil || res == nil || res.IsError || resultJSON(res)["success"] != true {
		e.log.Warn("this device's palace did not take the primary's text of a drawer whose edit was dropped: it is tried again later", "drawer", t.Drawer, "err", err, "answer", resultJSON(res))
		return false
	}
	e.log.Info("this device's palace took the primary's text of a drawer whose edit was dropped (edge outbox drop): its later edits build on it", "drawer", t.Drawer, "op", t.Op)
	return true
}
