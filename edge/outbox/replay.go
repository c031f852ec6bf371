package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// send replays one op with the knowledge of what is safe to repeat for its
// record type (RFC 001 §3, §4.4, §7.6; RFC 003 §7.1). ambiguous means an
// earlier attempt may have landed without an answer. The op's own bytes
// are what is sent; its arguments are parsed only to look things up.
//
//	add_drawer                 resend (the server dedupes by content id)
//	checkpoint                 resend; its diary as diary_write's (below); if
//	                           the diary landed, the items alone are resent
//	kg_add, open fact          resend (the server's open-fact guard)
//	kg_add, closed fact        kg_query first; skip if (s,p,o,from,to) exists
//	kg_invalidate/supersede    in order; "nothing open" or ambiguity -> confirm with kg_query
//	diary_write                after ambiguity: landed if its wing holds an entry
//	                           with its text newer than the newest this outbox
//	                           knows it wrote there (diary.go); in a replay of
//	                           history: the n-th of n equal entries is landed
//	                           when the primary holds n
//	update_drawer, create_tunnel  resend
//	event_append, patch_submit after ambiguity: event_list for metadata.edge_op_id first
//	event_ack                  after ambiguity: look for this sender's ack of the target
//	artifact_put, task_create  after ambiguity: in doubt, for an operator (no look-up
//	                           exists), unless a gateway's ledger answers the resend
//
// A resend after a look-up that found nothing tells a gateway so
// (WithResend), so that an op it holds in doubt after a crash is
// forwarded again. A look-up the primary refuses outright (a JSON-RPC
// error outside the server range, e.g. a gateway device that may write
// its diary wing but not read it) can never succeed. Behind a gateway
// that advertises its op-id ledger the op is then sent under its own op
// id without the look-up: the ledger answers a repeat from its record.
// Without a ledger the refusal counts toward dead, where an operator sees
// why.
//
// Behind a ledger an op that may have landed is first sent again under
// its op id alone, before any look-up: the ledger answers it from its
// record if it landed, and forwards it if it never arrived. Only an op
// the ledger holds in doubt is looked up (and resent saying so). Whether
// the primary keeps a ledger is asked before deciding (a new process has
// seen no answer yet); while that is not known nothing is decided.
func (f *Flusher) send(ctx context.Context, run *flushRun, op Op, ambiguous bool) (map[string]any, error) {
	if ambiguous && !op.Resend {
		behind, err := f.behindLedger(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrLookup, err)
		}
		if behind {
			res, err := f.sendWrite(ctx, op, op.Payload)
			if rec, _ := catalogue.Lookup(op.Tool); !isInDoubt(err) || rec.Replay == catalogue.Unrepeatable {
				return res, err
			}
		}
	}
	res, err := f.replay(ctx, run, op, ambiguous)
	if lookUpRefused(err) && f.knownLedger(ctx) {
		f.Log.Warn("outbox: the primary refuses the look-up this op's replay needs; sending it under its op id, which the gateway's ledger answers from its record", "op", op.Short(), "tool", op.Tool, "err", err)
		return f.sendWrite(ctx, op, op.Payload)
	}
	return res, err
}

// LedgerTarget is a Primary that knows whether it is a gateway with an
// op-id ledger (it advertised one on its last answer, or it asks: an
// error says it could not).
type LedgerTarget interface {
	Ledger(ctx context.Context) (bool, error)
}

func (f *Flusher) behindLedger(ctx context.Context) (bool, error) {
	lt, ok := f.P.(LedgerTarget)
	if !ok {
		return false, nil
	}
	return lt.Ledger(ctx)
}

// knownLedger: the primary is known to keep an op-id ledger.
func (f *Flusher) knownLedger(ctx context.Context) bool {
	on, err := f.behindLedger(ctx)
	return err == nil && on
}

