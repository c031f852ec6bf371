package edge

// Writes the primary refused for good, told to the agent: a write is
// answered when the local palace took it and queued, and the outbox's op
// goes dead when the primary refuses it MaxRefusals times (the operator
// removed the device's write grant for its wing, say). It is kept in this
// devbox's palace only (a coordination write, which only the primary
// logs, nowhere), and the agent, which believes it shared, is told
//
//   - at session start, in initialize's instructions (before the owed
//     asks, within their bounds): how many dead ops the outbox holds and
//     the first one's reason, at the first deadToldMax session starts
//     after each died (counted in the outbox's meta, so across edges on
//     the palace; `edge status` lists it for as long as it is dead);
//   - during the session, on the next tool answer, one line (a count when
//     several died at once), once per dead op.
//
// A checkpoint the gateway took without some of its items (an admin
// deleted their drawers on the primary: the op is done, never sent again)
// is told the same way, in a line of its own, for as long as the outbox
// keeps the op (outbox.DeadOp.LeftOut; `edge status` lists it too).
//
// A kg_invalidate the gateway answered already_closed (the fact was
// closed on the primary before it arrived: its end date not kept, the op
// done; outbox.DeadOp.Closed) is told the same way, in a line of its own
// with the gateway's note, and `edge status` lists it too; so is a kg_add
// it answered held_by (the fact current there already, another device's
// or with other dates: nothing filed, its dates not kept), and a
// kg_supersede it answered held_by (the old fact closed there and
// another value current: nothing filed, the new value not made current);
// a KG read the local palace answers names those of its entity
// (notFiled), as the local palace holds their values as written. Once a
// later write settles one, as notFiled's rule has it (outbox.Unowed), it
// is told no more, nor is an end answered already_closed that settled
// one (stillOwed).
//
// A queued coordination write the gateway took, at a later flush, with a
// warning (its to_agent is no device's agent: outbox.DeadOp.Warned) is
// told the same way, in a line of its own with the warning (attack95 F2:
// the agent was answered "queued" and believed it delivered).
//
// An op held as queued under another device than the gateway names the
// token (outbox.OtherDevice: never sent, dead until the user retries or
// drops it) is told the same way, in a line of its own ("Writes held")
// with both devices and the fix.
//
// Every flusher (this edge's, `edge flush`'s, another session's edge's)
// counts the ops it made dead or settled with a note in the outbox's meta,
// in the transaction that settles each (Store.News): the edge reads that
// one row at each tool answer, and asks for the dead ops (DeadOps, their
// own indexes) only when it changed, so an answer relayed without the
// edge (notePending) steps aside when there is news, whichever process
// made it (attack107 F4: another process's was heard up to a second
// late, after the answer that should have carried it).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/mailbox"
)

// deadReasonMax bounds the primary's reason, and what the op wrote, in a
// line.
const deadReasonMax = 120

// deadWhoMax bounds who changed a drawer, and when, in a changed-on-primary
// reason.
const deadWhoMax = 64

// deadNews is what the session was told of the dead ops.
type deadNews struct {
	mu   sync.Mutex
	told map[string]bool // the dead ops told of, as of the last look-up
	seen atomic.Int64    // the outbox's News at the last look-up
}

// newDead looks the dead ops up and reports those the session was not
// told of (all of them with all set), counting every dead op as told.
func (e *Edge) newDead(ctx context.Context, all bool) []outbox.DeadOp {
	if e.outbox == nil {
		return nil
	}
	d := &e.dead
	d.mu.Lock()
	defer d.mu.Unlock()
	seen, err := e.outbox.News(ctx)
	if err != nil {
		e.log.Debug("the dead ops not looked up; the agent is told of them later", "err", err)
		return nil
	}
	if !all && seen == d.seen.Load() {
		return nil // no process's flusher made one dead or noted since
	}
	ops, err := e.outbox.DeadOps(ctx)
	if err != nil {
		e.log.Debug("the dead ops not looked up; the agent is told of them later", "err", err)
		return nil
	}
	d.seen.Store(seen)
	ops = e.stillOwed(ctx, ops)
	var fresh []outbox.DeadOp
	told := make(map[string]bool, len(ops))
	for _, o := range ops {
		if all || !d.told[o.ID] {
			fresh = append(fresh, o)
		}
		told[o.ID] = true
	}
	d.told = told // an op retried and dead again is told again
	return fresh
}

