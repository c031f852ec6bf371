package edge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/pyjson"
	"github.com/joakimp/devbox-config/strictjson"
)

// write: local first, the agent gets the local result; a successful write
// to a replicated wing is enqueued for the primary, under the exact name
// the agent called it by, with the agent's own argument bytes.
func (e *Edge) write(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	e.resending.RLock() // no kept delete is sent again behind it before its lift (localdelete.go)
	defer e.resending.RUnlock()
	var oldWing string
	if c.tool.Wings == catalogue.DrawerWing {
		var cut bool
		if oldWing, cut = e.localWing(ctx, c); cut {
			return nil, e.errNotApplied() // never sent: the policy's wing unknown
		}
	}
	if res := e.refusedUpFront(ctx, c, oldWing); res != nil {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled before it was sent: the local palace never saw it
	}
	c.dated(time.Now()) // both palaces date a KG end alike (kgdate.go)
	// In the outbox before it is sent, as an intent the local answer
	// settles (outbox/intent.go): a kill while the local palace is at it
	// leaves it for the next edge to send.
	in := e.intend(ctx, c, oldWing)
	if e.beforeSend != nil {
		e.beforeSend(ctx)
	}
	// Sent, it is applied locally whatever becomes of the call: its answer
	// is waited for (bounded) and the write queued (sentwrite.go).
	ctx, end, ok := e.sendingWrite(ctx)
	defer end()
	if !ok {
		e.abandon(ctx, c, in)
		return nil, e.errNotApplied() // the stop came first: never sent
	}
	since := e.firstRun()
	raw, lerr := e.localServer.Call(ctx, c.params)
	if errors.Is(lerr, ErrLocalDown) {
		if !errors.Is(lerr, errChildExited) {
			e.abandon(ctx, c, in) // never sent: writeWithoutLocal decides
			in = nil
		}
		return e.writeWithoutLocal(ctx, c, oldWing, lerr, since, in)
	}
	if damaged := localDamaged(lerr); damaged != nil {
		e.abandon(ctx, c, in) // refused before it ran: as if never sent
		return e.writeWithoutLocal(ctx, c, oldWing, damaged, since, nil)
	}
	if lerr != nil && ctx.Err() != nil {
		if err := e.keepGivenUp(ctx, c, oldWing, in); err != nil {
			return nil, err
		}
		in = nil
	}
	res, err := localAnswer(raw, lerr)
	if err != nil || res == nil {
		e.abandon(ctx, c, in)
		return res, err
	}
	return e.locallyApplied(ctx, c, oldWing, in, res), nil
}

// keepGivenUp queues a write whose local answer was given up (the write
// grace after a cancel is over, the stop's grace, or the write bound):
// the local palace may still apply it, so it is queued all the same; if
// it never does, the primary has a write this palace lacks, which reads
// show. Its error answers the call: the stop's or the write bound's
// (maybe applied, queued); nil for a cancel's.
func (e *Edge) keepGivenUp(ctx context.Context, c *call, oldWing string, in *intent) error {
	e.log.Error("the local palace did not answer a write within the write grace after its call was cancelled, the stop grace, or the write bound; it is queued for the primary all the same (the local palace may or may not apply it)", "tool", c.name)
	e.lift(context.WithoutCancel(ctx), c)
	e.settle(ctx, c, oldWing, in, "", 0) // no answer: the local entry id is unknown
	if e.writes.givenUp().Err() != nil {
		return e.errStopping(true)
	}
	return e.unanswered(ctx)
}

// locallyApplied finishes a write the local palace answered: one it
// refused is not replicated (a drawer or a room it lacks is decided
// elsewhere); one it applied is settled in the outbox for the primary.
func (e *Edge) locallyApplied(ctx context.Context, c *call, oldWing string, in *intent, res *mcp.CallToolResult) *mcp.CallToolResult {
	if c.tool.Wings == catalogue.DrawerWing && e.lacksLocally(res) {
		e.abandon(ctx, c, in) // writeShared decides
		return e.writeShared(ctx, c, res)
	}
	if c.tool.Name == "create_tunnel" && roomNotHere.MatchString(fmt.Sprint(resultJSON(res)["error"])) {
		e.abandon(ctx, c, in) // tunnelShared decides
		return e.tunnelShared(ctx, c, res)
	}
	if m := resultJSON(res); res.IsError || m["success"] == false || m["error"] != nil {
		e.abandon(ctx, c, in)
		return res // the local palace refused it: nothing to replicate
	}
	e.lift(ctx, c) // a write that recreates deleted content (tombstone.go)
	ordinal := replayOf(c, resultJSON(res))
	if e.endsNothingHere(ctx, c) {
		ordinal = outbox.EndsNothing
	}
	edge := e.settle(ctx, c, oldWing, in, localEntry(c, resultJSON(res)), ordinal)
	if id, ok := c.argsMap()["drawer_id"].(string); ok && c.tool.Name == "update_drawer" && c.argsMap()["content"] != nil {
		e.ownAgain(id) // its text is this device's now (settle's Promote forgot the taken writer)
	}
	if c.tool.Records != "" { // a checkpoint's duplicates: local records; other writes carry none
		res = e.marks().result(res, c.tool.Records, origin.PalaceLocal)
	}
	return annotate(res, edge, false)
}

// endsNothingHere reports a kg_invalidate (kg_supersede) of a triple
// (old object) the local palace holds no fact of, open or closed (its
// kg_query of the subject, after the end: an end neither adds nor removes
// that fact): MemPalace answered it success and ended nothing (opened the
// new object, as an add). Its op is marked (outbox.EndsNothing) so that
// the gateway's -32035 (the primary holds none either) settles it (done;
// a supersede sent as its add), not refused until dead with its objects'
// later KG writes held behind it (review32 R5); an end of a fact only the
// primary holds still lands there. A look-up that fails marks nothing.
func (e *Edge) endsNothingHere(ctx context.Context, c *call) bool {
	obj := map[string]string{"kg_invalidate": "object", "kg_supersede": "old_object"}[c.tool.Name]
	if obj == "" {
		return false
	}
	a := c.argsMap()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.CallTimeout)
	defer cancel()
	q := newCall(&mcp.CallToolParams{Name: catalogue.Prefix + "kg_query", Arguments: map[string]any{"entity": a["subject"], "direction": "outgoing"}})
	res, err := e.localServer.Call(lctx, q.params)
	facts, ok := resultJSON(res)["facts"].([]any)
	if err != nil || !ok {
		return false
	}
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if catalogue.EntityID(fmt.Sprint(f["subject"])) == catalogue.EntityID(fmt.Sprint(a["subject"])) &&
			catalogue.PredicateID(fmt.Sprint(f["predicate"])) == catalogue.PredicateID(fmt.Sprint(a["predicate"])) &&
			catalogue.EntityID(fmt.Sprint(f["object"])) == catalogue.EntityID(fmt.Sprint(a[obj])) {
			return false
		}
	}
	return true
}