// lookUpRefused: a replay's look-up failed with a JSON-RPC refusal that is
// not in the server range (-32000..-32099, which a retry may get past).
func lookUpRefused(err error) bool {
	var rpc *RPCError
	return errors.Is(err, ErrLookup) && errors.As(err, &rpc) && (rpc.Code > -32000 || rpc.Code < -32099)
}

// errNoLookUp: an op that may have landed, of a type nothing can look up,
// with no ledger to ask: it is not sent (settle puts it in doubt).
var errNoLookUp = errors.New("it may have landed and no MemPalace tool can look it up: not sent again without an operator")

// replay is send without the refused-look-up fallback.
func (f *Flusher) replay(ctx context.Context, run *flushRun, op Op, ambiguous bool) (map[string]any, error) {
	a, err := args(op)
	if err != nil {
		return nil, err
	}
	rec, _ := catalogue.Lookup(op.Tool)
	switch rec.Replay {
	case catalogue.FactAdd:
		if str(a, "valid_to") != "" {
			found, err := f.factExists(ctx, a)
			if err != nil {
				return nil, err
			}
			if found {
				return map[string]any{"success": true, "skipped": "an identical closed fact is already on the primary"}, nil
			}
		}
	case catalogue.FactClose:
		if ambiguous {
			if landed, err := f.closedAlready(ctx, rec.Name, a); err != nil {
				return nil, err
			} else if landed {
				return map[string]any{"success": true, "skipped": "confirmed on the primary"}, nil
			}
		}
		res, err := f.sendWrite(resendIf(ctx, ambiguous), op, op.Payload)
		if err == nil && res["success"] == false && strings.Contains(strings.ToLower(fmt.Sprint(res["error"])), "no open fact") {
			if landed, cerr := f.closedAlready(ctx, rec.Name, a); cerr == nil && landed {
				return map[string]any{"success": true, "skipped": "nothing open to close; confirmed closed on the primary"}, nil
			}
		}
		return res, err
	case catalogue.ServerDeduped:
		if _, ok := a["diary"].(map[string]any); ok {
			return f.sendCheckpoint(ctx, run, op, a, ambiguous)
		}
	case catalogue.DiarySuffix:
		return f.sendDiary(ctx, run, op, a, ambiguous)
	case catalogue.EventLookup, catalogue.AckLookup:
		if ambiguous {
			if ev, err := f.findEvent(ctx, rec, op, a); err != nil {
				return nil, err
			} else if ev != nil {
				found := map[catalogue.Replay]string{catalogue.EventLookup: "found on the primary by edge_op_id", catalogue.AckLookup: "ack found on the primary"}
				return map[string]any{"success": true, "event": ev, "recovered": found[rec.Replay]}, nil
			}
		}
	case catalogue.Unrepeatable:
		if ambiguous && !op.Resend && !f.knownLedger(ctx) {
			return nil, errNoLookUp
		}
		return f.sendWrite(ctx, op, op.Payload)
	}
	return f.sendWrite(resendIf(ctx, ambiguous), op, op.Payload)
}

// resendIf marks a send after ambiguity whose look-up found nothing.
func resendIf(ctx context.Context, ambiguous bool) context.Context {
	if ambiguous {
		return WithResend(ctx, ResendLookedUp)
	}
	return ctx
}

