package edge

// Deletes that stay deleted for the device that made them (issue 27). A
// delete through the edge applies to the local palace and leaves a
// tombstone in the outbox's file (outbox.Tombstone); merged reads drop the
// primary's records it names; a write that recreates the same drawer
// lifts it, one that files a drawer of a deleted source shows that drawer
// alone; a diary_write of the same text is another entry, whose
// copy on the primary has another timestamp (the deleted entry's copy,
// named by the primary's own timestamp, stays hidden; the new one shows). The
// delete is also queued for the primary only when a
// devbox-config gateway said this device is admin-scoped (and under its
// delete cap, or bulk-delete granted): the gateway keeps what it deletes
// in its trash. Otherwise nothing is sent, and `edge status` names what
// the primary still holds (tombstonecheck.go).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// maxRecordReads bounds the records a delete reads before it goes (to
// tell diary entries, whose tombstones need their agent and text).
const maxRecordReads = 100

// deletion is one delete the agent makes, as the edge reads it before it
// goes: the tombstones it leaves, the wing of the first record (the
// policy's), and how many drawers it names.
type deletion struct {
	marks []outbox.Tombstone
	wing  string
	// unnamed: a diary entry among them whose copy on the primary (another
	// id: its own timestamp) this device cannot name: not this device's
	// write (read from the primary), or its write not found in the outbox.
	// A delete naming one is not sent.
	unnamed bool
	// entries are the diary entries among them, as their unsent writes
	// are found (outbox.CancelUnsentDiaries).
	entries []outbox.DeletedEntry
	// updated are, for a delete_by_source, the drawers of its source (by
	// base name: the local record's) with an update_drawer not landed, held
	// by its note: those the delete removes are found once it is taken
	// (updatesGone), here or, kept unapplied, by the next edge.
	updated []string
	// cut: a record not read, the stop having cut the local palace's
	// look-up (a slow write ahead of it) with no copy on the primary to
	// read instead: what it deletes, and where, is not known.
	cut bool
	// held is where each drawer read was found before it went (the
	// first maxRecordReads ids).
	held map[string]holder
	// send is the delete_drawers queued for the primary when some of its
	// ids are found nowhere (leaveOutNowhere): the call without them
	// (nil: the call as the agent made it).
	send *call
}

// queued is the delete to queue for the primary (d.send, else c) and how
// many drawers it names (n, the local count, for c itself).
func (d deletion) queued(c *call, n int) (*call, int) {
	if d.send == nil {
		return c, n
	}
	return d.send, len(drawerIDs(d.send))
}

// leaveOutNowhere keeps the ids of a delete_drawers found nowhere (the
// local palace lacks them, the primary, asked, does not show them) out of
// what it queues and hides, as a delete_drawer of one is: a gateway
// refuses a batch naming one this device may not read (-31003) whole, for
// ever, and the others would never be deleted there (attack104 F2). When
// every id is nowhere, nowhere's answer takes it all back.
func (d *deletion) leaveOutNowhere(c *call) {
	ids := drawerIDs(c)
	keep := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return d.held[id] == heldNowhere })
	if len(keep) == 0 || len(keep) == len(ids) {
		return
	}
	raw, err := sjson.SetBytes(append([]byte(nil), c.raw()...), "drawer_ids", keep)
	if err != nil {
		return // arguments that parsed as an object: not reached; sent whole, as before
	}
	d.send = newCall(&mcp.CallToolParams{Name: c.name, Arguments: json.RawMessage(raw)})
	d.marks = slices.DeleteFunc(d.marks, func(m outbox.Tombstone) bool {
		return m.Kind == outbox.TombDrawer && d.held[m.Key] == heldNowhere
	})
}

// nowhere reports a delete the local palace took nothing of whose every
// drawer the primary, asked, does not hold either: a typo, or deleted
// already. Queued, it would be refused there for ever.
func (d deletion) nowhere(c *call, local map[string]any) bool {
	ids := drawerIDs(c)
	for _, id := range ids {
		if d.held[id] != heldNowhere {
			return false
		}
	}
	if c.tool.Name == "delete_drawer" {
		return local["success"] != true
	}
	n, _ := local["deleted"].(float64)
	return len(ids) > 0 && n == 0
}

// holder is where a drawer's record was found (record).
type holder int

const (
	heldUnknown holder = iota // the primary down, or its answer unusable
	heldLocal
	heldPrimary
	heldNowhere // the local palace lacks it and the primary said "Drawer not found" (or not visible)
)

// deleteCall answers delete_drawer, delete_drawers and delete_by_source
// (dry_run false): read, tombstone and (when allowed) queue as an intent,
// delete locally, then keep or take back by the local answer
// (outbox/intent.go). Every other destructive tool (delete_tunnel,
// delete_hallway, a dry run) is the local palace's alone, as before.
func (e *Edge) deleteCall(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	if e.outbox == nil || !removesDrawers(c) {
		res, err := e.local(ctx, c)
		if err == nil && c.tool.Name == "delete_by_source" && e.lacksLocally(res) {
			return noSourceHere(c), nil // a dry run on a palace new to the fleet, not MemPalace's advice to repair it
		}
		return res, err
	}
	d := e.readDeletion(ctx, c)
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled before it was sent: the local palace never saw it
	}
	again := c.tool.Name == "delete_drawer" && e.tombstones(ctx).drawers[drawerIDs(c)[0]] // this device deleted it before
	if d.cut {
		e.log.Warn("stopping: a delete not yet sent to the local palace (a slow call ahead of it) could not be read in time: answered as not applied", "tool", c.name)
		return nil, e.errNotApplied()
	}
	// In the outbox before it is sent: a kill while the local palace is
	// at it leaves the delete for the next edge to keep.
	p := e.intendDeletion(ctx, c, d)
	// Sent, the local palace deletes whatever becomes of the call: its
	// answer is waited for (bounded) and the delete kept (sentwrite.go).
	ctx, end, ok := e.sendingWrite(ctx)
	defer end()
	if !ok {
		e.takeBack(ctx, c, p)
		return nil, e.errNotApplied() // the stop came first: never sent
	}
	raw, lerr := e.localServer.Call(ctx, c.params)
	if damaged := localDamaged(lerr); damaged != nil {
		return e.deleteWithoutLocal(ctx, c, d, p, damaged), nil
	}
	res, err := localAnswer(raw, lerr)
	if lerr != nil && ctx.Err() != nil && !errors.Is(lerr, ErrLocalDown) && p != nil {
		// No answer within the write grace: the local palace may yet
		// apply it, so it is kept, as a killed edge's is.
		e.log.Error("the local palace did not answer a delete within the write grace after its call was cancelled, the edge stopped, or the write bound; it is kept, and sent to the local palace again (after a stop, by the next edge)", "tool", c.name, "grace", e.cfg.WriteGrace)
		p.unapplied = true // its note holds d.updated's updates until the local palace's answer to it sent again
		e.keepDeletion(ctx, c, d, len(drawerIDs(c)), p)
		if e.writes.givenUp().Err() != nil {
			return nil, e.errStopping(true) // given up by the stop: maybe applied, kept for the next edge
		}
		e.keepUnapplied() // sent again in this session (localdelete.go)
		if uerr := e.unanswered(ctx); uerr != nil {
			return nil, uerr // given up at the write bound: maybe applied, kept
		}
		return res, err
	}
	if err != nil || res == nil {
		e.takeBack(ctx, c, p)
		return res, err
	}
	return e.locallyDeleted(ctx, c, d, p, res, again), nil
}