// stillOwed drops from ops the KG writes noted held or closed already on which
// nothing is owed any more (outbox.Unowed: settled as edge.not_filed's
// are), so neither a tool answer nor a session start tells the agent to
// undo what it settled (attack119 F3). Unreadable, all are kept.
func (e *Edge) stillOwed(ctx context.Context, ops []outbox.DeadOp) []outbox.DeadOp {
	if !slices.ContainsFunc(ops, func(o outbox.DeadOp) bool { return o.Closed }) {
		return ops
	}
	done, err := e.outbox.Unowed(ctx)
	if err != nil {
		e.log.Debug("the settled KG writes not looked up; they are told as still held", "err", err)
		return ops
	}
	return slices.DeleteFunc(ops, func(o outbox.DeadOp) bool { return o.Closed && done[o.ID] })
}

// untell puts dead ops back for a later answer (none could carry them).
func (e *Edge) untell(ops []outbox.DeadOp) {
	if len(ops) == 0 {
		return
	}
	e.dead.mu.Lock()
	defer e.dead.mu.Unlock()
	for _, o := range ops {
		delete(e.dead.told, o.ID)
	}
	e.dead.seen.Store(-1) // the fast lane's relay steps aside for them
}

// deadPending reports an op a flusher (this process's or another's) made
// dead, or settled with a note for the agent, since the last look-up.
func (e *Edge) deadPending(ctx context.Context) bool {
	if e.outbox == nil {
		return false
	}
	n, err := e.outbox.News(ctx)
	return err == nil && n != e.dead.seen.Load() // unreadable: the next look-up says so
}

// deadWhat is "<tool> of <wing/room, drawer id or wing>" and the
// primary's reason, on one line, each bounded and mailbox.Printable (the
// names are the agent's, the reason the primary's: neither may carry a
// control or bidi character to the agent).
func deadWhat(o outbox.DeadOp) (string, string) {
	what := o.Tool
	switch {
	case o.Wing != "" && o.Room != "":
		what += " of " + o.Wing + "/" + o.Room
	case o.Object != "":
		what += " of " + o.Object
	case o.Wing != "":
		what += " of " + o.Wing
	}
	reason := strings.Join(strings.Fields(o.Reason), " ")
	if _, rest, ok := strings.Cut(reason, ": "); ok && strings.HasPrefix(reason, "JSON-RPC error ") {
		reason = rest // the gateway's or the primary's own words
	}
	switch {
	case o.Kind == outbox.ChangedOnPrimary: // its way to settle it last, never cut
		return truncate(mailbox.Printable(what), deadReasonMax), changedReason(reason, o.Short(), o.Tool == catalogue.Prefix+"delete_drawer")
	case strings.Contains(reason, outbox.UnknownEvent):
		reason = outbox.UnknownEvent // it follows the gateway's words, which the bound would keep instead
	case strings.Contains(reason, deviceinfo.RuleNotVisible):
		// the gateway tells neither apart (a probe must not learn which)
		reason = "the gateway sees no such drawer: it was deleted on the primary, or is in a wing this device may not read"
	}
	return truncate(mailbox.Printable(what), deadReasonMax), truncate(mailbox.Printable(cmp.Or(reason, "no reason given")), deadReasonMax)
}

// changedReason is an update the gateway refused as changed on the
// primary since the edit (outbox.ChangedOnPrimary), mailbox.Printable: who
// changed it, as the gateway's words (reason) say (a device and when, cut
// at deadWhoMax; or that it cannot tell: around it, or this device's own
// earlier write, cut at twice that), and the two ways to settle it, whole
// (deletes: the op is a delete_drawer, which retry deletes).
func changedReason(reason, short string, deletes bool) string {
	who := "by another device"
	// "since this edit was made (", a delete's "since this delete was made ("
	if _, rest, ok := strings.Cut(reason, " was made ("); ok {
		who = truncate(mailbox.Printable(strings.SplitN(rest, "): ", 2)[0]), 2*deadWhoMax) // the gateway's words when it cannot tell
		if dev, at, ok := strings.Cut(strings.TrimPrefix(who, "last written by device "), " at "); ok && dev != who {
			who = truncate(dev+", "+at, deadWhoMax)
		}
	}
	verb := "overwrites"
	if deletes {
		verb = "deletes"
	}
	return fmt.Sprintf("changed on the primary since this edit (%s): `edge outbox retry %s` %s it, `drop` keeps it", who, short, verb)
}