// sendCheckpoint replays a checkpoint that carries a diary entry. Its
// items are content-addressed (the server files an identical item once),
// but its diary half has no server guard: a resend would write the entry
// twice. MemPalace files the items first and the diary last, so the
// diary's entry on the primary means the checkpoint landed; its items are
// then sent again without the diary, under an op id derived from this
// op's (so a gateway's ledger still answers a repeat of that send from
// its record, and never sees this op id with other arguments).
func (f *Flusher) sendCheckpoint(ctx context.Context, run *flushRun, op Op, a map[string]any, ambiguous bool) (map[string]any, error) {
	diary, _ := a["diary"].(map[string]any) // an object: replay checked
	found, landed, err := f.diaryLanded(ctx, run, op, diary, ambiguous)
	if err != nil {
		return nil, err
	}
	if !landed {
		res, err := f.sendWrite(resendIf(ctx, ambiguous), op, op.Payload)
		if err == nil && res["success"] != false {
			run.sent(diary)
		}
		return res, err
	}
	run.sent(diary)
	if items, _ := a["items"].([]any); len(items) == 0 {
		return map[string]any{"success": true, "skipped": "this checkpoint's diary entry is already on the primary", "diary_entry_id": found.ID, "diary": found.answer()}, nil
	}
	rest, err := sjson.DeleteBytes(append([]byte(nil), op.Payload...), "diary")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errPermanent, err)
	}
	// Content-addressed items are safe to send again: a gateway holding
	// this send in doubt may forward it (WithResend).
	id := sha256.Sum256([]byte("checkpoint items without the diary:" + op.ID))
	res, err := f.P.Call(WithResend(WithOpID(ctx, hex.EncodeToString(id[:])), ResendLookedUp), op.Tool, rest)
	if err == nil && res != nil {
		res["diary_skipped"] = "this checkpoint's diary entry is already on the primary; its items were sent again without it"
		res["diary_entry_id"], res["diary"] = found.ID, found.answer()
	}
	return res, err
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// factsOf are the primary's facts with a's subject and predicate.
func (f *Flusher) factsOf(ctx context.Context, a map[string]any) ([]map[string]any, error) {
	_, facts, err := f.lookUp(ctx, "mempalace_kg_query", map[string]any{"entity": str(a, "subject"), "direction": "outgoing"}, "facts")
	var out []map[string]any
	for _, x := range facts {
		if fm, _ := x.(map[string]any); fm["subject"] == str(a, "subject") && fm["predicate"] == str(a, "predicate") {
			out = append(out, fm)
		}
	}
	return out, err
}

// factExists looks for a's fact (subject, predicate, object, valid_from,
// valid_to) on the primary.
func (f *Flusher) factExists(ctx context.Context, a map[string]any) (bool, error) {
	facts, err := f.factsOf(ctx, a)
	for _, fm := range facts {
		if fm["object"] == str(a, "object") && str(fm, "valid_from") == str(a, "valid_from") && str(fm, "valid_to") == str(a, "valid_to") {
			return true, nil
		}
	}
	return false, err
}

// closedAlready confirms on the primary that an invalidate or supersede
// took effect: the old fact is closed and nothing identical is still open
// (for supersede, the new fact is open).
func (f *Flusher) closedAlready(ctx context.Context, tool string, a map[string]any) (bool, error) {
	facts, err := f.factsOf(ctx, a)
	if err != nil {
		return false, err
	}
	old := str(a, "object")
	if tool == "kg_supersede" {
		old = str(a, "old_object")
	}
	closed, open, newOpen := false, false, false
	for _, fm := range facts {
		switch fm["object"] {
		case old:
			if str(fm, "valid_to") == "" {
				open = true
			} else {
				closed = true
			}
		case str(a, "new_object"):
			if tool == "kg_supersede" && str(fm, "valid_to") == "" {
				newOpen = true
			}
		}
	}
	if tool == "kg_supersede" {
		return closed && !open && newOpen, nil
	}
	return closed && !open, nil
}

// findEvent looks for the event this coordination op made on the primary
// (catalogue.EventFound): by its edge_op_id, or, for an ack, an identical
// ack from its sender.
func (f *Flusher) findEvent(ctx context.Context, rec catalogue.Tool, op Op, a map[string]any) (map[string]any, error) {
	filter, match, ok := catalogue.EventFound(rec, a, op.ID, op.CreatedAt)
	if !ok {
		return nil, nil
	}
	_, evs, err := f.lookUp(ctx, "mempalace_event_list", filter, "events")
	if err != nil {
		return nil, err
	}
	for _, x := range evs {
		if ev, _ := x.(map[string]any); ev != nil && match(ev) {
			return ev, nil
		}
	}
	return nil, nil
}