// locallyDeleted finishes a delete the local palace answered: one it
// refused, or of drawers neither palace holds, is taken back; one it
// applied is kept, to be sent to the primary. again: this device deleted
// the drawer before.
func (e *Edge) locallyDeleted(ctx context.Context, c *call, d deletion, p *pendingDeletion, res *mcp.CallToolResult, again bool) *mcp.CallToolResult {
	n, ok := deletedCount(c, resultJSON(res))
	if !ok && (c.tool.Name != "delete_by_source" || c.argsMap()["dry_run"] == false) && e.lacksLocally(res) {
		// A palace that holds no drawers yet (MemPalace answers with an
		// error): the drawers meant are the primary's, as for "Drawer not
		// found" or a source the local palace lacks.
		n, ok = len(drawerIDs(c)), true
		res = emptyPalaceDelete(c, res)
	}
	if !ok || res.IsError || len(d.marks) == 0 || d.nowhere(c, resultJSON(res)) {
		// The local palace refused it, or neither palace holds the drawer
		// (the primary said so): nothing deleted, nothing kept.
		e.takeBack(ctx, c, p)
		if again && d.nowhere(c, resultJSON(res)) {
			return deletedBefore(c)
		}
		return res
	}
	// A drawer whose look-up got no answer is not counted gone: its
	// unsent update stays queued, to be sent or refused on its own.
	gone, _ := e.updatesGone(ctx, d.updated)
	d.marks = append(d.marks, drawerMarks(gone)...)
	kept, why := e.keepDeletion(ctx, c, d, n, p)
	return annotate(deletedOnPrimary(c, d.held, res, kept, why), kept, false)
}

// deletedBefore is the answer to a delete_drawer of a drawer this device
// deleted before, which neither palace holds now: not found, because
// already deleted (not "the local palace holds no drawers yet").
func deletedBefore(c *call) *mcp.CallToolResult {
	id := drawerIDs(c)[0]
	return jsonResult(map[string]any{"success": false, "drawer_id": id,
		"error": "Drawer not found: " + id + " is already deleted (this device deleted it before; neither its palace nor the primary holds it)"}, false)
}

// deleteWithoutLocal: the local palace refused the delete before it ran
// (damaged: errLocalDamaged). The delete is kept as one the local palace
// took (keepDeletion: tombstones, the unsent writes of what it deletes
// cancelled, an add pipelined before it among them) and queued for the
// primary when the gateway allows it, as for a drawer the local palace
// does not hold; the answer says the local palace is unchanged.
func (e *Edge) deleteWithoutLocal(ctx context.Context, c *call, d deletion, p *pendingDeletion, damaged error) *mcp.CallToolResult {
	if len(d.marks) == 0 {
		e.takeBack(ctx, c, p)
		return localDown(damaged)
	}
	kept, _ := e.keepDeletion(ctx, c, d, len(drawerIDs(c)), p)
	kept["local"], kept["degraded"] = "refused: "+damaged.Error(), true
	out := map[string]any{"success": true, "edge": kept}
	if id, queued := kept["op_id"].(string); queued {
		out["queued"], out["op_id"] = true, id
		out["message"] = errLocalDamaged.Error() + ": the delete is queued for the primary only (its gateway keeps what it deletes in its trash); this machine's palace is unchanged until it is repaired"
	} else {
		out["message"] = errLocalDamaged.Error() + ": the delete is not sent to the primary (edge.replication says why) and this machine's palace is unchanged until it is repaired; this device's merged reads hide what it names"
	}
	return jsonResult(out, false)
}

// The answers to a drawer the local palace did not hold (its "Drawer not
// found") whose delete is queued for the primary: to be deleted there when the
// primary was seen to hold it, else queued for a primary that could not
// be asked and may not hold it either.
const (
	queuedHeld    = "queued to be deleted on the primary, which holds it (the outbox sends it; edge status shows it until then, and its gateway keeps it in its trash): this device's local palace did not hold the drawer"
	queuedUnknown = "queued for the primary, which could not be asked whether it holds the drawer and may not hold it (its gateway keeps what it deletes in its trash): this device's local palace did not hold it"
	// foundNowhere is a delete_drawers item's of an id neither palace
	// shows (leaveOutNowhere).
	foundNowhere = "nothing queued or hidden: the primary, asked, does not show this drawer either (not there, or in a wing this device may not read)"
)

// notReachableAdmin is why an admin device's delete stays local while
// the edge finds the primary down (RFC 001 §4.2: deletes are local only
// then); hiddenHere then advises deleting it again once it is back
// (attack63 F3: it told an admin device that an admin device can).
const notReachableAdmin = "the primary is not reachable, and a delete is sent only while it is"

// unnamedEntry is why a delete naming a diary entry whose copy on the
// primary this device cannot name stays local; unnamedAdmin is the same
// for an admin device, whom hiddenHere then tells how to delete it there
// (attack118 F5: it told an admin device that an admin device can).
const (
	unnamedEntry = "a diary entry has another id on the primary (written there when it was sent), and this device has no record of it (not its own write, or one no longer in its outbox)"
	unnamedAdmin = unnamedEntry + "; an edge sends a diary entry's delete only for this device's own write"
)

