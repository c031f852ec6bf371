package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
)

// diaryOf is the diary entry a write makes that the gateway can settle:
// a diary_write's arguments, or a checkpoint's diary naming its agent
// (authorize requires it; MemPalace would file one without it under a
// default agent's wing, not the one DiaryWingFor names); nil for any
// other write.
func diaryOf(t catalogue.Tool, args map[string]any) map[string]any {
	switch d, _ := args["diary"].(map[string]any); {
	case t.Name == "diary_write":
		return args
	case t.Name == "checkpoint" && str(d["agent_name"]) != "":
		return d
	}
	return nil
}

// settledDiary forwards a write of a diary entry (diary_write, or a
// checkpoint's diary: diaryOf) under the write slot and settles a lost
// upstream answer itself. A diary entry has no server guard and its
// text repeats, so an edge looking for "an entry with this text" after a
// lost answer can take another writer's for its own (another palace of
// the same device, say). Here no other write through the gateway runs
// between the two listings, and MemPalace answers requests one at a time,
// so a listing made after the lost answer sees the write if it was made:
// a room one drawer larger whose one entry newer than its newest before
// has the text's id suffix holds this write (the answer names it; a
// checkpoint's, as its diary: MemPalace files its items first, and they
// are filed once however often they are sent; recordStep looks them up
// to stamp them, landed); a room no larger with no
// newer entry, a write never made (503: the edge sends it again, and the
// ledger forwards it). Any other outcome (a listing that failed, a writer
// that bypassed the gateway) leaves the answer lost, the op in doubt, as
// before.
//
// The cost, per diary write: two list_drawers calls before it is
// forwarded (the room's size, and its newest entry: list_drawers sorts by
// id, and a wing's entry ids by their stamp), noted in the op-id ledger
// (one row update) for a resend of the op held in doubt (resentDiary),
// and after a lost answer the same and the entries newer than that.
func (s *Server) settledDiary(ctx context.Context, t catalogue.Tool, diary map[string]any, body []byte) (int, []byte) {
	wing, suffix := catalogue.DiaryWingFor(diary), catalogue.EntrySuffix(catalogue.DiaryEntry(diary))
	if seen := ledger.Before(ctx); seen != "" {
		if status, resp, decided := s.resentDiary(ctx, t, seen, wing, suffix, body); decided {
			return status, resp
		}
	}
	before, listed := diaryNewest(ctx, s.upstreamResult, wing, "")
	note := before.note()
	if !listed {
		note = roomUnread // its resend cannot tell a landed entry: in doubt (attack76 F5)
	}
	if err := ledger.NoteBefore(ctx, note); err != nil {
		// Sent all the same: without the note a resend after a gateway
		// stopped mid-forward is decided by the edge's count, as before.
		s.Log.Warn("op-id ledger: a diary write's room not noted before its send", "err", err)
	}
	status, resp := s.upstreamCall(ctx, body)
	if !listed || !answerLost(status) {
		return status, resp
	}
	after, newer, made, listed := s.diarySince(ctx, wing, suffix, before.newest)
	switch {
	case !listed:
	case len(newer) == 0 && after.total == before.total:
		return notApplied(body, "does not hold the diary entry")
	case len(made) == 1 && len(newer) == 1 && after.total == before.total+1:
		return settledAnswer(body, madeAnswer(t, made[0]))
	}
	return status, resp
}

// resentDiary decides a resend of a diary write the ledger held in doubt
// from what its first send noted (seen: roomSeen.note before it): every
// entry filed in the room since is newer than its newest entry then and
// none has the text's suffix, so the write was never made (the resend is
// forwarded: decided false); one entry more, the one newer with the
// suffix, it was (answered with that entry). Drawers filed after the
// room's entries that are not entries (add_drawer's, a diary ingest's)
// are not counted (review25 finding 2). A room grown by more entries
// than it holds newer ones has one filed with an older stamp: the
// primary's clock stepped back (a TZ change, an NTP step), and the write may be there, stamped before the fence the edge
// counts from (attack74 F5); that, or any other room, keeps the op in
// doubt (-32031, saying why): the operator's retry or delivered settles
// it. So does a first send whose room could not be read (roomUnread:
// attack76 F5). A delete in the room meanwhile can hide a stepped-back
// entry.
func (s *Server) resentDiary(ctx context.Context, t catalogue.Tool, seen, wing, suffix string, body []byte) (int, []byte, bool) {
	if seen == roomUnread {
		status, resp := s.keptInDoubt(body, "the room could not be read", fmt.Sprintf("the diary room of %s could not be read before that send, so nothing tells whether the entry landed", wing))
		return status, resp, true
	}
	then := parseRoomSeen(seen)
	now, newer, made, listed := s.diarySince(ctx, wing, suffix, then.newest)
	if then.tail < 0 { // noted before tails were: the totals are compared
		then.tail = now.tail
	}
	grown := (now.total - now.tail) - (then.total - then.tail)
	switch {
	case !listed:
		return 0, nil, false // as before: the edge's look-up decided to send it
	case len(made) == 0 && grown <= len(newer):
		return 0, nil, false
	case len(made) == 1 && len(newer) == 1 && grown == 1:
		s.Log.Info("op-id ledger: a diary op in doubt found made on the primary: answered with its entry, not forwarded", "op_id", opIDOf(body), "entry", made[0]["drawer_id"])
		status, resp := settledAnswer(body, madeAnswer(t, made[0]))
		return status, resp, true
	}
	status, resp := s.keptInDoubt(body, "the room grew behind the fence", fmt.Sprintf("the diary room of %s holds %d more entries than before it, %d of them newer than its newest entry then (%d with this text): the primary's clock may have stepped back (run it in UTC), or something wrote or deleted there meanwhile", wing, grown, len(newer), len(made)))
	return status, resp, true
}