// intent is a write in the outbox before its local answer: the op, and
// whether it waits for the policy to parse (held) once the answer comes.
type intent struct {
	op     outbox.Op
	polErr error // the policy did not parse: held
}

// intend puts c in the outbox as an intent, as the policy says (nil: no
// op, for a write the policy keeps local, or no outbox; or the outbox
// failed, and settle tries again with the local answer).
func (e *Edge) intend(ctx context.Context, c *call, oldWing string) *intent {
	if e.outbox == nil {
		return nil
	}
	w, polErr, ok := e.outboxWrite(ctx, c, oldWing)
	if !ok || w.Payload == nil {
		return nil
	}
	w.Intent = true
	op, err := e.outbox.Enqueue(ctx, w)
	if err != nil {
		e.log.Debug("the write's intent is not in the outbox; it is queued once the local palace answers", "tool", c.name, "err", err)
		return nil
	}
	return &intent{op: op, polErr: polErr}
}

// settle queues a write the local palace took (its intent promoted; with
// none, queue), and says what became of it (the answer's "edge" object).
// ordinal is replayOf's.
func (e *Edge) settle(ctx context.Context, c *call, oldWing string, in *intent, entry string, ordinal int) map[string]any {
	if in == nil {
		return e.queue(ctx, c, oldWing, entry, ordinal)
	}
	ctx = context.WithoutCancel(ctx) // taken locally: it must reach the outbox's queue
	in.op.Ordinal = ordinal
	op, err := e.outbox.Promote(ctx, in.op, in.polErr != nil, entry)
	if err != nil {
		e.log.Error("the write the local palace took stays in the outbox unqueued; the next edge start (or `edge flush`) sends it", "tool", c.name, "op", in.op.Short(), "err", err)
		return map[string]any{"replication": fmt.Sprintf("not queued yet: %v; the next edge start sends it", err), "op_id": in.op.ID}
	}
	_ = e.recordStayed() // refused: kept counted for the next try
	return e.queuedNote(ctx, op, in.polErr)
}

// abandon takes back the intent of a write the local palace refused (or
// never got): it is never sent.
func (e *Edge) abandon(ctx context.Context, c *call, in *intent) {
	if in == nil {
		return
	}
	taken, err := e.outbox.Abandon(context.WithoutCancel(ctx), in.op)
	switch {
	case err != nil:
		e.log.Error("a write the local palace refused could not be taken out of the outbox; the next edge start may send it (`devbox-config edge outbox drop` stops that)", "tool", c.name, "op", in.op.Short(), "err", err)
	case !taken:
		e.log.Warn("a write the local palace refused had already been sent by another edge process sharing this palace, which took it for one a killed edge left (if the primary did not apply it, it is not sent again)", "tool", c.name, "op", in.op.Short())
	}
}

// resolveLeft resolves what an edge killed mid-write left in the outbox
// (resolveIntents) and releases the held ops by the policy, if it parses:
// at the edge's start, and from the flusher (outbox.Flusher.Adopt) when
// another edge on this palace dies while this one runs. It releases once:
// not through currentPolicy, which releases too when the policy has just
// come to parse.
func (e *Edge) resolveLeft(ctx context.Context) {
	e.resolveIntents(ctx)
	if pol, err, _ := e.pw.current(); err == nil {
		e.release(ctx, pol)
	}
}

// resolveIntents holds the intents an edge killed mid-write left in the
// outbox, for the policy to release (outbox/intent.go says why they are
// sent, not checked against the local palace). Those of another edge on
// this palace that still runs are left to it (outbox/live.go).
func (e *Edge) resolveIntents(ctx context.Context) {
	n, err := e.outbox.ResolveIntents(ctx)
	switch {
	case err != nil:
		e.log.Error("writes (or deletes) an edge stopped mid-write left in the outbox stay there unsent", "err", err)
	case n > 0:
		e.log.Warn("writes and deletes an edge stopped mid-write left in the outbox are kept and queued for the primary (the local palace may or may not have applied them)", "writes", n)
	}
}

// replayOf is the outbox's Ordinal for a write the local palace answered
// m: 1 for an add_drawer it answered already_exists (MemPalace 3.11.0's
// answer to a drawer it holds), a replay of its copy, which a gateway
// does not file again when an admin deleted it on the primary; for a
// checkpoint, the items it listed among its duplicates matching the very
// drawer each would file (its copy), as bits (outbox.ReplayItems); else 0.
func replayOf(c *call, m map[string]any) int {
	switch c.tool.Name {
	case "add_drawer":
		if m["reason"] == "already_exists" {
			return 1
		}
	case "checkpoint":
		return replayedItems(c.argsMap(), m)
	}
	return 0
}

// replayedItems is the bits of a checkpoint's items (of arguments args)
// whose drawer id (the one its wing, room and content give) is a match of
// a duplicate in the local palace's answer m: bit i, item i (the first
// outbox.MaxReplayItems items; a later one is sent unmarked).
func replayedItems(args, m map[string]any) int {
	held := map[string]bool{}
	dups, _ := m["duplicates"].([]any)
	for _, d := range dups {
		dm, _ := d.(map[string]any)
		matches, _ := dm["matches"].([]any)
		for _, x := range matches {
			if mm, ok := x.(map[string]any); ok {
				id, _ := mm["id"].(string)
				held[id] = true
			}
		}
	}
	bits := 0
	items, _ := args["items"].([]any)
	for i, x := range items[:min(len(items), outbox.MaxReplayItems)] {
		it, _ := x.(map[string]any)
		w, _ := it["wing"].(string)
		r, _ := it["room"].(string)
		content, _ := it["content"].(string)
		if held[catalogue.DrawerID(w, r, content)] {
			bits |= 1 << i
		}
	}
	return bits
}