// deadNamed bounds the writes a note names; the rest are counted.
const deadNamed = 3

// deadList is the first deadNamed writes of ops, "; "-separated, then how
// many more, and the reason of the first op of each kind ("; "-separated),
// so a kind with its own way to settle it (changed on the primary) is
// told it whatever op comes first.
func deadList(ops []outbox.DeadOp) (string, string) {
	var whys []string
	kinds := map[outbox.Kind]bool{}
	for _, o := range ops {
		if !kinds[o.Kind] {
			kinds[o.Kind] = true
			_, why := deadWhat(o)
			whys = append(whys, why)
		}
	}
	list := namedList(ops, "", func(o outbox.DeadOp) string { what, _ := deadWhat(o); return what })
	return list, strings.Join(whys, "; ")
}

// namedList names the first deadNamed of ops (name), "; "-separated, then
// how many more there are ("; and 2 more", and what: " checkpoints").
func namedList(ops []outbox.DeadOp, what string, name func(outbox.DeadOp) string) string {
	var names []string
	for _, o := range ops[:min(len(ops), deadNamed)] {
		names = append(names, name(o))
	}
	list := strings.Join(names, "; ")
	if len(ops) > deadNamed {
		list += fmt.Sprintf("; and %d more%s", len(ops)-deadNamed, what)
	}
	return list
}

// deadNotes are the lines a tool answer carries for the ops in fresh: one
// for the dead, one for the checkpoints with items left out.
func deadNotes(fresh []outbox.DeadOp) []string {
	dead, moved, left, closed, warned := splitDead(fresh)
	var notes []string
	if len(warned) > 0 {
		notes = append(notes, "[devbox-config] "+warnedLine(warned))
	}
	if len(moved) > 0 {
		notes = append(notes, "[devbox-config] "+otherDeviceLine(moved))
	}
	if len(dead) > 0 {
		notes = append(notes, deadNote(dead))
	}
	if len(left) > 0 {
		notes = append(notes, "[devbox-config] "+leftOutLine(left))
	}
	ends, adds := closedLines(closed)
	for _, l := range []string{ends, adds} {
		if l != "" {
			notes = append(notes, "[devbox-config] "+l)
		}
	}
	return notes
}

// splitDead parts ops into the dead the primary refused, those held as
// queued under another device than the gateway names the token
// (outbox.OtherDevice: never sent), the checkpoints done with items
// left out, the kg_invalidates done with their fact closed already, and
// the coordination writes the gateway took with a warning.
func splitDead(ops []outbox.DeadOp) (dead, moved, left, closed, warned []outbox.DeadOp) {
	for _, o := range ops {
		switch {
		case o.Warned:
			warned = append(warned, o)
		case o.LeftOut:
			left = append(left, o)
		case o.Closed:
			closed = append(closed, o)
		case o.Kind == outbox.OtherDevice:
			moved = append(moved, o)
		default:
			dead = append(dead, o)
		}
	}
	return dead, moved, left, closed, warned
}

// warnedLine names the queued coordination writes the gateway took with a
// warning (the first deadNamed, then a count), each with the warning:
// their agent was answered "queued" and believes them delivered
// (attack95 F2).
func warnedLine(warned []outbox.DeadOp) string {
	list := namedList(warned, "", func(o outbox.DeadOp) string {
		return fmt.Sprintf("%s (op %s): %s", o.Tool, o.Short(), truncate(mailbox.Printable(o.Reason), leftOutMax))
	})
	return fmt.Sprintf("%s queued by this devbox and sent later %s taken by the gateway with a warning: %s.",
		plural(len(warned), "a coordination write", "coordination writes"), plural(len(warned), "was", "were"), list)
}

