package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// keptOwnUntrusted is what a dropped op's note says, in place of
// outbox.TakesTheirs, once the primary's text proved an untrusted
// writer's.
const keptOwnUntrusted = "this device's palace keeps its own text of the drawer: the primary's is from a writer this device does not trust (the gateway's trusted set)"

// A theirsOutcome is what one reading of a note's drawer came to.
type theirsOutcome int

const (
	theirsSettled   theirsOutcome = iota // taken, or nothing to take: the note goes
	theirsUntrusted                      // the primary's text is an untrusted writer's: the local text stays, the note goes
	theirsLater                          // the local palace did not answer: the next kick tries again
	theirsWhenUp                         // the primary did not answer: tried again once it comes back (or at the next edge)
	theirsTake                           // the primary's text, read: the local palace takes it
)

// takeTheirs gives the local palace the primary's text of each drawer
// whose edit, refused as changed on the primary, the operator dropped
// (outbox.Theirs: "drop keeps theirs"), so that this device's reads show
// it and its later edits of the drawer build on it, carrying its base,
// rather than being refused alike. watchUnapplied calls it when the edge
// starts, whenever the outbox is kicked (a drop in another process rings
// the doorbell) and when the primary comes back. A note whose drawer the
// primary did not answer for is put in held and not asked again until
// the primary comes back (watchUnapplied then empties held), so the
// kept deletes sent on the same goroutine never wait on it after every
// write; one the local palace did not answer waits for the next kick.
func (e *Edge) takeTheirs(ctx context.Context, held map[string]bool) {
	if e.childDown.Load() {
		return // the next edge's
	}
	notes, err := e.outbox.Theirs(ctx)
	took := false // a text taken: the writers are read again (readTook)
	if err != nil && ctx.Err() == nil {
		e.log.Error("the drawers whose dropped edit keeps the primary's text are not read: this device's palace keeps its own text of them for now", "err", err)
	}
	untaken := map[string]string{}
	for _, t := range notes {
		untaken[t.Drawer] = t.Base
	}
	if err == nil {
		e.untaken.Store(&untaken) // until this pass ends: its reads ask the primary first
	}
	left := map[string]string{} // the drawers still untaken after this pass
	for _, t := range notes {
		if ctx.Err() != nil {
			return
		}
		if held[t.Op] {
			left[t.Drawer] = t.Base
			continue
		}
		out, by := e.takeTheirsOf(ctx, t)
		switch out {
		case theirsSettled:
			if err = e.outbox.TookTheirs(ctx, t, by); err == nil && by != nil {
				took = true
			}
		case theirsUntrusted:
			err = e.outbox.KeptOwn(ctx, t, keptOwnUntrusted)
		case theirsWhenUp:
			held[t.Op] = true
			left[t.Drawer] = t.Base
			continue
		case theirsLater:
			left[t.Drawer] = t.Base
			continue
		}
		if err != nil {
			e.log.Warn("the note of a dropped edit stays: the drawer is read on the primary again later", "drawer", t.Drawer, "err", err)
		}
	}
	if len(notes) > 0 {
		e.untaken.Store(&left)
	}
	if took || e.took.Load() == nil { // not at every kick: only a take, or this edge's first pass, changes them
		e.readTook(ctx)
	}
}

// readTook reads the writers of the texts the local palace took
// (outbox.Took) into e.took, where reads find them (marks).
func (e *Edge) readTook(ctx context.Context) {
	took, err := e.outbox.Took(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("the writers of texts this device's palace took from the primary are not read: its reads may show them as this device's own", "err", err)
		}
		return
	}
	e.took.Store(&took)
}

// asksMarked reports whether a get_drawer(s) asks for a drawer whose
// text the local palace took from the primary (its answer is marked with
// that writer, byIDMissing) or whose dropped edit's take waits
// (untakenRead): not relayed as the local palace answered (fastlane.go).
func (e *Edge) asksMarked(c *call) bool {
	args := c.argsMap()
	ids, _ := args["drawer_ids"].([]any)
	ids = append(ids, args["drawer_id"])
	return holdsAny(e.took.Load(), ids) || holdsAny(e.untaken.Load(), ids)
}

// holdsAny reports whether m (nil: none) holds one of ids.
func holdsAny[V any](m *map[string]V, ids []any) bool {
	if m == nil {
		return false
	}
	for _, id := range ids {
		if s, ok := id.(string); ok {
			if _, ok := (*m)[s]; ok {
				return true
			}
		}
	}
	return false
}

