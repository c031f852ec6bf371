package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// send replays one op with the knowledge of what is safe to repeat for its
// record type (RFC 001 §3, §4.4, §7.6; RFC 003 §7.1). ambiguous means an
// earlier attempt may have landed without an answer.
//
//	add_drawer                 resend (the server dedupes by content id)
//	checkpoint                 resend; with a diary, after ambiguity (always when
//	                           replaying history): if the diary's sha256[:12]
//	                           suffix is on the primary, resend the items alone
//	kg_add, open fact          resend (the server's open-fact guard)
//	kg_add, closed fact        kg_query first; skip if (s,p,o,from,to) exists
//	kg_invalidate/supersede    in order; "nothing open" or ambiguity -> confirm with kg_query
//	diary_write                after ambiguity (always when replaying history, join):
//	                           skip if the entry's sha256[:12] suffix is on the primary
//	update_drawer              resend
//	event_append, patch_submit after ambiguity: event_list for metadata.edge_op_id first
//	event_ack                  after ambiguity: look for this sender's ack of the target
//
// A look-up the primary refuses outright (a JSON-RPC error outside the
// server range, e.g. a gateway device that may write its diary wing but
// not read it) can never succeed. Behind a gateway that advertises its
// op-id ledger the op is then sent under its own op id without the
// look-up: the ledger answers a repeat from its record. Without a ledger
// the refusal is permanent (classify), so the op goes dead where an
// operator sees why, instead of being retried forever.
func (f *Flusher) send(ctx context.Context, run *flushRun, op Op, ambiguous bool) (map[string]any, error) {
	res, err := f.replay(ctx, run, op, ambiguous)
	if lookUpRefused(err) && f.behindLedger() {
		f.Log.Warn("outbox: the primary refuses the look-up this op's replay needs; sending it under its op id, which the gateway's ledger answers from its record", "op", op.ID[:12], "tool", op.Tool, "err", err)
		a, aerr := args(op)
		if aerr != nil {
			return nil, aerr
		}
		return f.sendWrite(ctx, op, a)
	}
	return res, err
}

// LedgerTarget is a Primary that knows whether it is a gateway with an
// op-id ledger (it advertised one on its last answer).
type LedgerTarget interface {
	Ledger() bool
}

func (f *Flusher) behindLedger() bool {
	lt, ok := f.P.(LedgerTarget)
	return ok && lt.Ledger()
}

// lookUpRefused: a replay's look-up failed with a JSON-RPC refusal that is
// not in the server range (-32000..-32099, which a retry may get past).
func lookUpRefused(err error) bool {
	var rpc *RPCError
	return errors.Is(err, ErrLookup) && errors.As(err, &rpc) && (rpc.Code > -32000 || rpc.Code < -32099)
}

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
			found, err := f.factExists(ctx, a, str(a, "object"), str(a, "valid_from"), str(a, "valid_to"))
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
		res, err := f.sendWrite(ctx, op, a)
		if err == nil && res["success"] == false && strings.Contains(strings.ToLower(fmt.Sprint(res["error"])), "no open fact") {
			if landed, cerr := f.closedAlready(ctx, rec.Name, a); cerr == nil && landed {
				return map[string]any{"success": true, "skipped": "nothing open to close; confirmed closed on the primary"}, nil
			}
		}
		return res, err
	case catalogue.ServerDeduped:
		if d, ok := a["diary"].(map[string]any); ok && (ambiguous || f.History) {
			return f.sendCheckpoint(ctx, run, op, a, d)
		}
	case catalogue.DiarySuffix:
		if !f.History && !ambiguous {
			break // a first attempt of a live write: nothing to look up
		}
		landed, err := f.diaryLanded(ctx, run, a)
		if err != nil {
			return nil, err
		}
		if landed {
			return map[string]any{"success": true, "skipped": "this diary entry is already on the primary"}, nil
		}
		return f.sendDiary(ctx, run, op, a, a)
	case catalogue.EventLookup:
		if ambiguous {
			if ev, err := f.findStamped(ctx, op, a); err != nil {
				return nil, err
			} else if ev != nil {
				return map[string]any{"success": true, "event": ev, "recovered": "found on the primary by edge_op_id"}, nil
			}
		}
	case catalogue.AckLookup:
		if ambiguous {
			if ev, err := f.findAck(ctx, op, a); err != nil {
				return nil, err
			} else if ev != nil {
				return map[string]any{"success": true, "event": ev, "recovered": "ack found on the primary"}, nil
			}
		}
	}
	return f.sendWrite(ctx, op, a)
}

