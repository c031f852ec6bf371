package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// settledDiary forwards a diary_write under the write slot and settles a
// lost upstream answer itself. A diary entry has no server guard and its
// text repeats, so an edge looking for "an entry with this text" after a
// lost answer can take another writer's for its own (another palace of
// the same device, say). Here no other write through the gateway runs
// between the two listings, and MemPalace answers requests one at a time,
// so a listing made after the lost answer sees the write if it was made:
// one more entry with the text's id suffix than before is this write (its
// answer names it); none more, and a room no larger, is a write never
// made (503: the edge sends it again, and the ledger forwards it). Any
// other outcome (a listing that failed, two new entries: a writer that
// bypassed the gateway) leaves the answer lost, the op in doubt, as before.
//
// The listings cost a list_drawers of the room's total and one of the
// entries filed since yesterday (the gateway's clock; a primary's clock
// more than a day behind only leaves the op in doubt), per diary write.
func (s *Server) settledDiary(ctx context.Context, args map[string]any, body []byte) (int, []byte) {
	wing, suffix := catalogue.DiaryWingFor(args), catalogue.EntrySuffix(catalogue.DiaryEntry(args))
	since := s.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02")
	total, before, listed := s.diaryEntries(ctx, wing, suffix, since)
	status, resp := s.upstreamCall(ctx, body)
	if !listed || status != http.StatusBadGateway && status != http.StatusGatewayTimeout {
		return status, resp
	}
	totalAfter, after, listed := s.diaryEntries(ctx, wing, suffix, since)
	if !listed {
		return status, resp
	}
	var made []map[string]any
	for id, row := range after {
		if _, ok := before[id]; !ok {
			made = append(made, row)
		}
	}
	id := json.RawMessage(gjson.GetBytes(body, "id").Raw)
	switch {
	case len(made) == 0 && totalAfter == total:
		return http.StatusServiceUnavailable, rpcErrBytes(id, -32000, "upstream answer lost, and the upstream does not hold the diary entry: not applied, send it again")
	case len(made) == 1:
		meta, _ := made[0]["metadata"].(map[string]any)
		res := map[string]any{"success": true, "entry_id": made[0]["drawer_id"], "recovered": "the upstream's answer was lost: the gateway found the entry it made"}
		if ts, ok := meta["filed_at"].(string); ok {
			res["timestamp"] = ts
		}
		return http.StatusOK, encodeJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
			"content": []any{map[string]any{"type": "text", "text": string(encodeJSON(res))}}}})
	}
	return status, resp
}

// diaryEntries is the number of drawers in wing's diary room, and its
// entries filed since the date whose id ends in suffix, by id (ok false:
// a listing failed).
func (s *Server) diaryEntries(ctx context.Context, wing, suffix, since string) (total int, rows map[string]map[string]any, ok bool) {
	first := s.upstreamResult(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 1})
	n, ok := first["total"].(float64)
	if !ok {
		return 0, nil, false
	}
	rows = map[string]map[string]any{}
	for offset := 0; ; {
		page := s.upstreamResult(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "since": since, "limit": 100, "offset": offset})
		list, ok := page["drawers"].([]any)
		all, _ := page["total"].(float64)
		if !ok {
			return 0, nil, false
		}
		for _, x := range list {
			row, _ := x.(map[string]any)
			id, _ := row["drawer_id"].(string)
			if _, sfx, ok := catalogue.DiaryEntryID(id); ok && sfx == suffix {
				rows[id] = row
			}
		}
		if offset += len(list); len(list) == 0 || float64(offset) >= all {
			return int(n), rows, true
		}
	}
}