// otherDeviceLine says the writes held as queued under another device,
// with the outbox's reason (which names both devices) and the fix.
func otherDeviceLine(moved []outbox.DeadOp) string {
	list, _ := deadList(moved)
	return fmt.Sprintf("this devbox's outbox holds %d %s it will not send: %s; %s (the device was removed at the gateway, .env holds another device's token, or this devbox took a device id of its own). %s. One queued before this outbox was copied from another machine is that machine's to send: `drop ID` gives it up here (a retry from here is filed once by a gateway of this release, twice by an older one), but if that machine is gone for good and never sent it, `retry --force ID` sends it from here; one this machine wrote: `devbox-config edge outbox retry ID` sends one as the device the gateway names the token; `devbox-config edge status` says which each is, with its id.",
		len(moved), plural(len(moved), "write", "writes"), list, truncate(mailbox.Printable(moved[0].Reason), leftOutMax), tookEffect(moved, false))
}

// leftOutMax bounds what the outbox recorded of a checkpoint's items left
// out (settle.go's words, with up to three drawer ids) in a line.
const leftOutMax = 400

// leftOutLine names the checkpoints with items left out (the first
// deadNamed, then a count) and what the outbox recorded of each.
func leftOutLine(left []outbox.DeadOp) string {
	list := namedList(left, " checkpoints", func(o outbox.DeadOp) string {
		return fmt.Sprintf("checkpoint %s was %s", o.Short(), truncate(mailbox.Printable(o.Reason), leftOutMax))
	})
	return list + "; `devbox-config edge status` lists " + plural(len(left), "it", "them") + "."
}

// closedLines are closedLine of the ends among closed and heldLine of
// the writes held by a current fact ("" for none).
func closedLines(closed []outbox.DeadOp) (ends, adds string) {
	var e, a []outbox.DeadOp
	for _, o := range closed {
		if o.Kind == outbox.AlreadyCurrent {
			a = append(a, o)
		} else {
			e = append(e, o)
		}
	}
	if len(e) > 0 {
		ends = closedLine(e)
	}
	if len(a) > 0 {
		adds = heldLine(a)
	}
	return ends, adds
}

// heldLine names the kg_adds whose fact the primary held current already
// (another device's, or with other dates) and the kg_supersedes it held
// by another current value (outbox.AlreadyCurrent), each with the
// gateway's note (which names whose fact is current and what was not
// kept or made current): its agent was answered success (attack99 F1,
// attack105 F2).
func heldLine(adds []outbox.DeadOp) string {
	list := namedList(adds, "", withGatewayNote)
	return fmt.Sprintf("%s from this devbox filed nothing on the primary: %s. This devbox's palace keeps what it wrote; `devbox-config edge status` lists %s.",
		plural(len(adds), "a write of a fact", "writes of facts"), list, plural(len(adds), "it", "them"))
}

// closedLine names the kg_invalidates whose fact the primary held closed
// already (the first deadNamed, then a count), each with the gateway's
// note (which says the end kept and the one not).
func closedLine(closed []outbox.DeadOp) string {
	list := namedList(closed, "", withGatewayNote)
	return fmt.Sprintf("%s from this devbox changed nothing on the primary: %s. This devbox's palace keeps its own end date; to make it the one kept, supersede or re-add the fact; `devbox-config edge status` lists %s.",
		plural(len(closed), "an end of a fact", "ends of facts"), list, plural(len(closed), "it", "them"))
}

// withGatewayNote names an op settled with the gateway's note, the note
// printable and cut (heldNote).
func withGatewayNote(o outbox.DeadOp) string {
	what, _ := deadWhat(o)
	return fmt.Sprintf("%s (op %s): %s", what, o.Short(), heldNote(o.Reason))
}

// heldNote is a gateway's note on a held or closed KG write, printable,
// cut to leftOutMax bytes in its middle: its start (what the primary
// holds, whose) and its last two thirds, from a word on (what was not
// filed, and what to do: "; to make it the value: …"), are kept
// (attack112 F3: cut at its end, the fix was lost mid-word at every
// session start).
func heldNote(note string) string {
	note = mailbox.Printable(strings.TrimPrefix(note, "devbox-config gateway: "))
	if len(note) <= leftOutMax {
		return note
	}
	i := len(note) - leftOutMax*2/3
	if j := strings.IndexByte(note[i:], ' '); j >= 0 {
		i += j + 1
	}
	for i < len(note) && !utf8.RuneStart(note[i]) {
		i++ // no space: a rune's start
	}
	return truncate(note, leftOutMax-(len(note)-i)-1) + " " + note[i:]
}