// noDrawersYet is how MemPalace (3.11.0, mcp_server/_session.py) answers a
// read of its drawers before the first drawer has created its database
// file: nothing is there, so the look-up found nothing. Read as an error,
// it held a fresh primary's first diary entry in the outbox until some
// device filed a drawer.
const noDrawersYet = "Chroma database missing"

// ErrLookup is a look-up on the primary that could not be read: a JSON-RPC
// error, an answer with "error" or success:false, or one without the list
// it should hold. It never means "not there".
var ErrLookup = errors.New("look-up failed")

// lookUp calls a read tool and returns its answer and the list under key;
// any answer that is not a readable list is ErrLookup (RFC 003 §7.6: a
// 200 with success:false must be read, not trusted).
func (f *Flusher) lookUp(ctx context.Context, tool string, args map[string]any, key string) (map[string]any, []any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrLookup, tool, err)
	}
	res, err := f.P.Call(ctx, tool, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrLookup, tool, err)
	}
	if e, ok := res["error"]; ok && e == noDrawersYet {
		return res, nil, nil
	}
	if e, ok := res["error"]; ok || res["success"] == false {
		return nil, nil, fmt.Errorf("%w: %s answered %v", ErrLookup, tool, e)
	}
	list, ok := res[key].([]any)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s answered without %q", ErrLookup, tool, key)
	}
	return res, list, nil
}

// sendWrite sends the op's own call: exactly the tool and the argument
// bytes the agent's call left in the outbox, carrying the op id
// (WithOpID) so a gateway's ledger answers a repeat from its record. An
// op an operator said to send again (Op.Resend) says so on every path,
// whatever resend its replay chose: a gateway's ledger forwards it
// unchecked, where a looked-up resend of a diary entry it holds in doubt
// stays in doubt for good (attack84 F3).
func (f *Flusher) sendWrite(ctx context.Context, op Op, payload json.RawMessage) (map[string]any, error) {
	if op.Resend {
		ctx = WithResend(ctx, ResendByOperator)
	}
	rec, _ := catalogue.Lookup(op.Tool)
	switch {
	case op.Ordinal <= 0 || f.History:
	case rec.Name == "add_drawer":
		ctx = WithReplay(ctx) // the local palace held it already: a gateway checks its trash
	case rec.Name == "checkpoint":
		ctx = context.WithValue(ctx, replayItemsKey, ReplayItems(op.Ordinal)) // so did it these items
	}
	if rec.Name == "update_drawer" || rec.Name == "delete_drawer" {
		base, err := querierMeta(ctx, f.S.flushDB, baseKey(op.ID))
		if err != nil {
			return nil, fmt.Errorf("%w: reading the update's base: %w", ErrNotSent, err)
		}
		ctx = context.WithValue(ctx, baseCtxKey, base) // "" (none, or retried to overwrite): no check
	}
	if rec.Name == "kg_add" {
		ctx = context.WithValue(ctx, madeAtCtxKey, op.CreatedAt)
	}
	as, err := querierMeta(ctx, f.S.flushDB, queuedAsKey(op.ID))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the device it was queued as: %w", ErrNotSent, err)
	}
	if as != "" {
		ctx = context.WithValue(ctx, queuedAsCtxKey, as)
	}
	return f.P.Call(WithOpID(ctx, op.ID), op.Tool, payload)
}

// MadeAtFrom is, for the send of a kg_add op, when the op was made (zero
// for any other call): the Primary puts it in
// params._meta["devbox-config/made-at"], so a gateway tells an add made
// before a replacement of its value landed from one made after.
func MadeAtFrom(ctx context.Context) time.Time {
	t, _ := ctx.Value(madeAtCtxKey).(time.Time)
	return t
}