// hiddenHere is the answer's message for a drawer the local palace did
// not hold whose delete is not sent (why): this device's reads hide it,
// the primary keeps it (held: seen there) or may.
func hiddenHere(h holder, why string) string {
	where := "it stays on the primary"
	if h != heldPrimary {
		where = "the primary, which could not be asked, may hold it"
	}
	fix := "an admin device can delete it there"
	switch why {
	case notReachableAdmin:
		fix = "delete it again once the primary is back (this device is admin at the gateway: that delete is sent)"
	case unnamedAdmin:
		fix = "this device is admin at the gateway: a delete_drawer of the entry's id on the primary (as the primary lists it) sent to the gateway itself, not through an edge (remote mode), deletes it there, and the gateway keeps it in its trash"
	}
	return "hidden from this device's reads; " + where + ", as this delete is not sent there (" + why + "): " + fix + ", and `devbox-config edge status` lists it ON PRIMARY"
}

// deletedOnPrimary is the local answer to a delete_drawer or
// delete_drawers, told of the drawers the local palace did not hold:
// queued (queuedHeld, queuedUnknown), a delete_drawer of one the primary
// holds succeeds, and so does its item in a delete_drawers, counted
// deleted; not sent (why), a delete_drawer of one the primary holds
// succeeds as hidden here (hiddenHere), a delete_drawers' items are told
// so, the counts left as the local palace's.
func deletedOnPrimary(c *call, held map[string]holder, res *mcp.CallToolResult, kept map[string]any, why string) *mcp.CallToolResult {
	local := resultJSON(res)
	_, queued := kept["op_id"].(string)
	var out map[string]any
	switch c.tool.Name {
	case "delete_drawer":
		if local["success"] == true {
			return res
		}
		id := drawerIDs(c)[0]
		msg := queuedHeld
		switch {
		case !queued:
			msg = hiddenHere(held[id], why)
		case held[id] != heldPrimary:
			msg = queuedUnknown
		}
		out = map[string]any{"success": true, "drawer_id": id, "message": msg}
		if held[id] != heldPrimary { // nor seen on the primary: it may be nowhere
			out = map[string]any{"success": false, "drawer_id": id, "error": local["error"], "message": msg}
		}
	case "delete_drawers":
		if out = bulkQueued(held, local, queued, why); out == nil {
			return res
		}
	default:
		return res
	}
	b, err := json.Marshal(out)
	if err != nil {
		return res
	}
	return textResult(b, false, res.Meta)
}

// bulkQueued is a delete_drawers answer (local) with each item the local
// palace did not find told where its delete went (queued, or not sent:
// why), nil: none such.
func bulkQueued(held map[string]holder, local map[string]any, queued bool, why string) map[string]any {
	items, _ := local["results"].([]any)
	deleted, _ := local["deleted"].(float64)
	errs, _ := local["errors"].(float64)
	told := false
	for i, x := range items {
		it, _ := x.(map[string]any)
		id, _ := it["drawer_id"].(string)
		msg, failed := it["error"].(string)
		if !failed || !notFound(msg) {
			continue
		}
		told = true
		if held[id] == heldNowhere {
			it["message"] = foundNowhere
			continue
		}
		if !queued {
			it["message"] = hiddenHere(held[id], why)
			continue
		}
		if held[id] != heldPrimary {
			it["message"] = queuedUnknown
			continue
		}
		items[i] = map[string]any{"drawer_id": id, "message": queuedHeld}
		deleted, errs = deleted+1, errs-1
	}
	if !told {
		return nil
	}
	local["deleted"], local["errors"] = deleted, errs
	return local
}

// noSourceHere is MemPalace's answer to a delete_by_source dry run of a
// source the palace holds no drawer of.
func noSourceHere(c *call) *mcp.CallToolResult {
	return jsonResult(map[string]any{"success": true, "dry_run": true, "source_file": c.argsMap()["source_file"], "match_count": 0, "closet_match_count": 0, "sample": []any{}, "hint": "No drawers match this source_file."}, false)
}

