package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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
	total, fence, listed := diaryNewest(ctx, s.upstreamResult, wing, "")
	if listed {
		if err := ledger.NoteBefore(ctx, fmt.Sprintf("%d %s", total, fence)); err != nil {
			// Sent all the same: without the note a resend after a gateway
			// stopped mid-forward is decided by the edge's count, as before.
			s.Log.Warn("op-id ledger: a diary write's room not noted before its send", "err", err)
		}
	}
	status, resp := s.upstreamCall(ctx, body)
	if !listed || !answerLost(status) {
		return status, resp
	}
	totalAfter, newer, made, listed := s.diarySince(ctx, wing, suffix, fence)
	switch {
	case !listed:
	case len(newer) == 0 && totalAfter == total:
		return notApplied(body, "does not hold the diary entry")
	case len(made) == 1 && len(newer) == 1 && totalAfter == total+1:
		return settledAnswer(body, madeAnswer(t, made[0]))
	}
	return status, resp
}

// resentDiary decides a resend of a diary write the ledger held in doubt
// from what its first send noted (seen: the room's size and newest entry
// before it): every drawer filed in the room since is newer than that
// entry and none has the text's suffix, so the write was never made (the
// resend is forwarded: decided false); one drawer more, the one newer
// entry with the suffix, it was (answered with that entry). A room grown
// by more drawers than it holds newer entries has something filed with
// an older stamp: the primary's clock stepped back (a TZ change, an NTP
// step), and the write may be there, stamped before the fence the edge
// counts from (attack74 F5); that, or any other room, keeps the op in
// doubt (-32031, saying why): the operator's retry or delivered settles
// it. A delete in the room meanwhile can hide a stepped-back entry.
func (s *Server) resentDiary(ctx context.Context, t catalogue.Tool, seen, wing, suffix string, body []byte) (int, []byte, bool) {
	var total int
	var fence string
	if _, err := fmt.Sscanf(seen, "%d %s", &total, &fence); err != nil {
		fence = "" // a room with no entry then: noted as "N "
	}
	totalNow, newer, made, listed := s.diarySince(ctx, wing, suffix, fence)
	switch {
	case !listed:
		return 0, nil, false // as before: the edge's look-up decided to send it
	case len(made) == 0 && totalNow-total <= len(newer):
		return 0, nil, false
	case len(made) == 1 && len(newer) == 1 && totalNow == total+1:
		status, resp := settledAnswer(body, madeAnswer(t, made[0]))
		return status, resp, true
	}
	why := fmt.Sprintf("devbox-config gateway: this diary entry may be on the primary: its first send reached the primary without an answer, and the diary room of %s holds %d drawer(s) more than before it, %d of them newer than its newest entry then (%d with this text): the primary's clock may have stepped back (run it in UTC), or something wrote or deleted there meanwhile. Nothing was written now, and the op stays in doubt. Look in the room: if the entry is there, devbox-config edge outbox delivered <op>; if not, devbox-config edge outbox retry <op>", wing, totalNow-total, len(newer), len(made))
	return http.StatusOK, rpcErrBytes(json.RawMessage(gjson.GetBytes(body, "id").Raw), ledger.CodeInDoubt, why), true
}

// diarySince is the number of drawers in wing's diary room, its entries
// newer than fence, and those of them with the suffix (ok false: a
// listing failed).
func (s *Server) diarySince(ctx context.Context, wing, suffix, fence string) (total int, newer, made []map[string]any, ok bool) {
	total, _, ok = diaryNewest(ctx, s.upstreamResult, wing, fence, func(row map[string]any) { newer = append(newer, row) })
	for _, row := range newer {
		id, _ := row["drawer_id"].(string)
		if _, sfx, _ := catalogue.DiaryEntryID(id); sfx == suffix {
			made = append(made, row)
		}
	}
	return total, newer, made, ok
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

// diaryNewest is the number of drawers in wing's diary room and the
// stamp of its newest entry ("" for none), read from the end of the room;
// with a fence (a stamp), newer is called with each entry newer than it
// (ok false: a listing failed). ask makes a call and returns its result
// (the gateway's upstreamResult, a restore's result).
func diaryNewest(ctx context.Context, ask func(context.Context, string, map[string]any) map[string]any, wing, fence string, newer ...func(row map[string]any)) (total int, newest string, ok bool) {
	first := ask(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 1})
	n, ok := first["total"].(float64)
	if !ok {
		// MemPalace's answer while the palace holds no drawer at all (no
		// database file yet): nothing is there.
		return 0, "", first["error"] == "Chroma database missing"
	}
	for end := int(n); end > 0; end -= 100 {
		page := ask(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 100, "offset": max(end-100, 0)})
		rows, ok := page["drawers"].([]any)
		if !ok {
			return 0, "", false
		}
		for i := len(rows) - 1; i >= 0; i-- {
			row, _ := rows[i].(map[string]any)
			id, _ := row["drawer_id"].(string)
			stamp, _, ok := catalogue.DiaryEntryID(id)
			switch {
			case !ok: // a drawer filed in the room that is not an entry sorts after them
			case len(newer) == 0 || stamp <= fence:
				return int(n), max(newest, stamp), true
			default:
				newest = max(newest, stamp)
				newer[0](row)
			}
		}
	}
	return int(n), newest, true
}
