package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/joakimp/devbox-config/catalogue"
)

// noDedup is a checkpoint dedup_threshold no similarity reaches (they are
// at most 1): upstream files every item the gateway passes on.
const noDedup = "1.01"

// narrow rewrites an allowed call's arguments, for a device that does not
// read every wing, where upstream's answer would depend on other wings in
// a way the filter cannot cut afterwards:
//
//   - a diary_read without a wing reads the agent's entries in every wing,
//     and entries carry no wing: it is pinned to the diary's own wing
//     (which Authorize checked);
//   - a checkpoint skips an item that is a near-duplicate of any drawer,
//     in any wing, so the skip itself would tell a device that similar
//     content exists where it cannot read. The gateway checks each item
//     with check_duplicate, keeps only matches in readable wings, reports
//     those items as upstream would (in dec.found) and sends the rest with
//     deduplication off; when the primary does not answer a check, nothing
//     is sent (errNoAnswer: the caller answers busy), never an item as if
//     it had no duplicate, and never some items (a resend is of them all);
//   - a get_drawers' ids are kept in dec.asked: its answer's results[i]
//     is ids[i]'s, and the filter answers a drawer of a wing the device
//     cannot read as MemPalace answers an id that names none.
func (s *Server) narrow(ctx context.Context, d *Device, t catalogue.Tool, args map[string]any, dec *Decision) error {
	if d.readsAll() {
		return nil
	}
	switch t.Filter {
	case catalogue.FilterByID:
		dec.asked, _ = args["drawer_ids"].([]any)
	case catalogue.FilterDiary:
		if w, _ := args["wing"].(string); w == "" {
			args["wing"] = catalogue.DiaryWingFor(args)
		}
	case catalogue.FilterCheckpoint:
		items, _ := args["items"].([]any)
		threshold := any(json.Number("0.9"))
		if v, ok := args["dedup_threshold"]; ok {
			threshold = v
		}
		kept := []any{}
		for _, x := range items {
			item, _ := x.(map[string]any)
			content, _ := item["content"].(string)
			res := s.upstreamResult(ctx, "mempalace_check_duplicate", map[string]any{"content": content, "threshold": threshold})
			if res == nil {
				return fmt.Errorf("%w check_duplicate", errNoAnswer)
			}
			var matches []any
			list, _ := res["matches"].([]any)
			for _, m := range list {
				if mm, ok := m.(map[string]any); ok {
					if w, _ := mm["wing"].(string); d.reads(w) {
						matches = append(matches, mm)
					}
				}
			}
			if len(matches) > 0 {
				dec.found = append(dec.found, map[string]any{"room": item["room"], "matches": matches})
				continue
			}
			kept = append(kept, x)
		}
		args["items"] = kept
		args["dedup_threshold"] = json.Number(noDedup)
	}
	return nil
}
