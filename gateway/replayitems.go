package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// replayItemsStep is the trash's word on a checkpoint's items. One whose
// drawer the trash holds as deleted, not restored and not filed again
// since (deletedBefore, as for an add_drawer), is dropped from the items
// sent and kept in req.notFiled, which the answer lists among its errors
// (notFiledAnswer), when an edge names it a replay in
// params._meta[origin.ReplayItemsKey] (its local palace listed it as a
// duplicate of the very drawer it would file), or when this device wrote
// that drawer and did not delete it (writerStep's rule); every other item
// is filed as ever. It runs before narrow, while the indexes still name
// the items sent. A trash that cannot be read refuses a checkpoint with
// replayed items (fail closed, as a join's write) and lets any other
// through (logged, as writerStep); a primary that does not answer the
// look-up, busy. It answers the request itself when it refuses (ok false).
func (s *Server) replayItemsStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest) (ok bool) {
	meta := req.meta()
	raw, named := meta[origin.ReplayItemsKey]
	items, _ := req.Args["items"].([]any)
	replayed, valid := replayIndexes(raw, len(items))
	if named && (!valid || t.Name != "checkpoint") {
		s.refuse(x, d, req, -32602, fmt.Sprintf("devbox-config gateway: Invalid params: params._meta[%q] must be a list of indexes of a checkpoint's items", origin.ReplayItemsKey), ruleArguments, "")
		return false
	}
	if t.Name != "checkpoint" || len(items) == 0 {
		return true
	}
	kept, err := s.itemsToFile(ctx, d, t, req, items, replayed)
	switch {
	case errors.Is(err, errNoAnswer):
		s.busy(x, d, req, ruleNoAnswer, err)
		return false
	case err != nil && len(replayed) > 0:
		s.Log.Error("trash cannot be read: refusing a checkpoint with replayed items", "device", d.ID, "err", err)
		s.refuse(x, d, req, CodeDenied, "devbox-config gateway: the gateway's trash cannot be read, and a checkpoint whose items replay this device's local copies, which may file again what an admin deleted on the primary, is not made; nothing was written", ruleTrash, "")
		return false
	case err != nil:
		s.Log.Error("trash cannot be read: a checkpoint is made without looking for its writer's deleted copies", "device", d.ID, "err", err)
		return true
	}
	req.Args["items"] = kept
	return true
}

// itemsToFile is the checkpoint's items less those replayItemsStep drops
// (kept in req.notFiled); an error when the trash cannot be read or the
// primary did not answer a look-up.
func (s *Server) itemsToFile(ctx context.Context, d *Device, t catalogue.Tool, req *rpcRequest, items []any, replayed map[int]bool) ([]any, error) {
	kept := make([]any, 0, len(items))
	for i, item := range items {
		args, _ := item.(map[string]any)
		if args == nil {
			kept = append(kept, item)
			continue
		}
		del, found, err := s.deletedBefore(ctx, t, args, "", 0)
		if err != nil {
			return nil, err
		}
		if !found || !replayed[i] && !wroteIt(d, del) {
			kept = append(kept, item)
			continue
		}
		again := replayAgain
		if !replayed[i] {
			again = writerAgain
		}
		msg, _ := deletedWords(d, t, del, again)
		req.notFiled = append(req.notFiled, map[string]any{"item": item, "error": msg, "rule": ruleReplayDeleted})
	}
	return kept, nil
}

// replayIndexes reads params._meta[origin.ReplayItemsKey]: a list of at
// most n indexes, each of one of n items. ok false: anything else.
func replayIndexes(raw any, n int) (set map[int]bool, ok bool) {
	list, ok := raw.([]any)
	if !ok || len(list) > n {
		return nil, false
	}
	set = map[int]bool{}
	for _, v := range list {
		num, _ := v.(json.Number)
		i, err := num.Int64()
		if err != nil || i < 0 || i >= int64(n) {
			return nil, false
		}
		set[int(i)] = true
	}
	return set, true
}

// notFiledAnswer lists the checkpoint items replayItemsStep dropped in the
// answer's errors, as MemPalace lists an item it did not file ({"item",
// "error"}, and the rule): the answer stays the device's, its _meta
// (the ledger's replayed mark) with it. An answer that is not a
// checkpoint's object is left as it is.
func notFiledAnswer(resp []byte, notFiled []any) []byte {
	text := gjson.GetBytes(resp, "result.content.0.text")
	var m map[string]any
	if len(notFiled) == 0 || text.Type != gjson.String || json.Unmarshal([]byte(text.Str), &m) != nil || m == nil {
		return resp
	}
	errs, _ := m["errors"].([]any)
	m["errors"] = append(errs, notFiled...)
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return resp // cannot happen: m came from json.Unmarshal
	}
	out, err := sjson.SetBytes(resp, "result.content.0.text", string(body))
	if err != nil {
		return resp // cannot happen: the path was read just now
	}
	return out
}