// localEntry is the local palace's id of the diary entry a diary_write
// or checkpoint answer says it wrote ("": none).
func localEntry(c *call, m map[string]any) string {
	if c.tool.Name != "diary_write" && c.tool.Name != "checkpoint" {
		return ""
	}
	if d, ok := m["diary"].(map[string]any); ok {
		m = d
	}
	id, _ := m["entry_id"].(string)
	if cp, _ := m["diary_entry_id"].(string); cp != "" {
		id = cp
	}
	return id
}

// queue puts a write the local palace took in the outbox as the policy
// says, and says what became of it (the agent's answer's "edge" object).
// entry is the local id of the diary entry it wrote ("": none): the
// outbox notes it, so a delete of that entry finds its op; ordinal is
// replayOf's.
func (e *Edge) queue(ctx context.Context, c *call, oldWing, entry string, ordinal int) map[string]any {
	// The local palace took the write: it goes in the outbox even if the
	// call is cancelled now (by the agent, or the edge stopping), or it
	// would never reach the primary.
	ctx = context.WithoutCancel(ctx)
	w, polErr, ok := e.outboxWrite(ctx, c, oldWing)
	if !ok {
		return map[string]any{"replication": "local only (policy)"}
	}
	if e.outbox == nil { // counted as a full disk's are: a join sends it
		e.stayLocal()
		return map[string]any{"replication": fmt.Sprintf("not replicated: outbox unavailable: %v: this write stays in this devbox's palace only; once the outbox opens again, `devbox-config join` sends it to the primary", e.obErr)}
	}
	if w.Payload == nil {
		return map[string]any{"replication": "not replicated: its arguments could not be read"}
	}
	w.Entry, w.Ordinal = entry, ordinal
	op, err := e.outbox.Enqueue(ctx, w)
	if err != nil {
		e.log.Error("outbox write failed; the local write stands but is not replicated", "tool", c.name, "err", err)
		if errors.As(err, new(*outbox.TooLargeError)) {
			return map[string]any{"replication": fmt.Sprintf("not replicated: %v; the write stays in this devbox's palace only", err)}
		}
		e.stayLocal()
		return map[string]any{"replication": fmt.Sprintf("not replicated: %v: this write stays in this devbox's palace only; once the outbox can be written again (free disk space under %s if it is full), `devbox-config join` sends it to the primary", err, filepath.Dir(e.outbox.Path()))}
	}
	_ = e.recordStayed() // refused: kept counted for the next try
	return e.queuedNote(ctx, op, polErr)
}

// stayedLocal counts the writes the local palace took that the outbox
// could not record, until their record file takes the count
// (outbox.StayedLocal).
type stayedLocal struct {
	mu sync.Mutex
	n  outbox.StayedLocal
}

// stayLocal counts a write the outbox could not record, and records the
// count at once in its own file, which a full disk does not stop; one the
// file system refuses all the same (copy-on-write, a read-only mount) is
// kept counted for the next write, retryStayed's next tick, or the stop.
func (e *Edge) stayLocal() {
	now := time.Now()
	e.stayed.mu.Lock()
	if e.stayed.n.N == 0 {
		e.stayed.n.Since = now
	}
	e.stayed.n.N++
	e.stayed.n.Last, e.stayed.n.Primary = now, ladder.RedactURL(e.cfg.PrimaryURL)
	e.stayed.mu.Unlock()
	_ = e.recordStayed() // refused: kept counted for the next try
}

// recordStayed adds the writes counted by stayLocal to the outbox's
// record (outbox.NoteStayedLocal); one refused is kept counted here (the
// error).
func (e *Edge) recordStayed() error {
	e.stayed.mu.Lock()
	defer e.stayed.mu.Unlock()
	if e.stayed.n.N == 0 {
		return nil
	}
	if err := outbox.NoteStayedLocal(filepath.Join(e.cfg.StateDir(), outbox.FileName), e.stayed.n); err != nil {
		return fmt.Errorf("%d write(s) since %s: %w", e.stayed.n.N, e.stayed.n.Since.Format(time.RFC3339), err)
	}
	e.stayed.n = outbox.StayedLocal{}
	return nil
}

// retryStayed records the writes stayLocal counted that their file
// refused (a read-only mount, a copy-on-write disk still full) every
// lease (Config.Lease, 10 s by default) until ctx ends: once the file
// can be written they are in it, for edge status and doctor, with no
// later write or stop needed; a kill after that tick no longer loses
// them (one before it, or a stop while the file still refuses, does).
func (e *Edge) retryStayed(ctx context.Context) {
	t := time.NewTicker(cmp.Or(e.cfg.Lease, 10*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = e.recordStayed() // refused: kept counted for the next tick, and the stop logs it
		}
	}
}

// outboxWrite is c as the policy makes it an op, with the policy's error
// (held: replicated or not, nobody can say, so it is kept whole until the
// policy parses); !ok: the policy keeps it local.
func (e *Edge) outboxWrite(ctx context.Context, c *call, oldWing string) (w outbox.Write, polErr error, ok bool) {
	pol, polErr := e.currentPolicy(ctx)
	w = outbox.Write{Name: c.name, Tool: c.tool, Args: c.argsMap(), Held: polErr != nil, Base: c.base}
	if w.Held {
		w.Payload, w.Wing, ok = stamped(c.tool, c.raw(), e.cfg.Stamp()), firstWing(c.tool, c.argsMap(), oldWing), true
	} else {
		w.Payload, w.Wing, ok = decide(pol, c.tool, c.argsMap(), c.raw(), oldWing, e.cfg.Stamp())
	}
	w.Given = len(c.raw())
	return w, polErr, ok
}

// queuedNote says what became of a queued op (the answer's "edge" object):
// queued, maybe behind another, or held while the policy does not parse.
func (e *Edge) queuedNote(ctx context.Context, op outbox.Op, polErr error) map[string]any {
	if op.State == outbox.Held {
		return map[string]any{"replication": "held", "op_id": op.ID,
			"message": fmt.Sprintf("the replication policy does not parse (%v): this write waits in the outbox and is sent once the policy parses, if it replicates its wing", polErr)}
	}
	out := map[string]any{"replication": "queued", "op_id": op.ID}
	if b, blocked, err := e.outbox.Blocker(ctx, op); err == nil && blocked {
		out["behind"] = describe(b)
	}
	return out
}