// deadNote is the one line a tool answer carries for ops that died during
// the session. They are this devbox's writes: another session on the
// same palace may have made them.
func deadNote(fresh []outbox.DeadOp) string {
	list, why := deadList(fresh)
	if len(fresh) == 1 {
		return fmt.Sprintf("[devbox-config] the primary refused a write from this devbox for good: %s (%s). %s; `devbox-config edge status` lists it.", list, why, tookEffect(fresh, false))
	}
	return fmt.Sprintf("[devbox-config] the primary refused %d writes from this devbox for good: %s (refused: %s). %s; `devbox-config edge status` lists them.", len(fresh), list, why, tookEffect(fresh, false))
}

// deadInstructions is the lines initialize's instructions start with when
// the outbox holds dead ops, or checkpoints with items left out, not yet
// told at deadToldMax session starts ("": none); each counts as told to
// the session.
//
// A line that is said counts and names every op of its kind the outbox
// holds, those told at deadToldMax starts already too: it says how many
// the outbox holds (attack63 F5: 2 dead, "holds 1").
func (e *Edge) deadInstructions(ctx context.Context) string {
	all := e.newDead(ctx, true)
	dead, moved, left, closed, warned := splitDead(e.toldAtStart(ctx, all))
	allDead, allMoved, _, _, _ := splitDead(all)
	var lines []string
	if len(moved) > 0 {
		lines = append(lines, "Writes held (devbox-config edge): "+otherDeviceLine(allMoved))
	}
	if len(dead) > 0 {
		lines = append(lines, deadSummary(allDead))
	}
	if len(left) > 0 {
		lines = append(lines, fmt.Sprintf("Checkpoints shared in part (devbox-config edge, said at %d session starts): %s", deadToldMax, leftOutLine(left)))
	}
	if len(warned) > 0 {
		lines = append(lines, fmt.Sprintf("Writes sent with a warning (devbox-config edge, said at %d session starts): %s", deadToldMax, warnedLine(warned)))
	}
	ends, adds := closedLines(closed)
	if ends != "" {
		lines = append(lines, fmt.Sprintf("Facts closed already (devbox-config edge, said at %d session starts): %s", deadToldMax, ends))
	}
	if adds != "" {
		lines = append(lines, fmt.Sprintf("Facts held already (devbox-config edge, said at %d session starts): %s", deadToldMax, adds))
	}
	return strings.Join(lines, "\n")
}

// deadToldMax is how many session starts tell of one dead op.
const deadToldMax = 3

// metaDeadTold is the outbox meta holding how many session starts told
// of each dead op: {"<op id>": n}.
const metaDeadTold = "dead_told"

// toldAtStart keeps of the dead ops those told at fewer than deadToldMax
// session starts, and counts this one; the counts of ops no longer dead
// are forgotten (one retried and dead again is told anew). Two edges
// starting at once may each count one start: the note is said once more
// or less, nothing else.
func (e *Edge) toldAtStart(ctx context.Context, ops []outbox.DeadOp) []outbox.DeadOp {
	if len(ops) == 0 {
		return nil
	}
	told := map[string]int{}
	if v, err := e.outbox.Meta(ctx, metaDeadTold); err == nil && v != "" {
		if err := json.Unmarshal([]byte(v), &told); err != nil {
			e.log.Debug("the count of session starts told of each dead op is unreadable; they are told afresh", "err", err)
		}
	}
	counted := make(map[string]int, len(ops))
	var keep []outbox.DeadOp
	for _, o := range ops {
		n := told[o.ID]
		counted[o.ID] = min(n+1, deadToldMax)
		if n < deadToldMax {
			keep = append(keep, o)
		}
	}
	b, err := json.Marshal(counted)
	if err == nil {
		err = e.outbox.SetMeta(ctx, metaDeadTold, string(b))
	}
	if err != nil {
		e.log.Debug("this session start is not counted as having told of the dead ops; a later one tells of them again", "err", err)
	}
	return keep
}