// emptyPalaceDelete is the answer to c from a local palace that holds no
// drawers yet (MemPalace answers with an error): "Drawer not found" in
// the tool's shape, one item per id for a delete_drawers; for a
// delete_by_source, MemPalace's answer for a source it holds no drawer
// of (deleted 0).
func emptyPalaceDelete(c *call, res *mcp.CallToolResult) *mcp.CallToolResult {
	const msg = "Drawer not found: the local palace holds no drawers yet"
	out := map[string]any{"success": false, "error": msg}
	switch c.tool.Name {
	case "delete_by_source":
		out = map[string]any{"success": true, "dry_run": false, "source_file": c.argsMap()["source_file"], "deleted": 0}
	case "delete_drawers":
		ids := drawerIDs(c)
		items := make([]any, len(ids))
		for i, id := range ids {
			items[i] = map[string]any{"drawer_id": id, "error": msg}
		}
		out = map[string]any{"results": items, "count": len(ids), "deleted": 0, "errors": len(ids)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return res
	}
	return textResult(b, false, res.Meta)
}

// pendingDeletion is a delete in the outbox before its local answer: its
// note and added tombstones, and its op's intent when it goes to the
// primary (nil: none).
type pendingDeletion struct {
	del outbox.PendingDelete
	in  *intent
	// unapplied: kept without the local palace's answer, its note stays
	// until it is sent there again and answered (localdelete.go).
	unapplied bool
}

// intendDeletion puts d in the outbox before it is sent (nil: no
// tombstones, or the outbox failed; keepDeletion keeps it on the answer).
// Its op is an intent when it may go to the primary as it stands
// (notSent; a delete_by_source's count is the answer's, checked again).
func (e *Edge) intendDeletion(ctx context.Context, c *call, d deletion) *pendingDeletion {
	if len(d.marks) == 0 {
		return nil
	}
	p := &pendingDeletion{}
	opID := ""
	if q, n := d.queued(c, len(drawerIDs(c))); e.notSent(d, n) == "" {
		if p.in = e.intend(ctx, q, d.wing); p.in != nil {
			opID = p.in.op.ID
		}
	}
	call, err := wire.EncodeCallParams(c.params) // sent again if kept unapplied (nil: it cannot be)
	if err != nil {
		e.log.Warn("a delete's local call not noted: kept without the local palace's answer, it is not sent there again", "tool", c.name, "err", err)
	}
	if p.del, err = e.outbox.IntendDelete(ctx, d.marks, d.entries, d.updated, opID, call); err != nil {
		e.log.Debug("the delete's tombstones are not in the outbox before it is sent; they are kept once the local palace answers", "tool", c.name, "err", err)
		e.abandon(ctx, c, p.in)
		return nil
	}
	return p
}

// takeBack takes a delete the local palace refused (or never got) out
// of the outbox: its tombstones, its intent.
func (e *Edge) takeBack(ctx context.Context, c *call, p *pendingDeletion) {
	if p == nil {
		return
	}
	e.abandon(ctx, c, p.in)
	if err := e.outbox.DeleteRefused(context.WithoutCancel(ctx), p.del); err != nil {
		e.log.Error("a delete the local palace refused left its tombstones: merged reads hide the primary's copy", "tool", c.name, "err", err)
	}
}

// removesDrawers reports a delete of drawers (delete_by_source only with
// dry_run false, as MemPalace defaults to a dry run).
func removesDrawers(c *call) bool {
	switch c.tool.Name {
	case "delete_drawer", "delete_drawers":
		return true
	case "delete_by_source":
		return c.argsMap()["dry_run"] == false
	}
	return false
}

// deletedCount is how many drawers the local palace's answer says went,
// and whether it was a delete at all. A drawer the local palace does not
// have still counts: it is the primary's copy the agent saw and means.
func deletedCount(c *call, m map[string]any) (int, bool) {
	switch c.tool.Name {
	case "delete_drawer":
		return 1, m["success"] == true || notFound(fmt.Sprint(m["error"]))
	case "delete_drawers":
		_, ok := m["results"].([]any)
		return len(drawerIDs(c)), ok && m["error"] == nil
	}
	n, _ := m["deleted"].(float64)
	return int(n), m["success"] == true && m["dry_run"] == false
}

func drawerIDs(c *call) []string {
	args := c.argsMap()
	if id, ok := args["drawer_id"].(string); ok && c.tool.Name == "delete_drawer" {
		return []string{id}
	}
	var ids []string
	list, _ := args["drawer_ids"].([]any)
	for _, x := range list {
		if id, ok := x.(string); ok && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// deleteBase is the base a delete_drawer of drawer id (its record rec,
// found where held says) carries: the text it deletes, so that a
// gateway refuses it if the primary's is another (changed there since),
// or, when an unsent update of the drawer is queued (the delete takes it
// back, never sent), the text that update was made on. A drawer the local
// palace no longer holds because this device deleted it before (an
// admin's delete kept local while the primary was down) carries the base
// that delete kept in its tombstone: else it would land over another
// device's later edit (attack68 F2). One it never held (or whose
// tombstone kept none) carries the base of the primary's copy it read
// (attack104 F1). "": not checked (none known, or the outbox not read).
func (e *Edge) deleteBase(ctx context.Context, id, rec string, held holder) string {
	ct := gjson.Get(rec, "content")
	if held != heldLocal || ct.Type != gjson.String {
		base, err := e.outbox.DeletedBase(ctx, id)
		if err != nil {
			e.log.Warn("a deleted drawer's base not read: its delete is sent without the check on the primary's text", "drawer", id, "err", err)
		}
		if base == "" && held == heldPrimary && ct.Type == gjson.String {
			base = origin.Base(ct.Str)
		}
		return base
	}
	base, found, err := e.outbox.UnsentBase(ctx, id)
	switch {
	case err != nil:
		e.log.Warn("the outbox's unsent updates of a drawer not read: its delete is sent without the check on the primary's text", "drawer", id, "err", err)
		return ""
	case found:
		return base
	}
	return origin.Base(gjson.Get(rec, "content").Str)
}

// readDeletion reads what a delete removes before it goes: each drawer's
// record (the local palace's, else the primary's while it is up), so a
// diary entry's tombstone carries its agent, timestamp and text,
// and a delete_drawer's base (deleteBase).
func (e *Edge) readDeletion(ctx context.Context, c *call) deletion {
	var d deletion
	if c.tool.Name == "delete_by_source" {
		if src, _ := c.argsMap()["source_file"].(string); src != "" {
			d.marks = append(d.marks, outbox.Tombstone{Kind: outbox.TombSource, Key: src})
			d.updated, d.cut = e.sourceUpdates(ctx, src)
		}
		return d
	}
	for i, id := range drawerIDs(c) {
		d.marks = append(d.marks, outbox.Tombstone{Kind: outbox.TombDrawer, Key: id})
		if i >= maxRecordReads {
			continue
		}
		rec, held, cut := e.record(ctx, id)
		primary := held == heldPrimary
		d.cut = d.cut || cut
		if d.held == nil {
			d.held = map[string]holder{}
		}
		d.held[id] = held
		if c.tool.Name == "delete_drawer" {
			c.base = e.deleteBase(ctx, id, rec, held)
			d.marks[0].Base = c.base // its tombstone keeps it for a later delete (the only mark yet)
		}
		if d.wing == "" {
			d.wing = gjson.Get(rec, "wing").String()
		}
		if meta := gjson.Get(rec, "metadata"); meta.Get("type").String() == "diary_entry" || meta.Get("agent").Exists() {
			stamp := meta.Get("filed_at").String()
			en := outbox.DeletedEntry{ID: id, Agent: catalogue.PythonLower(meta.Get("agent").String()), Text: gjson.Get(rec, "content").String(),
				Wing: gjson.Get(rec, "wing").String(), Topic: meta.Get("topic").String()}
			if !primary {
				// The primary's stamp is its naive local time: never this
				// device's. An entry only the primary holds has no write
				// of this device's left to find.
				en.Written = entryTime(stamp, time.Local)
			}
			d.entries = append(d.entries, en)
			d.marks = append(d.marks, e.diaryMark(ctx, en, stamp, primary))
			d.unnamed = d.unnamed || primary || !e.entryWriteNoted(ctx, en)
		}
	}
	if c.tool.Name == "delete_drawers" {
		d.leaveOutNowhere(c)
	}
	return d
}

// sourceUpdates is the drawers with an update_drawer not landed (unsent,
// or in flight: outbox.UnsentUpdates) whose local record is of src (by
// base name, as MemPalace answers it; bounded), and whether the stop cut
// a look-up of them (beforeStop).
func (e *Edge) sourceUpdates(ctx context.Context, src string) ([]string, bool) {
	ids, err := e.outbox.UnsentUpdates(ctx)
	if err != nil {
		e.log.Warn("the unsent updates are not read: those of the drawers delete_by_source removes may still reach the primary", "err", err)
	}
	lctx, cancel := e.beforeStop(ctx)
	defer cancel()
	var out []string
	for _, id := range ids[:min(len(ids), maxRecordReads)] {
		rec, ok := usable(e.localServer.Call(lctx, getDrawer(id).params))
		if ok && baseName(gjson.Get(rec, "metadata.source_file").String()) == baseName(src) {
			out = append(out, id)
		}
	}
	return out, lctx.Err() != nil && ctx.Err() == nil
}

// drawerMarks is the tombstones of the drawers ids.
func drawerMarks(ids []string) []outbox.Tombstone {
	out := make([]outbox.Tombstone, 0, len(ids))
	for _, id := range ids {
		out = append(out, outbox.Tombstone{Kind: outbox.TombDrawer, Key: id})
	}
	return out
}

// updatesGone is the drawers among ids the local palace no longer holds:
// a delete_by_source it took removed them, so their unsent updates are
// cancelled with it (keepDeletion). known is false when a look-up got no
// answer.
func (e *Edge) updatesGone(ctx context.Context, ids []string) (gone []string, known bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.WriteGrace) // taken: its cancels must be found
	defer cancel()
	known = true
	for _, id := range ids {
		res, err := e.localServer.Call(ctx, getDrawer(id).params)
		if err == nil && e.lacksLocally(res) {
			gone = append(gone, id)
		} else if _, held := usable(res, err); !held {
			known = false
		}
	}
	return gone, known
}

// record is a drawer's get_drawer answer (its object text; "" when
// neither palace has it), and where it was found: heldNowhere when the
// local palace lacks it and the primary answered "Drawer not found" (or
// its gateway "not visible to this device"). The
// local palace is not waited for past the stop's signal (beforeStop): the
// primary's copy is read instead; cut says neither could be.
func (e *Edge) record(ctx context.Context, id string) (rec string, held holder, cut bool) {
	c := getDrawer(id)
	lctx, cancel := e.beforeStop(ctx)
	t, ok := usable(e.localServer.Call(lctx, c.params))
	cut = lctx.Err() != nil && ctx.Err() == nil
	cancel()
	if ok {
		return t, heldLocal, false
	}
	if e.remote == nil || !e.remote.Up() {
		return "", heldUnknown, cut
	}
	res, err := e.callPrimary(ctx, c, true)
	t, ok = usable(res, err)
	switch {
	case ok:
		return t, heldPrimary, false
	case !cut && (notFound(gjson.Get(t, "error").String()) || notVisible(err)):
		// A gateway answers a missing id "not visible to this device"
		// (as one it may not read): for this device it is not there.
		return "", heldNowhere, false
	}
	return "", heldUnknown, cut
}

// diaryMark is the tombstone of the diary entry en (its record's
// filed_at stamp, read from the primary when primary). It names the
// entry's copy on the primary as the primary wrote it, never by a time of
// this device's: the record itself when it is the primary's, else what
// the primary answered this device's write of it (its diary_write, or the
// checkpoint that carried it), found as the delete finds the write to
// cancel (outbox.DiaryCopy: the same op), or that write, unsent: its
// answer names the copy once it lands, unless the delete cancels it. An
// entry whose copy is not known (not this device's write, its op long
// pruned, or landed by a look-up) hides nothing on the primary.
func (e *Edge) diaryMark(ctx context.Context, en outbox.DeletedEntry, stamp string, primary bool) outbox.Tombstone {
	t := outbox.Tombstone{Kind: outbox.TombDiary, Key: en.ID, Agent: en.Agent, Stamp: stamp, Text: en.Text}
	if primary {
		t.Copies = []string{t.Stamp}
		return t
	}
	copyAt, op, err := e.outbox.DiaryCopy(ctx, en)
	if err != nil {
		e.log.Warn("a deleted diary entry's write not found in the outbox: merged reads may show its copy on the primary", "err", err)
	}
	if copyAt != "" {
		t.Copies = []string{copyAt}
	}
	t.WriteOp = op
	return t
}

// entryWriteNoted reports that this device's write of the diary entry en
// is in the outbox, noted for its local id: a delete sent later names the
// entry's copy on the primary by that write's answer (outbox primaryIDs).
func (e *Edge) entryWriteNoted(ctx context.Context, en outbox.DeletedEntry) bool {
	ok, err := e.outbox.NoteEntryWrite(ctx, en)
	if err != nil {
		e.log.Warn("a deleted diary entry's write not noted: the delete is not sent to the primary", "err", err)
	}
	return ok
}

// awaitDiarySends waits for the sends in flight of the deleted diary
// entries' writes (the delete cancelled the unsent ones): the primary may
// have applied one whose answer, which names its copy there, is not back,
// and until it is, merged reads would show the entry just deleted. The
// wait is bounded by the call timeout, as the send is: one that fails
// leaves its op queued, maybe applied, and the look-up that lands it
// names the copy (outbox landedCopy), showing it meanwhile.
func (e *Edge) awaitDiarySends(ctx context.Context, marks []outbox.Tombstone) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	for _, t := range marks {
		if t.WriteOp == "" {
			continue
		}
		if o, err := e.outbox.GetByID(ctx, t.WriteOp); err == nil && o.State == outbox.Inflight {
			if _, err := e.outbox.Wait(ctx, t.WriteOp); err != nil {
				e.log.Warn("a deleted diary entry's send is still out: merged reads may show its copy on the primary until its answer is back", "op", t.WriteOp, "err", err)
			}
		}
	}
}

// getDrawer is the edge's own get_drawer call for id.
func getDrawer(id string) *call {
	return newCall(&mcp.CallToolParams{Name: catalogue.Prefix + "get_drawer", Arguments: map[string]any{"drawer_id": id}})
}

// keepDeletion records the tombstones, cancels the unsent writes of what
// went and, when the gateway allows it, queues the delete for the primary
// (p's intent, when there is one); it says which (the answer's "edge"),
// and why not sent ("": it may be, on the drawers the primary may hold).
func (e *Edge) keepDeletion(ctx context.Context, c *call, d deletion, n int, p *pendingDeletion) (map[string]any, string) {
	ctx = context.WithoutCancel(ctx) // taken locally: it must reach the outbox
	c, n = d.queued(c, n)
	why := e.notSent(d, n)
	var in *intent
	if p != nil {
		in = p.in
		defer func() {
			if p.unapplied {
				if err := e.outbox.DeleteUnapplied(ctx, p.del); err != nil {
					e.log.Error("a delete kept without the local palace's answer is not noted for it: the local palace may keep the drawer", "err", err)
				}
				return
			}
			if err := e.outbox.DeleteSettled(ctx, p.del); err != nil {
				e.log.Warn("a kept delete's note stays in the outbox: the next edge start cancels its unsent writes again", "err", err)
			}
		}()
	}
	if err := e.outbox.AddTombstones(ctx, d.marks); err != nil {
		e.log.Error("a delete's tombstone not kept: merged reads may show the primary's copy", "tool", c.name, "err", err)
		e.abandon(ctx, c, in)
		return map[string]any{"tombstone": fmt.Sprintf("not kept: %v", err)}, why
	}
	out := map[string]any{"tombstone": "hidden from this device's merged reads; writing the same content again shows that new write, not this one"}
	cancelled, err := e.outbox.CancelDeleted(ctx, d.marks, d.entries)
	if err != nil {
		e.log.Error("a deleted drawer's unsent writes not cancelled: they may still reach the primary", "tool", c.name, "err", err)
	}
	e.awaitDiarySends(ctx, d.marks)
	if cancelled > 0 {
		out["cancelled"] = fmt.Sprintf("%d add(s), update(s) or checkpoint(s) not yet sent: never sent to the primary with what was deleted", cancelled)
	}
	if why != "" {
		e.abandon(ctx, c, in)
		out["replication"] = "local only: " + why + "; `devbox-config edge status` names what the primary still holds"
		return out, why
	}
	q := e.settle(ctx, c, d.wing, in, "", 0)
	if id, ok := q["op_id"].(string); ok {
		if err := e.outbox.TombstonesSent(ctx, d.marks, id); err != nil {
			e.log.Warn("a tombstone not linked to its queued delete: it stays after the delete lands", "err", err)
		}
	}
	maps.Copy(out, q)
	return out, why
}

// notSent says why a delete stays local ("": it may be sent). RFC 001
// §4.2: admin-scoped only, never a hard delete remotely (so only behind a
// gateway that keeps a trash), and local only while the primary is down.
func (e *Edge) notSent(d deletion, n int) string {
	if d.unnamed {
		if in, ok := e.device(); ok && in.Admin {
			return unnamedAdmin
		}
		return unnamedEntry
	}
	if e.remote == nil || !e.remote.Up() {
		if in, ok := e.device(); ok && in.Admin {
			return notReachableAdmin
		}
		return "the primary is not reachable"
	}
	info, ok := e.remote.Device()
	switch {
	case !ok:
		return "the primary is not a devbox-config gateway (nothing there could undo a delete)"
	case !info.Admin:
		return "this device is not admin-scoped at the gateway"
	case !info.Trash:
		return "the gateway keeps no trash"
	case n > info.DeleteCap && !info.BulkDelete:
		return fmt.Sprintf("%d drawers is over the gateway's delete cap of %d, and this device has no bulk-delete grant", n, info.DeleteCap)
	case bySource(d) && !(slices.Contains(info.Read, "*") && slices.Contains(info.Write, "*")):
		// The gateway refuses it (-31003) until dead: its drawers would
		// stay on the primary under an answer that says queued.
		return `delete_by_source acts on the whole palace, and the gateway takes it only from an admin device that reads and writes every wing ("*"); delete the drawers by id with delete_drawers`
	}
	return ""
}

// bySource reports a delete_by_source's deletion (its source tombstone).
func bySource(d deletion) bool {
	return slices.ContainsFunc(d.marks, func(t outbox.Tombstone) bool { return t.Kind == outbox.TombSource })
}

// lift removes the tombstones a write the local palace took recreates:
// the drawer ids add_drawer and checkpoint items make; a source's stays,
// showing the drawers the write files of it (the deleted ones stay
// hidden).
// A diary entry of the same text by the same agent is another entry (its
// copy on the primary has another id and timestamp): the deleted one's
// tombstone keeps hiding that one's copy (lifted_at only notes the rewrite).
func (e *Edge) lift(ctx context.Context, c *call) {
	if e.outbox == nil {
		return
	}
	args := c.argsMap()
	var drawers, texts []string
	sources := map[string][]string{}
	var agent string
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	drawer := func(m map[string]any) {
		id := catalogue.DrawerID(str(m, "wing"), str(m, "room"), str(m, "content"))
		drawers = append(drawers, id)
		if s := str(m, "source_file"); s != "" {
			sources[s] = append(sources[s], id)
		}
	}
	diary := func(m map[string]any) {
		agent = strings.ToLower(str(m, "agent_name"))
		texts = append(texts, str(m, "entry"), str(m, "content"))
	}
	switch c.tool.Name {
	case "add_drawer":
		drawer(args)
	case "diary_write":
		diary(args)
	case "checkpoint":
		items, _ := args["items"].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				drawer(m)
			}
		}
		if m, ok := args["diary"].(map[string]any); ok {
			diary(m)
		}
	default:
		return
	}
	if err := e.outbox.LiftTombstones(ctx, drawers, sources, agent, texts); err != nil {
		e.log.Warn("a write that recreates deleted content did not lift its tombstone: merged reads still hide the primary's copy", "tool", c.name, "err", err)
	}
}