// describe names an op for an agent: its short id, tool and state, and
// why it waits.
func describe(o outbox.Op) string {
	s := fmt.Sprintf("op %s (%s, %s)", o.Short(), o.Tool, o.State)
	if why := outbox.Words(o.Error); why != "" {
		s += ": " + why
	}
	return s
}

// errLocalDamaged is a local palace MemPalace refuses every call on until
// it is repaired: its SQLite failed the integrity check (-32002, answered
// before the tool runs).
var errLocalDamaged = errors.New("the local palace refuses every call until it is repaired (its SQLite failed MemPalace's integrity check; devbox-config doctor says how)")

// localDamaged is errLocalDamaged, with MemPalace's words, when the local
// palace's answer err is its integrity refusal; else nil.
func localDamaged(err error) error {
	if e := peerError(err); e != nil && e.Code == -32002 && strings.Contains(e.Message, "integrity check failed") {
		return fmt.Errorf("%w: %s", errLocalDamaged, e.Message)
	}
	return nil
}

// writeWithoutLocal: the local palace server is not running, or refuses
// every call (errLocalDamaged). A write the policy replicates is queued
// for the primary (the agent is told the local palace does not have it;
// one the server's death cut may be there: when sending it again cannot
// double it, the local palace gets it again once it is back, keepCut);
// anything else is the clear error it was. since is firstRun's before
// the call was sent; in is the intent of a write the server's death cut:
// queued where it is, before the agent's writes sent after it, as the
// local palace got them (one not sent there again, keepCut, is then
// undone by none of them on the primary either).
func (e *Edge) writeWithoutLocal(ctx context.Context, c *call, oldWing string, down error, since uint64, in *intent) (*mcp.CallToolResult, error) {
	op, ok := e.queueWithoutLocal(ctx, c, oldWing, in)
	if !ok {
		return localDown(down), nil
	}
	msg := "the local palace server is not running: the write is queued for the primary only, and this machine's palace does not have it"
	switch {
	case errors.Is(down, errLocalDamaged):
		msg = errLocalDamaged.Error() + ": the write is queued for the primary only, and this machine's palace does not have it"
	case e.keepCut(ctx, c, since, down):
		msg = "the local palace server exited during the call: the write is queued for the primary; this machine's palace may not have it, and the edge gives it to the local palace again once it is back"
	case errors.Is(down, errChildExited) && resendable(c):
		msg = "the local palace server exited during the call: the write is queued for the primary; whether this machine's palace has it cannot be known (it is not sent there again: the restarted local palace may have taken a later write, which it would undo)"
	case errors.Is(down, errChildExited):
		msg = "the local palace server exited during the call: the write is queued for the primary; whether this machine's palace has it cannot be known (it is not sent there again: a second copy could not be told from the first)"
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "op_id": op.ID,
		"message": msg,
		"edge":    map[string]any{"local": "down: " + down.Error(), "replication": "queued", "degraded": true},
	}, false), nil
}

// queueWithoutLocal queues for the primary a write the local palace did
// not answer: its intent in promoted, else the write as the policy now
// says; false when the policy does not parse or keeps it local, or the
// outbox failed.
func (e *Edge) queueWithoutLocal(ctx context.Context, c *call, oldWing string, in *intent) (outbox.Op, bool) {
	if in != nil {
		op, err := e.outbox.Promote(context.WithoutCancel(ctx), in.op, in.polErr != nil, "")
		if err == nil {
			return op, true
		}
		e.log.Error("a write the local palace server's death cut stays in the outbox unqueued; the next edge start (or `edge flush`) sends it", "tool", c.name, "op", in.op.Short(), "err", err)
		return op, false
	}
	pol, polErr := e.currentPolicy(ctx)
	if polErr != nil || e.outbox == nil {
		return outbox.Op{}, false
	}
	payload, wing, replicate := decide(pol, c.tool, c.argsMap(), c.raw(), oldWing, e.cfg.Stamp())
	if !replicate || payload == nil {
		return outbox.Op{}, false
	}
	op, err := e.outbox.Enqueue(ctx, outbox.Write{Name: c.name, Tool: c.tool, Payload: payload, Args: c.argsMap(), Wing: wing})
	return op, err == nil
}

// writeShared answers a write to a drawer the local palace lacks
// (update_drawer of a drawer another device wrote, which this edge reads
// from the primary): when the primary has it, in a wing the policy
// replicates, and this device did not delete it, the write is queued for
// the primary, unless the gateway would refuse it by the wing the
// primary's copy is in (refusedUpFront: refused here, as a write to a
// local drawer is); the local palace keeps nothing. Otherwise the answer is "Drawer not found",
// as the local palace said.
func (e *Edge) writeShared(ctx context.Context, c *call, res *mcp.CallToolResult) *mcp.CallToolResult {
	res, _ = notFoundHere(c, res)
	id, _ := c.argsMap()["drawer_id"].(string)
	if id == "" || e.outbox == nil || e.remote == nil || e.tombstones(ctx).drawers[id] {
		return res
	}
	if !e.remote.Up() {
		return e.primaryUnasked(id)
	}
	pres, err := e.callPrimary(ctx, getDrawer(id), true)
	if err != nil && peerError(err) == nil {
		return e.primaryUnasked(id)
	}
	rec, ok := usable(pres, err)
	wing := gjson.Get(rec, "wing").String()
	if !ok || wing == "" {
		return res // not on the primary either (or not visible to this device there)
	}
	if refused := e.refusedUpFront(ctx, c, wing); refused != nil {
		return refused // its wing as the primary's copy says: the gateway decides by it
	}
	op, refused := e.queueOnly(ctx, c, res, wing)
	if refused != nil {
		return refused
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "drawer_id": id, "wing": wing, "op_id": op.ID,
		"message": "this drawer is not in the local palace (another device wrote it): the write is queued for the primary, which holds it",
		"edge":    map[string]any{"local": "drawer not found", "replication": "queued (not in the local palace)", "op_id": op.ID},
	}, false)
}