// roomUnread is the note of a first send whose diary room could not be
// read before it (resentDiary keeps its resend in doubt). A gateway from
// before it reads the note as a room of 0 drawers, grown since: in doubt
// too, unless the room's one entry is the op's.
const roomUnread = "unread"

// keptInDoubt is the answer to a looked-up resend of a diary op that
// resentDiary keeps in doubt (why, for the caller; reason, for the log):
// nothing is forwarded.
func (s *Server) keptInDoubt(body []byte, reason, why string) (int, []byte) {
	s.Log.Warn("op-id ledger: a diary op in doubt kept in doubt, not forwarded", "op_id", opIDOf(body), "why", reason)
	msg := "devbox-config gateway: this diary entry may be on the primary: its first send reached the primary without an answer, and " + why + ". Nothing was written now, and the op stays in doubt. Look in the room: if the entry is there, devbox-config edge outbox delivered <op>; if not, devbox-config edge outbox retry <op>"
	return http.StatusOK, rpcErrBytes(json.RawMessage(gjson.GetBytes(body, "id").Raw), ledger.CodeInDoubt, msg)
}

// opIDOf is the op id a call's body carries, for the log.
func opIDOf(body []byte) string {
	return gjson.GetBytes(body, "params._meta."+gjson.Escape(ledger.MetaKey)).Str
}

// diarySince is what diaryNewest reads of wing's diary room, its entries
// newer than fence, and those of them with the suffix (ok false: a
// listing failed).
func (s *Server) diarySince(ctx context.Context, wing, suffix, fence string) (room roomSeen, newer, made []map[string]any, ok bool) {
	room, ok = diaryNewest(ctx, s.upstreamResult, wing, fence, func(row map[string]any) { newer = append(newer, row) })
	for _, row := range newer {
		id, _ := row["drawer_id"].(string)
		if _, sfx, _ := catalogue.DiaryEntryID(id); sfx == suffix {
			made = append(made, row)
		}
	}
	return room, newer, made, ok
}

// madeAnswer is the answer of a diary write (a checkpoint's, as its
// diary) the gateway found made: the entry row.
func madeAnswer(t catalogue.Tool, row map[string]any) map[string]any {
	meta, _ := row["metadata"].(map[string]any)
	res := map[string]any{"success": true, "entry_id": row["drawer_id"], "recovered": "the upstream's answer was lost: the gateway found the entry it made"}
	if ts, ok := meta["filed_at"].(string); ok {
		res["timestamp"] = ts
	}
	if t.Name == "checkpoint" {
		res = map[string]any{"diary": res}
	}
	return res
}

// roomSeen is what diaryNewest reads of a diary room: its drawers
// (total), those of them whose ids sort after its last entry's (tail:
// drawers that are not entries, add_drawer's "drawer_…" or a diary
// ingest's; one named by a hash, a source adapter's, sorts before and
// counts as an entry), and its newest entry's stamp ("" for none).
type roomSeen struct {
	total, tail int
	newest      string
}

// note is the room as NoteBefore keeps it: "total tail newest".
func (r roomSeen) note() string { return fmt.Sprintf("%d %d %s", r.total, r.tail, r.newest) }

// parseRoomSeen reads a note: "total tail newest", or "total newest"
// from a gateway before tails were noted (tail -1: unknown, and so is a
// malformed one). A stamp holds an underscore, a count does not; newest
// may be empty. A malformed total reads as 0: the room then looks grown,
// and the op stays in doubt.
func parseRoomSeen(note string) roomSeen {
	f, r := strings.Fields(note), roomSeen{tail: -1}
	if n := len(f); n > 0 && strings.Contains(f[n-1], "_") {
		f, r.newest = f[:n-1], f[n-1]
	}
	if len(f) > 0 {
		r.total, _ = strconv.Atoi(f[0]) // malformed: 0, see above
	}
	if len(f) > 1 {
		if t, err := strconv.Atoi(f[1]); err == nil && t >= 0 {
			r.tail = t
		}
	}
	return r
}

// diaryNewest reads wing's diary room from its end (roomSeen); with a
// fence (a stamp), newer is called with each entry newer than it (ok
// false: a listing failed). ask makes a call and returns its result (the
// gateway's upstreamResult, a restore's result).
func diaryNewest(ctx context.Context, ask func(context.Context, string, map[string]any) map[string]any, wing, fence string, newer ...func(row map[string]any)) (room roomSeen, ok bool) {
	first := ask(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 1})
	n, ok := first["total"].(float64)
	if !ok {
		// MemPalace's answer while the palace holds no drawer at all (no
		// database file yet): nothing is there.
		return roomSeen{}, first["error"] == "Chroma database missing"
	}
	room.total = int(n)
	for end := room.total; end > 0; end -= 100 {
		page := ask(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 100, "offset": max(end-100, 0)})
		rows, ok := page["drawers"].([]any)
		if !ok {
			return roomSeen{}, false
		}
		for i := len(rows) - 1; i >= 0; i-- {
			row, _ := rows[i].(map[string]any)
			id, _ := row["drawer_id"].(string)
			stamp, _, ok := catalogue.DiaryEntryID(id)
			switch {
			case !ok && room.newest == "": // after every entry: none read yet
				room.tail++
			case !ok:
			case len(newer) == 0 || stamp <= fence:
				room.newest = max(room.newest, stamp)
				return room, true
			default:
				room.newest = max(room.newest, stamp)
				newer[0](row)
			}
		}
	}
	return room, true
}