// deadSummary is the instructions' line for the dead ops ops.
func deadSummary(ops []outbox.DeadOp) string {
	list, why := deadList(ops)
	return fmt.Sprintf("Writes not shared (devbox-config edge): this devbox's outbox holds %d %s the primary refused for good: %s (refused: %s). %s; `devbox-config edge status` lists them (this is said at %d session starts).",
		len(ops), plural(len(ops), "write", "writes"), list, why, tookEffect(ops, true), deadToldMax)
}

// tookEffect says where writes that never reached the primary took
// effect, by kind: a palace write in this devbox's palace only (with
// waits, the later writes of its objects held behind it); a coordination
// write (an event, an ack, an artifact, a task: the primary's log only,
// never the local palace) nowhere.
func tookEffect(ops []outbox.DeadOp, waits bool) string {
	var coord []string
	n := 0
	for _, o := range ops {
		if t, _ := catalogue.Lookup(o.Tool); t.Route == catalogue.CoordinationWrite {
			n++
			if !slices.Contains(coord, o.Tool) {
				coord = append(coord, o.Tool)
			}
		}
	}
	local := "in this devbox's palace only, not on the primary"
	if waits {
		local += ", and later writes of the same objects wait behind them (not behind one refused as written: written anew, corrected, it is sent)"
	}
	nowhere := "nowhere: coordination writes go to the primary's log only, never to this devbox's palace"
	subject := plural(len(ops), "It", "They")
	switch n {
	case 0:
		return subject + " took effect " + local
	case len(ops):
		return subject + " took effect " + nowhere
	}
	return "The palace writes among them took effect " + local + "; the coordination writes (" + strings.Join(coord, ", ") + ") took effect " + nowhere
}

// deadFactsWhy is what ownFacts' why adds when a dead KG write about
// entity holds its objects' later writes back ("" for none): they wait
// for it, not for the primary, so the reads stay local until someone
// settles it (attack99 F1: told only "not on the primary yet").
func (e *Edge) deadFactsWhy(ctx context.Context, entity string) string {
	dead, err := e.outbox.DeadFacts(ctx, entity)
	if err != nil || len(dead) == 0 {
		return ""
	}
	short := outbox.Op{ID: dead[0]}.Short()
	return fmt.Sprintf(": they wait behind %s the primary refused for good (op %s: `devbox-config edge outbox retry %s` sends it again, `devbox-config edge outbox drop %s` gives it up; `devbox-config edge status` says why), so these reads stay this palace's until it is settled",
		plural(len(dead), "a dead write", fmt.Sprintf("%d dead writes", len(dead))), short, short, short)
}

// notFiledMax bounds the held KG writes a local KG read names.
const notFiledMax = deadNamed

// notFiled is mark, the edge member of a local answer to the KG read c
// (a kg_query's or kg_timeline's facts), with the held KG writes about
// its entity (outbox.HeldFacts) in not_filed: the local palace holds
// their values as written, current, and the primary another (the
// gateway's note names it, whose it is, and what to do). The local
// palace is left as it is (attack112 F2: a value the fleet refused read
// as current and trusted, only "degraded" said).
func (e *Edge) notFiled(ctx context.Context, c *call, mark map[string]any) map[string]any {
	if e.outbox == nil || c.tool.Wings != catalogue.KnowledgeGraph || c.tool.Records == "" {
		return mark
	}
	entity, _ := c.argsMap()["entity"].(string)
	held, err := e.outbox.HeldFacts(ctx, entity)
	if err != nil {
		e.log.Debug("the held KG writes not looked up; this read does not name them", "err", err)
	}
	if len(held) == 0 {
		return mark
	}
	var list []map[string]any
	for _, h := range held[:min(len(held), notFiledMax)] {
		list = append(list, map[string]any{"op": outbox.Op{ID: h.ID}.Short(), "tool": h.Tool, "subject": h.Subject, "predicate": h.Predicate, "object": h.Object,
			"held_by": h.HeldBy, "valid_from_kept": h.ValidFromKept, "note": heldNote(h.Note)})
	}
	mark["not_filed"] = list
	if len(held) > notFiledMax {
		mark["not_filed_more"] = fmt.Sprintf("%d more: `devbox-config edge status` lists them", len(held)-notFiledMax)
	}
	return mark
}