// queueOnly queues c for the primary alone (the local palace did not
// apply it; oldWing as for decide); when it is not queued (the policy
// keeps it local or does not parse, the outbox failed), the answer is
// res, saying why when it is not the policy's choice.
func (e *Edge) queueOnly(ctx context.Context, c *call, res *mcp.CallToolResult, oldWing string) (outbox.Op, *mcp.CallToolResult) {
	pol, err := e.currentPolicy(ctx)
	if err != nil {
		return outbox.Op{}, annotate(res, map[string]any{"replication": fmt.Sprintf("not queued: the replication policy does not parse (%v)", err)}, false)
	}
	payload, w, replicate := decide(pol, c.tool, c.argsMap(), c.raw(), oldWing, e.cfg.Stamp())
	if !replicate || payload == nil {
		return outbox.Op{}, res
	}
	op, err := e.outbox.Enqueue(context.WithoutCancel(ctx), outbox.Write{Name: c.name, Tool: c.tool, Payload: payload, Args: c.argsMap(), Wing: w})
	if err != nil {
		e.log.Error("outbox write failed; a write the local palace could not apply is not queued", "tool", c.name, "err", err)
		return outbox.Op{}, annotate(res, map[string]any{"replication": fmt.Sprintf("not queued: %v", err)}, false)
	}
	return op, nil
}

// roomNotHere is MemPalace 3.11.0's refusal of a create_tunnel whose room
// holds no drawer in its palace (palace_graph.create_tunnel).
var roomNotHere = regexp.MustCompile(`^(Source|Target) room '.*' does not exist in wing '.*'$`)

// tunnelShared answers a create_tunnel the local palace refused because a
// room it names holds no drawer there (roomNotHere): another device filed
// it, and the agent sees it in the primary's list_rooms and search. When
// the primary holds both rooms (its list_rooms of each wing, the check
// MemPalace makes), the tunnel is queued for the primary, which creates
// it, and the answer says the local palace does not have it; otherwise
// (the rooms not there either, the primary unreachable) the local refusal
// stands, saying so when the primary could not be asked.
func (e *Edge) tunnelShared(ctx context.Context, c *call, res *mcp.CallToolResult) *mcp.CallToolResult {
	if e.outbox == nil || e.remote == nil {
		return res
	}
	if !e.remote.Up() {
		return annotate(res, map[string]any{"primary": e.remote.State(), "replication": "not queued: the primary, which may hold the rooms, is unreachable"}, true)
	}
	args := c.argsMap()
	for _, side := range []string{"source", "target"} {
		pres, err := e.callPrimary(ctx, newCall(&mcp.CallToolParams{Name: catalogue.Prefix + "list_rooms", Arguments: map[string]any{"wing": args[side+"_wing"]}}), true)
		t, ok := usable(pres, err)
		room, _ := args[side+"_room"].(string)
		if !ok || !gjson.Get(t, "rooms").Get(gjson.Escape(room)).Exists() {
			return res
		}
	}
	op, refused := e.queueOnly(ctx, c, res, "")
	if refused != nil {
		return refused
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "op_id": op.ID,
		"message": "the rooms are not both in the local palace (another device filed them): the tunnel is queued for the primary, which holds them; this device's palace does not have it",
		"edge":    map[string]any{"local": resultJSON(res)["error"], "replication": "queued (rooms not in the local palace)", "op_id": op.ID},
	}, false)
}

// primaryUnasked answers a write to drawer id, which the local palace
// lacks, when the primary cannot be asked whether it holds it: not "Drawer
// not found" (it may well exist there), and nothing queued.
func (e *Edge) primaryUnasked(id string) *mcp.CallToolResult {
	return errorResult(fmt.Sprintf("drawer %s is not in this device's palace, and the primary, which may hold it, is unreachable: nothing was written or queued; try again when the primary is back", id),
		map[string]any{"local": "drawer not found", "primary": e.remote.State(), "replication": "not taken", "degraded": true})
}

// localWing finds the wing of the drawer c names in the local palace,
// and, for an update_drawer of its text, the base of the text it replaces
// there (c.base); cut: the stop's signal came first (beforeStop).
func (e *Edge) localWing(ctx context.Context, c *call) (string, bool) {
	lctx, cancel := e.beforeStop(ctx)
	defer cancel()
	res, err := e.localServer.Call(lctx, getDrawer(fmt.Sprint(c.argsMap()["drawer_id"])).params)
	if err != nil {
		return "", lctx.Err() != nil && ctx.Err() == nil
	}
	m := resultJSON(res)
	_, rewrites := c.argsMap()["content"]
	if text, ok := m["content"].(string); ok && rewrites && c.tool.Name == "update_drawer" && m["error"] == nil {
		c.base = origin.Base(text)
	}
	w, _ := m["wing"].(string)
	return w, false
}

// decide is what the policy makes of a write: the payload to queue, its
// wing, and whether it replicates at all. The payload is the agent's
// argument bytes as sent, with two edits spliced in, never re-encoded: the
// provenance stamp on a tool that takes added_by (stamp "": none), and a
// checkpoint cut to its replicated items and diary. A nil payload with ok
// is arguments that could not be edited.
func decide(pol *Policy, rec catalogue.Tool, args map[string]any, raw json.RawMessage, oldWing, stamp string) (json.RawMessage, string, bool) {
	switch rec.Wings {
	case catalogue.KnowledgeGraph:
		return raw, "", pol.KGReplicated()
	case catalogue.CheckpointWings:
		return decideCheckpoint(pol, rec, args, raw, stamp)
	}
	wing := firstWing(rec, args, oldWing)
	if wing != "" && !pol.Replicated(wing) {
		return nil, wing, false
	}
	return stamped(rec, raw, stamp), wing, true
}

// firstWing is the wing an op is listed under: the first its call names.
func firstWing(rec catalogue.Tool, args map[string]any, oldWing string) string {
	wings := rec.WingsOf(args, oldWing)
	if rec.Wings == catalogue.NoWing {
		w, _ := args["wing"].(string) // a tool the catalogue does not know: its own "wing", if any
		wings = []string{w}
	}
	for _, w := range wings {
		if w != "" {
			return w
		}
	}
	return ""
}