// sendCheckpoint replays a checkpoint that carries a diary entry and may
// have landed before. Its items are content-addressed (the server files an
// identical item once), but its diary half has no server guard: a resend
// would write the entry twice. MemPalace files the items first and the
// diary last, so the diary's suffix on the primary means the checkpoint
// landed; its items are then sent again without the diary, under an op id
// derived from this op's (so a gateway's ledger still answers a repeat of
// that send from its record, and never sees this op id with other
// arguments).
func (f *Flusher) sendCheckpoint(ctx context.Context, run *flushRun, op Op, a, diary map[string]any) (map[string]any, error) {
	landed, err := f.diaryLanded(ctx, run, diary)
	if err != nil {
		return nil, err
	}
	if !landed {
		return f.sendDiary(ctx, run, op, a, diary)
	}
	items, _ := a["items"].([]any)
	if len(items) == 0 {
		return map[string]any{"success": true, "skipped": "this checkpoint's diary entry is already on the primary"}, nil
	}
	rest := make(map[string]any, len(a))
	for k, v := range a {
		if k != "diary" {
			rest[k] = v
		}
	}
	id := sha256.Sum256([]byte("checkpoint items without the diary:" + op.ID))
	res, err := f.P.Call(WithOpID(ctx, hex.EncodeToString(id[:])), op.Tool, rest)
	if err == nil && res != nil {
		res["diary_skipped"] = "this checkpoint's diary entry is already on the primary; its items were sent again without it"
	}
	return res, err
}

// diarySuffix is the last 12 hex digits of a diary entry's drawer id:
// sha256 of its text.
func diarySuffix(diary map[string]any) string {
	sum := sha256.Sum256([]byte(catalogue.DiaryEntry(diary)))
	return hex.EncodeToString(sum[:])[:12]
}

// diaryLanded reports whether an entry with this diary's text is in its
// wing on the primary (looked up once per drain and wing).
func (f *Flusher) diaryLanded(ctx context.Context, run *flushRun, diary map[string]any) (bool, error) {
	suffixes, err := f.diarySuffixes(ctx, run, catalogue.DiaryWingFor(diary))
	if err != nil {
		return false, err
	}
	return suffixes[diarySuffix(diary)], nil
}

// sendDiary sends the op (a diary_write, or a checkpoint carrying diary)
// and, once it landed, remembers the entry for the rest of the drain.
func (f *Flusher) sendDiary(ctx context.Context, run *flushRun, op Op, a, diary map[string]any) (map[string]any, error) {
	res, err := f.sendWrite(ctx, op, a)
	if err == nil && res["success"] != false {
		run.diarySuffixes[catalogue.DiaryWingFor(diary)][diarySuffix(diary)] = true
	}
	return res, err
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// factExists looks for a fact (subject, predicate, object, from, to) on
// the primary; to == "" matches only an open fact.
func (f *Flusher) factExists(ctx context.Context, a map[string]any, object, from, to string) (bool, error) {
	facts, err := f.lookUp(ctx, "mempalace_kg_query", map[string]any{"entity": str(a, "subject"), "direction": "outgoing"}, "facts")
	if err != nil {
		return false, err
	}
	for _, x := range facts {
		fm, _ := x.(map[string]any)
		if fm["subject"] == str(a, "subject") && fm["predicate"] == str(a, "predicate") && fm["object"] == object &&
			strOrEmpty(fm["valid_from"]) == from && strOrEmpty(fm["valid_to"]) == to {
			return true, nil
		}
	}
	return false, nil
}

// closedAlready confirms on the primary that an invalidate or supersede
// took effect: the old fact is closed and nothing identical is still open
// (for supersede, the new fact is open).
func (f *Flusher) closedAlready(ctx context.Context, tool string, a map[string]any) (bool, error) {
	facts, err := f.lookUp(ctx, "mempalace_kg_query", map[string]any{"entity": str(a, "subject"), "direction": "outgoing"}, "facts")
	if err != nil {
		return false, err
	}
	old := str(a, "object")
	if tool == "kg_supersede" {
		old = str(a, "old_object")
	}
	closed, open, newOpen := false, false, false
	for _, x := range facts {
		fm, _ := x.(map[string]any)
		if fm["subject"] != str(a, "subject") || fm["predicate"] != str(a, "predicate") {
			continue
		}
		switch fm["object"] {
		case old:
			if strOrEmpty(fm["valid_to"]) == "" {
				open = true
			} else {
				closed = true
			}
		case str(a, "new_object"):
			if tool == "kg_supersede" && strOrEmpty(fm["valid_to"]) == "" {
				newOpen = true
			}
		}
	}
	if tool == "kg_supersede" {
		return closed && !open && newOpen, nil
	}
	return closed && !open, nil
}

func strOrEmpty(v any) string {
	s, _ := v.(string)
	return s
}

// diarySuffixes lists the primary's diary drawers of a wing once per flush
// run and collects their sha256(entry)[:12] id suffixes (RFC 001 §7.6).
func (f *Flusher) diarySuffixes(ctx context.Context, run *flushRun, wing string) (map[string]bool, error) {
	if s, ok := run.diarySuffixes[wing]; ok {
		return s, nil
	}
	set := map[string]bool{}
	for offset := 0; ; offset += 100 {
		res, drawers, err := f.lookUpPage(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 100, "offset": offset}, "drawers")
		if err != nil {
			return nil, err
		}
		for _, x := range drawers {
			d, _ := x.(map[string]any)
			id := fmt.Sprint(d["drawer_id"])
			if i := strings.LastIndex(id, "_"); i >= 0 && len(id)-i-1 == 12 {
				set[id[i+1:]] = true
			}
		}
		total, _ := res["total"].(float64)
		if len(drawers) == 0 || float64(offset+len(drawers)) >= total {
			break
		}
	}
	run.diarySuffixes[wing] = set
	return set, nil
}