// tombs is the tombstones as merged reads match them.
type tombs struct {
	drawers map[string]bool
	sources map[string]bool // base names: MemPalace answers cut source_file to it
	shown   map[string]bool // drawers of a tombstoned source filed since: they show
	diary   []outbox.Tombstone
	// copies are the ids on the primary of the deleted diary entries'
	// copies, each as its wing's prefix and stamp (copyKey): the primary
	// names an entry's drawer by the instant it wrote it, which is the
	// timestamp the tombstone keeps (Copies).
	copies map[string]bool
}

// copyKey is a diary entry id's identity on the palace that wrote it:
// its "diary_<wing>_" prefix and the stamp of the instant it was written
// there, without the text hash an edit or a splice may have changed; ""
// for another drawer's id (a chunk's is its entry's).
func copyKey(id string) string {
	prefix, stamp := entryPrefix(catalogue.DrawerOfRow(id))
	return prefix + stamp
}

// entryPrefix splits a diary entry id into its "diary_<wing>_" prefix
// and its stamp (both "": not a diary entry's id).
func entryPrefix(id string) (prefix, stamp string) {
	stamp, suffix, ok := catalogue.DiaryEntryID(id)
	if !ok {
		return "", ""
	}
	return id[:len(id)-len(suffix)-len(stamp)-1], stamp
}