// stamped is raw with added_by set to stamp, for a tool that takes it.
func stamped(rec catalogue.Tool, raw json.RawMessage, stamp string) json.RawMessage {
	if stamp == "" || !rec.Accepts("added_by") {
		return raw
	}
	out, err := sjson.SetBytes(append([]byte(nil), raw...), "added_by", stamp)
	if err != nil {
		return nil // not an object: the local palace would have refused it
	}
	return out
}

// decideCheckpoint keeps a checkpoint's items in replicated wings and its
// diary if the diary's wing replicates; nothing left, nothing queued.
func decideCheckpoint(pol *Policy, rec catalogue.Tool, args map[string]any, raw json.RawMessage, stamp string) (json.RawMessage, string, bool) {
	out := append(json.RawMessage(nil), raw...)
	items, _ := args["items"].([]any)
	kept := 0
	var err error
	for i := len(items) - 1; i >= 0 && err == nil; i-- {
		im, _ := items[i].(map[string]any)
		if w, _ := im["wing"].(string); pol.Replicated(w) {
			kept++
			continue
		}
		out, err = sjson.DeleteBytes(out, "items."+strconv.Itoa(i))
	}
	diaryOK := false
	if d, ok := args["diary"].(map[string]any); ok && err == nil {
		if diaryOK = pol.Replicated(catalogue.DiaryWingFor(d)); !diaryOK {
			out, err = sjson.DeleteBytes(out, "diary")
		}
	}
	if kept == 0 && !diaryOK {
		return nil, "", false
	}
	if err != nil {
		return nil, "", true
	}
	return stamped(rec, out, stamp), "", true
}

// coordinationWrite: durable through the outbox and sent at once; the agent
// gets the primary's own answer (its event id), or "queued" when the
// primary cannot be reached in time.
func (e *Edge) coordinationWrite(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	res, err := e.coordinationSend(ctx, c)
	if err == nil && res != nil && !res.IsError {
		e.answered(ctx, c) // a reply: the asks it clears are not told again (wake.go)
	}
	// A bare or missing writer is unreachable in a fleet (RFC 003 §7.7):
	// the agent is told; what it sent is never rewritten.
	if w := mailbox.CheckFromAgent(c.tool, c.name, c.argsMap()); w != "" && err == nil {
		e.log.Warn("coordination write with an unaddressable writer", "tool", c.name, "warning", w)
		res = annotate(res, map[string]any{"warning": w}, false)
	}
	return res, err
}

// textCap is one of MemPalace's fixed caps on a coordination write's text,
// in UTF-8 bytes (logstream.py): no grant lets a larger one through.
type textCap struct {
	arg  string
	max  int
	what string
}

// textCaps are the caps by tool: DEFAULT_MAX_ARTIFACT_BYTES and
// DEFAULT_MAX_BODY_BYTES.
var textCaps = map[string]textCap{
	"artifact_put": {"content", 4 << 20, "MemPalace's artifact cap"},
	"event_append": {"body", 256 << 10, "MemPalace's event body cap"},
}

// overCap is the refusal of a write whose text is over its cap, in
// MemPalace's words, or nil: refused when it is made, not by the primary
// five times before the op is dead.
func overCap(c *call) *mcp.CallToolResult {
	limit, ok := textCaps[c.tool.Name]
	text, _ := c.argsMap()[limit.arg].(string)
	if !ok || len(text) <= limit.max {
		return nil
	}
	return errorResult(fmt.Sprintf("refused by the edge: %s is %d bytes; maximum is %d bytes (%s); nothing was queued: shorten it", limit.arg, len(text), limit.max, limit.what),
		map[string]any{"replication": "not taken"})
}

// maxMetadata is MemPalace's MAX_METADATA_BYTES (logstream.py): an
// event's or an artifact's metadata, as it re-encodes it.
const maxMetadata = 64 << 10

// overMetadataCap is the refusal of a write whose metadata is over
// MemPalace's cap as MemPalace counts it (pyjson: json.dumps with ", "
// and ": ", sorted keys) with the edge_op_id the outbox adds, or nil:
// refused when it is made, not queued to die at the primary. A metadata
// that is not an object, or that the strict parse refuses, is left to
// the refusals that name it.
func overMetadataCap(c *call) *mcp.CallToolResult {
	m := gjson.GetBytes(c.raw(), "metadata")
	if !c.tool.OpStamp || m.Exists() && m.Type != gjson.Null && !m.IsObject() {
		return nil
	}
	v := map[string]any{}
	if m.IsObject() {
		d, err := strictjson.Decode([]byte(m.Raw))
		if err != nil {
			return nil
		}
		v, _ = d.(map[string]any)
	}
	v["edge_op_id"] = outbox.NewOpID() // as stampOpID sets it
	text, err := pyjson.Dumps(v)
	if err != nil || len(text) <= maxMetadata {
		return nil // a value Python does not write as JSON: MemPalace's words
	}
	return errorResult(fmt.Sprintf("refused by the edge: metadata is %d bytes as MemPalace counts it (%d as written), with the edge_op_id the edge adds for exactly-once; maximum is %d bytes (MemPalace's metadata cap); nothing was queued: shorten it. MemPalace measures metadata re-encoded by Python's json.dumps: a space after every , and :, non-ASCII as it is, and a float as Python writes it (1e5 as 100000.0)", len(text), len(m.Raw), maxMetadata),
		map[string]any{"replication": "not taken"})
}