// ownAgain takes drawer id out of e.took and e.untaken once this edge's
// own edit of it reached the local palace (the outbox forgets its taken
// writer too: Promote; the next pass over the notes leaves a later edit
// as it is).
func (e *Edge) ownAgain(id string) {
	without(&e.took, id)
	without(&e.untaken, id)
}

// without takes id out of the map p points to.
func without[V any](p *atomic.Pointer[map[string]V], id string) {
	m := p.Load()
	if m == nil {
		return
	}
	if _, ok := (*m)[id]; !ok {
		return
	}
	c := maps.Clone(*m)
	delete(c, id)
	p.CompareAndSwap(m, &c) // lost to a concurrent read of the outbox: that read has it out already, or the next one will
}

// isUntaken reports whether drawer id's dropped edit waits for its take
// and local(), the local palace's text of it (read only then), is still
// that edit's (as takeTheirsOf checks): a later edit of this device's is
// its own, which the take leaves as it is.
func (e *Edge) isUntaken(id string, local func() string) bool {
	u := e.untaken.Load()
	if u == nil {
		return false
	}
	base, ok := (*u)[id]
	return ok && origin.Base(local()) == base
}

// keepsOwn reports whether the primary's answer of one drawer (answer: a
// get_drawer's, or a get_drawers slot) is an untrusted writer's text: a
// gateway withheld it, or its origin says trusted false. The local palace
// keeps its own text of such a drawer (theirsUntrusted).
func keepsOwn(answer string) bool {
	f := gjson.GetMany(answer, "error", origin.Key+".trusted")
	return strings.HasPrefix(f[0].String(), "withheld") || f[1].Type == gjson.False
}

// untakenHere is what a read's edge.local says of the local text of
// drawers whose dropped edit waits for its take (untakenRead).
func untakenHere(ids ...string) string {
	return fmt.Sprintf("this device's local text of %s is an edit the operator dropped (edge outbox drop keeps theirs): the primary's text is not taken yet (it is taken once the primary answers)", strings.Join(ids, ", "))
}

// untakenRead answers a get_drawer the local palace answered (res) of a
// drawer whose dropped edit waits for its take: the primary's text when
// it answers (and the take is tried again), else res marked (untakenHere,
// degraded). A drawer the primary does not have, hides from this device,
// or holds an untrusted writer's text of (keepsOwn), keeps the local text
// (the take leaves it too), unmarked.
func (e *Edge) untakenRead(ctx context.Context, c *call, res *mcp.CallToolResult, id string) *mcp.CallToolResult {
	local := e.marks().tookOnly().result(res, c.tool.Records, origin.PalaceLocal)
	why := e.remote.State()
	if e.remote.Up() {
		pres, perr := e.askPrimary(ctx, c, time.Now().Add(e.cfg.CallTimeout))
		t, ok := usable(pres, perr)
		_, denied := refused(perr)
		switch {
		case keepsOwn(t):
			e.primaryAnswered() // the pass keeps the local text, and the note goes
			return local
		case ok:
			e.primaryAnswered()
			return annotate(e.marks().result(pres, c.tool.Records, origin.PalacePrimary), map[string]any{"source": "primary"}, false)
		case denied || notFound(gjson.Get(t, "error").String()):
			return local
		}
		why = whyUnanswered(pres, perr)
	}
	return annotate(local, map[string]any{"source": "local", "primary": why, "local": untakenHere(id)}, true)
}