// findStamped looks for the event this op appended, by its edge_op_id, in
// the recent window of the op's stream and sender.
func (f *Flusher) findStamped(ctx context.Context, op Op, a map[string]any) (map[string]any, error) {
	return f.findEvent(ctx, op, map[string]any{"stream": str(a, "stream"), "from_agent": str(a, "from_agent")}, func(ev map[string]any) bool {
		meta, _ := ev["metadata"].(map[string]any)
		return meta != nil && meta["edge_op_id"] == op.ID
	})
}

// findAck looks for this ack on the primary: an event.ack from this
// sender for the same target, with the same status and body (event_ack has
// no metadata to carry an op id; a sender may ack one event more than
// once, and only an identical ack is this one).
func (f *Flusher) findAck(ctx context.Context, op Op, a map[string]any) (map[string]any, error) {
	return f.findEvent(ctx, op, map[string]any{"type": "event.ack", "from_agent": str(a, "from_agent")}, func(ev map[string]any) bool {
		meta, _ := ev["metadata"].(map[string]any)
		if meta == nil || meta["ack_of"] != str(a, "event_id") {
			return false
		}
		if s := str(a, "status"); s != "" && ev["status"] != s {
			return false
		}
		return str(a, "body") == "" || ev["body"] == str(a, "body")
	})
}

func (f *Flusher) findEvent(ctx context.Context, op Op, filter map[string]any, match func(map[string]any) bool) (map[string]any, error) {
	// The primary stamps created_at itself; allow for clock skew.
	filter["since_created_at"] = op.CreatedAt.Add(-15 * time.Minute).UTC().Format("2006-01-02T15:04:05Z")
	filter["limit"] = 500
	evs, err := f.lookUp(ctx, "mempalace_event_list", filter, "events")
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

// ErrLookup is a look-up on the primary that could not be read: a JSON-RPC
// error, an answer with "error" or success:false, or one without the list
// it should hold. It never means "not there".
var ErrLookup = errors.New("look-up failed")

// lookUp calls a read tool and returns the list under key; any answer that
// is not a readable list is ErrLookup (RFC 003 §7.6: a 200 with
// success:false must be read, not trusted).
func (f *Flusher) lookUp(ctx context.Context, tool string, args map[string]any, key string) ([]any, error) {
	_, list, err := f.lookUpPage(ctx, tool, args, key)
	return list, err
}

func (f *Flusher) lookUpPage(ctx context.Context, tool string, args map[string]any, key string) (map[string]any, []any, error) {
	res, err := f.P.Call(ctx, tool, args)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrLookup, tool, err)
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

// sendWrite sends the op's own call: exactly the tool and arguments the
// agent's call left in the outbox, carrying the op id (WithOpID) so a
// gateway's ledger answers a repeat from its record.
func (f *Flusher) sendWrite(ctx context.Context, op Op, a map[string]any) (map[string]any, error) {
	return f.P.Call(WithOpID(ctx, op.ID), op.Tool, a)
}

type opIDKey struct{}

// WithOpID marks a call as the send of outbox op id: the Primary puts the
// id in the request (params._meta["devbox-config/op-id"]). Look-ups are
// never marked.
func WithOpID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opIDKey{}, id)
}

// OpIDFrom is the op id WithOpID put in ctx ("" for any other call).
func OpIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(opIDKey{}).(string)
	return id
}