func (e *Edge) coordinationSend(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	if res := e.refusedUpFront(ctx, c, ""); res != nil {
		return res, nil
	}
	if res := cmp.Or(overCap(c), overMetadataCap(c)); res != nil {
		return res, nil
	}
	if e.outbox == nil {
		return e.primaryOnly(ctx, c, "the outbox is unavailable, sent directly")
	}
	op, err := e.outbox.Enqueue(ctx, outbox.Write{Name: c.name, Tool: c.tool, Payload: c.raw(), Args: c.argsMap()})
	var tooLarge *outbox.TooLargeError
	if errors.As(err, &tooLarge) { // never sent: the primary would cut the connection
		return errorResult(fmt.Sprintf("%v; nothing was written: %s writes to the primary only (this devbox's palace never holds it) and it was not queued; send it again with smaller content (split it into several)", err, c.tool.Name), nil), nil
	}
	if err != nil {
		e.log.Error("outbox write failed; sending directly", "tool", c.name, "err", err)
		return e.primaryOnly(ctx, c, "the outbox failed, sent directly")
	}
	// Sent at once unless the breaker is open (the flusher waits for the
	// primary's recovery); the wait ends at the answer, or at the first
	// failed attempt (the op stays queued and the flusher retries it).
	done := op
	if e.remote.Up() {
		wctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
		defer cancel()
		done, _ = e.outbox.Wait(wctx, op.ID) // on an error (ctx, a read) the op is as it was: queued
	}
	switch done.State {
	case outbox.Done:
		m := numbersKept(string(done.Result))
		if m == nil {
			return nil, fmt.Errorf("the outbox's record of the primary's answer is not a JSON object: %.80q", done.Result)
		}
		e.warningTold(ctx, op.ID, m)
		return jsonResult(m, false), nil
	case outbox.Dead:
		return errorResult("the primary refused this write: "+outbox.Words(done.Error), map[string]any{"op_id": op.ID}), nil
	case outbox.InDoubt:
		return errorResult(fmt.Sprintf("this write may or may not be on the primary, and nothing can look it up: it is not sent again on its own; `devbox-config edge outbox retry %s` sends it again, `devbox-config edge outbox delivered %s` records it as landed", op.Short(), op.Short()),
			map[string]any{"op_id": op.ID, "state": "in doubt"}), nil
	}
	if gjson.GetBytes(done.Error, "kind").String() == outbox.Refused.String() {
		// not "success": the primary said no; only a change on its side
		// (a grant) lets a later try through
		return errorResult("the primary refused this write: "+outbox.Words(done.Error)+"; it stays queued to be tried again a few times (a grant the gateway's operator gives meanwhile lets it through), then it is dead: `devbox-config edge outbox list` shows it",
			map[string]any{"op_id": op.ID, "queued": true}), nil
	}
	return jsonResult(map[string]any{
		"success": true, "queued": true, "op_id": op.ID,
		"message": "no answer from the primary for this write yet: it is queued durably and reaches the primary once, in order (an attempt whose answer was lost may have landed, and is looked up before any resend); " + e.whyWaiting(ctx, done),
		"edge":    map[string]any{"primary": e.remote.State(), "degraded": true},
	}, false), nil
}

// whyWaiting says, in words, why a queued op has not reached the primary.
func (e *Edge) whyWaiting(ctx context.Context, op outbox.Op) string {
	if b, blocked, err := e.outbox.Blocker(ctx, op); err == nil && blocked {
		return "it waits behind " + describe(b)
	}
	if why := outbox.Words(op.Error); why != "" {
		return "its last attempt: " + why
	}
	switch {
	case e.remote.State() == "unauthorized":
		// A configuration problem, not an outage: said as `edge status`
		// says it, so the agent asks for a token, not for the primary.
		why := outbox.ErrUnauthorized.Error()
		if e.primary != nil {
			if r := e.primary.tokenRefusal(); r != "" { // read once: a second read may find it cleared
				why = "the primary " + r
			}
		}
		return why + " (devbox-config doctor names the fix)"
	case !e.remote.Up():
		// The breaker opened on failed calls: the primary down, or its
		// answers lost on the way (it may have applied them).
		return "the edge's calls to the primary are failing (" + e.remote.State() + "): it is down, or its answers are lost on the way"
	}
	return "the primary has not answered yet"
}

// refusedUpFront is the edge's answer to a write the gateway would refuse
// (the instruction wing on a device that does not write it, a wing outside its
// write globs), as what the gateway says of this device decides it; nil:
// c may be taken. oldWing is the wing of the drawer c changes, as the
// local palace holds it, or as the primary's copy says when only the
// primary holds it ("": none).
//
// The grants are what the gateway said on its last answer to this edge
// (the flusher's sends and merged reads hear them). A refusal on them is
// decided again on fresh ones while the primary is up and answers within
// Config.GrantAsk (a grant given is heard before the agent is refused; a
// slower answer is heard for the next write). A write they allow is taken without
// asking (a local write never waits on the primary): a grant removed is
// heard from the gateway's refusal of the first write sent on old grants,
// and the writes after it are refused up front.
func (e *Edge) refusedUpFront(ctx context.Context, c *call, oldWing string) *mcp.CallToolResult {
	msg, mark := e.refusal(ctx, c, oldWing)
	switch {
	case msg == "":
		return nil
	case e.remote.RefreshDevice(ctx):
		if msg, mark = e.refusal(ctx, c, oldWing); msg == "" {
			return nil
		}
	case e.remote.State() == "unauthorized":
		// The grants could not be asked again: a grant given since is
		// not known, and the fix is the token, not the operator's grant.
		msg = "refused by the edge: the gateway refuses this device's token (MEMPALACE_REMOTE_TOKEN; devbox-config doctor names the fix), so it could not be asked whether this device may write this now, and what it said of this device last refuses the write"
		if w, _ := mark["wing"].(string); w != "" {
			msg += fmt.Sprintf(" (wing %q)", w)
		}
		msg += ". Nothing is taken or queued: fix the token, then write again."
	}
	return errorResult(msg, mark)
}

// refusal is refusedUpFront on the device as the edge heard it last: the
// refusal in words and the answer's edge member ("": c may be taken).
func (e *Edge) refusal(ctx context.Context, c *call, oldWing string) (string, map[string]any) {
	if w := e.instructionWingRefused(c, oldWing); w != "" {
		return fmt.Sprintf("refused by the edge: %q is the instruction wing, which only admin devices whose write globs match it write, and the gateway says this device is not one (it would refuse the write: %s)", w, deviceinfo.RuleInstructionWing),
			map[string]any{"wing": w, "replication": "not taken"}
	}
	if msg, mark := e.grantRefused(ctx, c, oldWing); msg != "" {
		return msg, mark
	}
	if msg := e.agentRefused(c); msg != "" {
		return msg, map[string]any{"replication": "not taken"}
	}
	if msg := e.kgRefused(ctx, c); msg != "" {
		return msg, map[string]any{"replication": "not taken"}
	}
	return "", nil
}