// QueuedAsFrom is, for the send of an op a retry sends as another device
// than the one it was queued as, that device ("": none): the Primary
// puts it in params._meta["devbox-config/queued-as"], and a gateway's
// ledger keys the op id under it, so that the op is filed once whichever
// machine sends it (this one, renamed, or a copy under the old id).
func QueuedAsFrom(ctx context.Context) string {
	d, _ := ctx.Value(queuedAsCtxKey).(string)
	return d
}

// BaseFrom is the base of the update_drawer or delete_drawer being sent ("": none): the
// Primary puts it in params._meta["devbox-config/base"], and a gateway
// refuses the update if the primary's text is no longer the one it
// names (ChangedOnPrimary).
func BaseFrom(ctx context.Context) string {
	b, _ := ctx.Value(baseCtxKey).(string)
	return b
}

// args parses an op's payload for the replay's look-ups.
func args(op Op) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(op.Payload, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: payload is not a JSON object: %v", errPermanent, err)
	}
	return m, nil
}

type ctxKey int

const (
	opIDKey ctxKey = iota
	resendKey
	copyKey
	replayKey
	replayItemsKey
	baseCtxKey
	queuedAsCtxKey
	madeAtCtxKey
)

// WithReplay marks an edge's add_drawer its local palace answered
// already_exists (Write.Ordinal): the Primary marks the request a replay
// (params._meta["devbox-config/replay"]), and a gateway refuses it, as it
// does a join's, when its trash holds the drawer as deleted.
func WithReplay(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayKey, true)
}

// Replaying reports a call WithReplay marked.
func Replaying(ctx context.Context) bool { return ctx.Value(replayKey) == true }

// MaxReplayItems is how many of a checkpoint's first items its Ordinal
// can name as replays (one bit each of a non-negative int64).
const MaxReplayItems = 62

// ReplayItems is the indexes of a checkpoint's items its Ordinal names
// (bit i: item i) as replays of the drawers the local palace holds.
func ReplayItems(ordinal int) []int {
	var idx []int
	for i := range MaxReplayItems {
		if ordinal&(1<<i) != 0 {
			idx = append(idx, i)
		}
	}
	return idx
}

// ReplayItemsFrom is the checkpoint's replayed items the flusher names
// for this send (nil: none): the Primary puts them in the request
// (params._meta["devbox-config/replay-items"]), and a gateway does not
// file those whose drawer its trash holds as deleted.
func ReplayItemsFrom(ctx context.Context) []int {
	idx, _ := ctx.Value(replayItemsKey).([]int)
	return idx
}

// WithCopy marks a replayed diary write (History) as the n-th equal copy
// the primary lacks: the Primary puts n in the request
// (params._meta["devbox-config/join-copy"]), and a gateway's trash
// accounts for as many copies as it holds deleted.
func WithCopy(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, copyKey, n)
}

// CopyFrom is the copy WithCopy marked the call with (0 for none).
func CopyFrom(ctx context.Context) int {
	n, _ := ctx.Value(copyKey).(int)
	return n
}

// WithOpID marks a call as the send of outbox op id: the Primary puts the
// id in the request (params._meta["devbox-config/op-id"]). Look-ups are
// never marked.
func WithOpID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opIDKey, id)
}

// OpIDFrom is the op id WithOpID put in ctx ("" for any other call).
func OpIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(opIDKey).(string)
	return id
}

// Why an op that may have landed is sent again (the gateway's ledger
// forwards an op it holds in doubt only with one of these).
const (
	ResendLookedUp   = "looked-up" // its look-up found it is not on the primary
	ResendByOperator = "operator"  // an operator said to send it again
)

// WithResend marks a send as a resend after ambiguity, and why; the
// Primary puts it in params._meta["devbox-config/resend"].
func WithResend(ctx context.Context, why string) context.Context {
	return context.WithValue(ctx, resendKey, why)
}

// ResendFrom is why WithResend marked the call ("" for none).
func ResendFrom(ctx context.Context) string {
	v, _ := ctx.Value(resendKey).(string)
	return v
}