// tombstones reads them (none when the outbox is unavailable or cannot be
// read: a read is never refused for it, and the failure is logged).
func (e *Edge) tombstones(ctx context.Context) tombs {
	var t tombs
	if e.outbox == nil {
		return t
	}
	ts, err := e.outbox.Tombstones(ctx)
	if err != nil {
		e.log.Warn("tombstones unreadable: merged reads may show records this device deleted", "err", err)
		return t
	}
	t.drawers, t.sources, t.shown, t.copies = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, x := range ts {
		switch x.Kind {
		case outbox.TombDrawer:
			t.drawers[x.Key] = true
		case outbox.TombSource:
			t.sources[baseName(x.Key)] = true
			for _, id := range x.Shown {
				t.shown[id] = true
			}
		case outbox.TombDiary:
			t.diary = append(t.diary, x)
			prefix, _ := entryPrefix(x.Key) // the copy is in the deleted entry's wing
			for _, c := range x.Copies {
				if st := entryStamp(c); prefix != "" && st != "" {
					t.copies[prefix+st] = true
				}
			}
		}
	}
	return t
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// hideTombstoned drops from a primary's answer of shape the records this
// device deleted, and says how many went; an answer with nothing to drop
// is returned as it is.
func (e *Edge) hideTombstoned(ctx context.Context, shape catalogue.Filter, res *mcp.CallToolResult) (*mcp.CallToolResult, int) {
	text, ok := objectText(res)
	if !ok || res.IsError {
		return res, 0
	}
	t := e.tombstones(ctx)
	if len(t.drawers)+len(t.sources)+len(t.diary) == 0 {
		return res, 0
	}
	var list string
	var drop func(gjson.Result) bool
	switch shape {
	case catalogue.FilterHits:
		list, drop = "results", func(h gjson.Result) bool {
			return t.hides(h.Get("drawer_id").String(), h.Get("source_file").String())
		}
	case catalogue.FilterDrawers:
		list, drop = "drawers", func(d gjson.Result) bool {
			return t.hides(d.Get("drawer_id").String(), d.Get("metadata.source_file").String())
		}
	case catalogue.FilterMatches:
		list, drop = "matches", func(m gjson.Result) bool { // a long drawer matches by its chunks' rows
			id := m.Get("id").String()
			return t.drawers[catalogue.DrawerOfRow(id)] || t.copies[copyKey(id)]
		}
	case catalogue.FilterDiary:
		agent := strings.ToLower(gjson.Get(text, "agent").String())
		list, drop = "entries", func(en gjson.Result) bool { return t.diaryHides(agent, en) }
	default:
		return res, 0
	}
	out, n := dropFrom(text, list, drop, "count", "showing", "total") // hidden: not there for this device
	if n == 0 {
		return res, 0
	}
	return textResult(out, false, res.Meta), n
}

// hides reports a primary drawer (id, of source) a tombstone names: by
// its id, or by its source's file name unless this device filed it of
// that source since the delete.
func (t tombs) hides(id, source string) bool {
	return t.drawers[id] || t.copies[copyKey(id)] || t.sources[baseName(source)] && !t.shown[id]
}

// diaryHides reports a primary diary entry a tombstone names: the same
// agent, with the timestamp of one of the deleted entry's copies, exactly
// as the primary wrote it (the instant its id is named by, so every
// chunk of a long entry). The copy is named by its identity, not its
// text: the deleted entry may have been edited here with the edit never
// sent (attack99 F10: its copy kept the old text). No time of this
// device's is compared with the primary's (a 3.11 primary writes its own
// naive local time: another zone, another clock), so the same text
// written again, another copy, is never hidden.
func (t tombs) diaryHides(agent string, en gjson.Result) bool {
	at := en.Get("timestamp").String()
	if at == "" {
		return false
	}
	for _, x := range t.diary {
		if x.Agent == agent && slices.Contains(x.Copies, at) {
			return true
		}
	}
	return false
}

// maxHiddenRoom bounds the records a read asks the primary for beyond
// the page, for the ones the tombstones may hide.
const maxHiddenRoom = 100

// mostRows is the most rows MemPalace answers a diary_read or a search
// (diary_read's cap on last_n, search's _MAX_RESULTS): a page refilled
// past the hidden rows is asked no wider (the gateway's refill's too).
const mostRows = 100

// pageOf is the list a read's page is, the argument that sizes it and
// its default ("" for a read not paged).
func pageOf(shape catalogue.Filter) (list, key string, def int) {
	switch shape {
	case catalogue.FilterHits:
		return "results", "limit", 5
	case catalogue.FilterDiary:
		return "entries", "last_n", 10
	case catalogue.FilterDrawers:
		return "drawers", "limit", 20
	}
	return "", "", 0
}

// roomForHidden is c with its page widened by as many records as the
// tombstones may hide from the primary's answer (bounded), so the hidden
// ones do not eat the page: search's limit, diary_read's last_n,
// list_drawers' limit; and the size asked (0: c as it came). A diary
// entry's copy counts one, though the primary holds a long one as a row
// per chunk: primaryPage asks again wider when the hidden rows thinned
// the page. cutToAsked cuts the answer back after hiding.
func (e *Edge) roomForHidden(ctx context.Context, c *call) (*call, int) {
	_, key, def := pageOf(c.tool.Filter)
	if key == "" {
		return c, 0
	}
	t := e.tombstones(ctx)
	extra := len(t.drawers) + len(t.sources) + len(t.copies)
	if c.tool.Filter == catalogue.FilterDiary {
		extra = 0
		for _, x := range t.diary {
			extra += len(x.Copies)
		}
	}
	if extra == 0 {
		return c, 0
	}
	return withSize(c, key, intArg(c.argsMap(), key, def)+min(extra, maxHiddenRoom))
}

// withSize is c with its page's size argument key set to n, and n (c and
// 0 when its arguments do not encode: plain values, they do).
func withSize(c *call, key string, n int) (*call, int) {
	args := maps.Clone(c.argsMap())
	args[key] = n
	w, err := c.with(args)
	if err != nil {
		return c, 0
	}
	return w, n
}

// primaryPage is the primary's answer to c (by ask) with the records
// this device deleted hidden, cut to the page args asked for: a
// diary_read's last_n newest entries it sees, a search's limit best
// hits. Asked with room for the hidden (roomForHidden), a page they
// still thinned below the size asked is asked again, as the gateway
// refills one its withheld records thinned: wider by what was hidden, at
// least twice as wide, at most mostRows, until the records left fill the
// page or the primary has no more. A search's records are its hits as
// mergeSearch merges them: MemPalace 3.11 answers a row per matching
// chunk, each with its drawer's id, so a long drawer's rows are one hit
// and thin a page as hidden rows do (attack104 F3), with no tombstone
// too. A page still short at mostRows says so (shortPage), and so does
// one a wider ask failed for. (list_drawers pages the union itself:
// mergedpage.go.)
func (e *Edge) primaryPage(ctx context.Context, c *call, shape catalogue.Filter, args map[string]any, ask func(context.Context, *call) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	w, asked := e.roomForHidden(ctx, c)
	res, err := ask(ctx, w)
	res, hidden := e.hideTombstoned(ctx, shape, res)
	_, key, def := pageOf(shape)
	if err != nil || key == "" || shape == catalogue.FilterDrawers {
		return cutToAsked(shape, res, args), err
	}
	want := min(intArg(args, key, def), mostRows)
	asked = cmp.Or(asked, want)
	records, rows := pageCount(shape, res)
	for records < want && rows+hidden >= min(asked, mostRows) && asked < mostRows {
		wider, n := withSize(c, key, min(max(2*asked, want+hidden), mostRows))
		more, err := ask(ctx, wider)
		if t, ok := usable(more, err); !ok || n == 0 {
			why := cmp.Or(gjson.Get(t, "error").String(), "an answer not to be read")
			if err != nil {
				why = err.Error()
			}
			e.log.Warn("a thinned page asked again wider: the primary did not answer", "tool", c.tool.Name, "asked", n, "error", why)
			return cutToAsked(shape, shortPage(res, hidden, fmt.Sprintf("%d of the %s %d rows the primary gave are of records this device deleted (hidden), and asked for more it did not answer (%s): %s ones it may hold are not on this page", hidden, firstRows(shape), asked, why, laterRows(shape))), args), nil
		}
		res, asked = more, n
		res, hidden = e.hideTombstoned(ctx, shape, res)
		records, rows = pageCount(shape, res)
	}
	if records < want && rows+hidden >= mostRows {
		res = shortPage(res, hidden, fmt.Sprintf("the %s %d rows the primary gives hold %d of records this device deleted (hidden) and %d rows of the %d records it sees; %s ones are past them, and %s reads no further: ask for fewer, or narrow the read", firstRows(shape), mostRows, hidden, rows, records, laterRows(shape), c.tool.Name))
	}
	return cutToAsked(shape, res, args), nil
}

// firstRows and laterRows name the order of shape's rows: a search's by
// likeness to the query (attack107 F6: its page was said to be of the
// newest rows), a diary's by time.
func firstRows(shape catalogue.Filter) string {
	if shape == catalogue.FilterHits {
		return "best"
	}
	return "newest"
}

func laterRows(shape catalogue.Filter) string {
	if shape == catalogue.FilterHits {
		return "less similar"
	}
	return "older"
}

// pageCount is how many records res's page holds, and in how many rows:
// a search hit per drawer (hitKey: a long drawer's chunk rows are one),
// any other page's a record a row.
func pageCount(shape catalogue.Filter, res *mcp.CallToolResult) (records, rows int) {
	list, _, _ := pageOf(shape)
	t, _ := objectText(res)
	arr := gjson.Get(t, list).Array()
	if shape != catalogue.FilterHits {
		return len(arr), len(arr)
	}
	seen := map[string]bool{}
	for _, h := range arr {
		seen[hitKey(h)] = true
	}
	return len(seen), len(arr)
}

// hitKey is the hit a search row is, as mergeSearch merges one side's
// rows: its drawer_id (or its text's identity, for a 3.6 hit with none).
func hitKey(h gjson.Result) string { return readHit(h).key }

// shortPage is res saying its page is short of the size asked though the
// primary was read as far as it goes (or a wider ask failed, why): in
// hidden_cut when rows this device deleted thinned it, else (a long
// drawer's chunk rows alone) as MemPalace 3.11 says a page its folded
// copies left short, distinct_results_truncated.
func shortPage(res *mcp.CallToolResult, hidden int, why string) *mcp.CallToolResult {
	if hidden > 0 {
		return hiddenCut(res, why)
	}
	t, _ := objectText(res)
	out, err := sjson.SetBytes([]byte(t), "distinct_results_truncated", true)
	if err != nil {
		return res // an object text (usable): it takes a member
	}
	return textResult(out, false, res.Meta)
}

// hiddenCut is res with its hidden_cut member set to why.
func hiddenCut(res *mcp.CallToolResult, why string) *mcp.CallToolResult {
	t, _ := objectText(res)
	out, err := sjson.SetBytes([]byte(t), "hidden_cut", why)
	if err != nil {
		return res // an object text (usable): it takes a member
	}
	return textResult(out, false, res.Meta)
}

// cutToAsked cuts a primary's answer widened by roomForHidden or
// primaryPage back to the page args asked for: a search's to its limit
// best hits, one row of each drawer (list_drawers' is cut by its merge).
func cutToAsked(shape catalogue.Filter, res *mcp.CallToolResult, args map[string]any) *mcp.CallToolResult {
	path, key, def := pageOf(shape)
	if shape == catalogue.FilterDrawers || key == "" {
		return res
	}
	n := intArg(args, key, def)
	text, ok := objectText(res)
	if !ok || res.IsError || n <= 0 {
		return res
	}
	arr := gjson.Get(text, path)
	if !arr.IsArray() || len(arr.Array()) <= n && shape != catalogue.FilterHits { // a search's page within n may repeat a drawer (review33 R2)
		return res
	}
	kept := map[string]bool{} // a search's n best hits, a row each: mergeSearch keeps a drawer's first row
	out, cut := dropFrom(text, path, func(r gjson.Result) bool {
		k := fmt.Sprint(len(kept))
		if shape == catalogue.FilterHits {
			k = hitKey(r)
		}
		if kept[k] || len(kept) == n {
			return true
		}
		kept[k] = true
		return false
	}, "count", "showing")
	if cut == 0 {
		return res
	}
	return textResult(out, false, res.Meta)
}

// dropFrom is text with the elements of its array at path for which drop
// holds taken out (the others as they came), and how many went; the
// numbers at keys go down by as many.
func dropFrom(text, path string, drop func(gjson.Result) bool, keys ...string) ([]byte, int) {
	arr := gjson.Get(text, path)
	if !arr.IsArray() {
		return []byte(text), 0
	}
	kept := []json.RawMessage{}
	n := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		if v.IsObject() && drop(v) {
			n++
		} else {
			kept = append(kept, json.RawMessage(v.Raw))
		}
		return true
	})
	if n == 0 {
		return []byte(text), 0
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return []byte(text), 0 // raw elements of a valid array: they encode
	}
	out, err := sjson.SetRawBytes([]byte(text), path, b)
	if err != nil {
		return []byte(text), 0
	}
	for _, k := range keys {
		if c := gjson.GetBytes(out, k); c.Type == gjson.Number {
			out, _ = sjson.SetBytes(out, k, c.Int()-int64(n)) // out is an object text: it takes a member
		}
	}
	return out, n
}