// kgRefused is the gateway's refusal, in words, of a knowledge-graph
// write the policy replicates when the gateway says (device.go) this
// device has no knowledge-graph write grant (--kg read or none); "": c
// may be taken, or the grant is not known. Queued, it would be refused
// at every try until dead, while this device's KG reads served it as the
// fleet's (attack99 F7).
func (e *Edge) kgRefused(ctx context.Context, c *call) string {
	in, ok := e.device()
	if !ok || e.outbox == nil || c.tool.Gate != catalogue.KGWrite || in.KG == "" || in.KG == "write" {
		return ""
	}
	if pol, err := e.currentPolicy(ctx); err != nil || !pol.KGReplicated() {
		return "" // kept local, or held: whether it is sent, nobody can say yet
	}
	return fmt.Sprintf("refused by the edge: the gateway would refuse this write (no knowledge-graph write grant: this device (%s) has --kg %s), so it is not taken here to be queued for a primary that never takes it: nothing was written or queued. Ask the gateway's operator for the grant (devbox-config gateway device set %s --kg write).", in.ID, in.KG, in.ID)
}

// agentRefused is the gateway's refusal, in words, of a coordination
// write whose writer (its Identity: from_agent, created_by) is not one
// of this device's agents as the gateway says them (device.go); "": c
// may be sent, or the agents are not known. Queued, it would be refused
// at every try until dead.
func (e *Edge) agentRefused(c *call) string {
	in, ok := e.device()
	if !ok || c.tool.Gate != catalogue.AgentWrite {
		return ""
	}
	agent, _ := c.argsMap()[c.tool.Identity].(string)
	if in.ActsAs(agent, false) {
		return ""
	}
	return fmt.Sprintf("refused by the edge: the gateway would refuse this write (%s %s is not one of this device's agents), so it is not queued for a primary that never takes it. This device (%s) speaks as %s (its agents, as the gateway says them): write as one of them, or ask the gateway's operator to add the agent (devbox-config gateway device set %s --agents ...).", c.tool.Identity, mailbox.Quoted(agent), in.ID, quotedNames(in.Agents), in.ID)
}

// instructionWingRefused is the instruction wing when c writes it and
// the gateway says (now, or as an earlier run heard it: device.go) this
// device does not write it: not admin, or an admin whose write globs do
// not match it ("": c may be taken). Taken locally, such a write would be
// refused at the gateway forever while this device's reads served it
// from the instruction wing, where agents look for trusted guidance.
func (e *Edge) instructionWingRefused(c *call, oldWing string) string {
	in, ok := e.device()
	if !ok || in.InstructionWing == "" {
		return ""
	}
	if writes, _ := in.Writes(in.InstructionWing); writes {
		return ""
	}
	args := c.argsMap()
	wings := c.tool.WingsOf(args, oldWing)
	if c.tool.Wings == catalogue.NoWing {
		w, _ := args["wing"].(string)
		wings = []string{w}
	}
	for _, w := range wings {
		// MemPalace strips a wing name's whitespace before it files.
		if strings.TrimSpace(w) == in.InstructionWing {
			return in.InstructionWing
		}
	}
	return ""
}

// grantRefused is the gateway's refusal of c, in words, and the answer's
// edge member naming the wing it refuses (or the room: an invisible
// character in a room's name), when c would be sent (the policy
// replicates what it writes) and the device's grants as the gateway says
// them (device.go) refuse what would be sent ("": c may be taken, or the
// grants are not known). Taken locally, it would go dead at the gateway
// while this device's reads served it as its own.
func (e *Edge) grantRefused(ctx context.Context, c *call, oldWing string) (string, map[string]any) {
	in, ok := e.device()
	if !ok || e.outbox == nil || c.tool.Gate != catalogue.WriteWing || (c.tool.Wings == catalogue.DrawerWing && oldWing == "") {
		return "", nil // a drawer's wing not known (writeShared decides with the primary's copy)
	}
	pol, err := e.currentPolicy(ctx)
	if err != nil {
		return "", nil // held: whether it is sent, nobody can say yet
	}
	payload, _, replicate := decide(pol, c.tool, c.argsMap(), c.raw(), oldWing, "")
	var sent map[string]any
	if !replicate || json.Unmarshal(payload, &sent) != nil {
		return "", nil
	}
	allowed, rule, wing := in.AuthorizeWrite(c.tool, sent, oldWing)
	if allowed {
		return "", nil
	}
	mark := map[string]any{"wing": wing, "replication": "not taken"}
	msg := fmt.Sprintf("refused by the edge: the gateway would refuse this write (%s", rule)
	if wing == "" { // not a wing's grant: its agent name (the wing is still the one it writes), or no wing named
		mark["wing"] = firstWing(c.tool, sent, oldWing)
		return msg + "), so it is not taken here to be queued for a primary that never takes it.", mark
	}
	if rule == deviceinfo.RuleInstructionLookalike || rule == deviceinfo.RuleInvisibleName {
		if !slices.Contains(c.tool.WingsOf(sent, oldWing), wing) { // a room's name, not a wing's (attack64 F3)
			delete(mark, "wing")
			mark["room"] = wing
		}
		return msg + fmt.Sprintf(": %s), so it is not taken here to be queued for a primary that never takes it: write under another name.", mailbox.Quoted(wing)), mark
	}
	msg += fmt.Sprintf(": wing %q", wing)
	if strings.HasSuffix(rule, deviceinfo.RuleNotAnAgent) { // the agent's grant, not the wing's (attack63 F5)
		return msg + fmt.Sprintf("), so it is not taken here to be queued for a primary that never takes it. This device (%s) may act as the agents %q (as the gateway says them). Ask the gateway's operator to add the agent (devbox-config gateway device set %s --agents with this device's agents and the new one), or write as an agent you hold.", in.ID, in.Agents, in.ID), mark
	}
	return msg + fmt.Sprintf("), so it is not taken here to be queued for a primary that never takes it. This device (%s) may write the wings %q (write grants, as the gateway says them). Ask the gateway's operator for a grant (devbox-config gateway device set %s --write ...), or write to a wing you hold.", in.ID, in.Write, in.ID), mark
}

// warningTold forgets the gateway's warning on a write sent at once
// (answer m, of op id): the agent reads it in the answer, so it is not
// told again at the next session starts as a write sent later.
func (e *Edge) warningTold(ctx context.Context, id string, m map[string]any) {
	if m["warning"] == nil {
		return
	}
	if err := e.outbox.WarningTold(ctx, id); err != nil {
		e.log.Warn("a warning answered with its write may be told again at the next session start", "err", err)
	}
}