// takeTheirsOf reads t's drawer on the primary and, once no write is at
// the local palace, writes its text there (an update_drawer, not queued)
// if the local copy is still the dropped edit's. Settled: taken, or
// nothing to take (the drawer gone on the primary or locally, not
// visible to this device there, or a later local edit of it, which wins
// here). by is the primary's origin of the text taken (nil: none taken).
func (e *Edge) takeTheirsOf(ctx context.Context, t outbox.Theirs) (theirsOutcome, *origin.Origin) {
	theirs, by, out := e.primaryTextOf(ctx, t)
	if out != theirsTake {
		return out, nil
	}
	if !e.lockResending(ctx) {
		return theirsLater, nil // the edge stopped while a write was at the local palace: the next edge's
	}
	defer e.resending.Unlock()
	lctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	local, err := e.localServer.Call(lctx, getDrawer(t.Drawer).params)
	mine, ok := resultJSON(local)["content"].(string)
	switch {
	case err == nil && !ok && notFound(gjson.Get(resultText(local), "error").String()):
		return theirsSettled, nil // gone here: nothing to take
	case err != nil || !ok:
		e.log.Warn("a dropped edit's drawer not read in the local palace: it takes the primary's text at the next kick", "drawer", t.Drawer, "err", err, "answer", resultJSON(local))
		return theirsLater, nil
	case mine == theirs:
		return theirsSettled, by // taken already (by an edge stopped before it noted the writer)
	case origin.Base(mine) != t.Base:
		e.log.Info("this device's palace holds a later edit of a drawer whose dropped edit kept the primary's text: the later edit stays", "drawer", t.Drawer, "op", t.Op)
		return theirsSettled, nil
	}
	up := newCall(&mcp.CallToolParams{Name: catalogue.Prefix + "update_drawer", Arguments: map[string]any{"drawer_id": t.Drawer, "content": theirs}})
	res, err := e.localServer.Call(lctx, up.params)
	if err != nil || res == nil || res.IsError || resultJSON(res)["success"] != true {
		e.log.Warn("this device's palace did not take the primary's text of a drawer whose edit was dropped: it is tried again at the next kick", "drawer", t.Drawer, "err", err, "answer", resultJSON(res))
		return theirsLater, nil
	}
	e.log.Info("this device's palace took the primary's text of a drawer whose edit was dropped (edge outbox drop): its later edits build on it", "drawer", t.Drawer, "op", t.Op)
	return theirsSettled, by
}

// primaryTextOf is the primary's text of t's drawer (theirsTake), or
// what its answer comes to: settled where the refusal cannot change (not found, not
// visible to this device), untrusted where the text is an untrusted
// writer's (its origin says trusted: false, or a gateway withheld it),
// else whenUp; with the text, its writer as the primary's origin says
// ("unknown" when it says none: a primary without a gateway).
func (e *Edge) primaryTextOf(ctx context.Context, t outbox.Theirs) (string, *origin.Origin, theirsOutcome) {
	res, err := e.callPrimary(ctx, getDrawer(t.Drawer), true)
	m := resultJSON(res)
	msg, _ := m["error"].(string)
	theirs, ok := m["content"].(string)
	switch {
	case notFound(msg) || notVisible(err):
		e.log.Info("a dropped edit's drawer is gone from the primary, or not visible to this device there: this device's palace keeps its own text", "drawer", t.Drawer, "op", t.Op)
		return "", nil, theirsSettled
	case keepsOwn(resultText(res)):
		e.log.Warn("a dropped edit's drawer holds an untrusted writer's text on the primary: this device's palace keeps its own text", "drawer", t.Drawer, "op", t.Op, "writer", gjson.Get(resultText(res), origin.Key+".device").String())
		return "", nil, theirsUntrusted
	case err != nil || res == nil || res.IsError || !ok || msg != "":
		e.log.Warn("a dropped edit's drawer not read on the primary: this device's palace takes its text once the primary comes back; until then its reads ask the primary first, and a local answer of it is marked (edge.local)", "drawer", t.Drawer, "err", err, "answer", m)
		return "", nil, theirsWhenUp
	}
	by := origin.Origin{Device: origin.Unknown}
	if raw := gjson.Get(resultText(res), origin.Key); raw.IsObject() {
		if json.Unmarshal([]byte(raw.Raw), &by) != nil || by.Device == "" {
			by = origin.Origin{Device: origin.Unknown}
		}
	}
	return theirs, &by, theirsTake
}

// awaitFirstTheirs holds a tool call made while the edge's first pass
// over the notes of dropped edits (takeTheirs, at its start) runs, at
// most CallTimeout: else a session's first read of such a drawer shows
// the dropped text, an edit made from it carries the primary's base and
// lands over theirs unchecked, and a session of one call ends before the
// take (attack68 F1). Past the bound no call waits for it again (logged).
func (e *Edge) awaitFirstTheirs(ctx context.Context) {
	if e.theirsFirst == nil {
		return // no outbox, or no Serve: no pass
	}
	select {
	case <-e.theirsFirst:
		return
	default:
	}
	t := time.NewTimer(e.cfg.CallTimeout)
	defer t.Stop()
	select {
	case <-e.theirsFirst:
	case <-ctx.Done():
	case <-t.C:
		e.log.Warn("the drawers whose dropped edit keeps the primary's text were not all taken within the call timeout of the edge's start: tool calls are answered without waiting; reads of those drawers ask the primary first, and a local answer of one is marked (edge.local) until it is taken", "timeout", e.cfg.CallTimeout)
		e.firstTheirsDone()
	}
}

// firstTheirsDone lets tool calls through (awaitFirstTheirs).
func (e *Edge) firstTheirsDone() {
	e.theirsOnce.Do(func() { close(e.theirsFirst) })
}
