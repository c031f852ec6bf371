package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// OpLedger is the forward step's Ledger backed by the op-id ledger
// (package ledger, RFC 001 §4.3): a write whose params carry an outbox op
// id (params._meta["devbox-config/op-id"]) is forwarded the first time and
// answered from the record after that, so every write an edge resends
// reaches the upstream once. Reads and calls without an op id pass
// through.
type OpLedger struct {
	L   *ledger.Ledger
	Log *slog.Logger
}

// Forward implements Ledger.
func (o OpLedger) Forward(ctx context.Context, call ToolCall, next Send) Forwarded {
	if call.Reads {
		s, b := next(ctx, call.Body)
		return Forwarded{Status: s, Body: b}
	}
	return o.forward(ctx, call, next)
}

// forward is a write's way through the ledger.
func (o OpLedger) forward(ctx context.Context, call ToolCall, next Send) Forwarded {
	reqID := json.RawMessage(gjson.GetBytes(call.Body, "id").Raw) // none: null, in rpcErr and the ledger's replay
	// The params' _meta alone, all the ledger reads: not a copy of a
	// 16 MiB write's arguments.
	params := json.RawMessage(`{}`)
	if meta := gjson.GetBytes(call.Body, "params._meta"); meta.Exists() {
		params = json.RawMessage(`{"_meta":` + meta.Raw + `}`)
	}
	refused := func(code int, msg string) Forwarded {
		return Forwarded{Status: 200, Body: rpcErrBytes(reqID, code, "devbox-config gateway: "+msg)}
	}
	opID, ok, err := ledger.OpIDOf(params)
	if err != nil {
		return refused(-32602, err.Error())
	}
	if !ok {
		status, body := next(ctx, call.Body)
		return Forwarded{Status: status, Body: body}
	}
	as, err := queuedAs(call.Device, params)
	if err != nil {
		return refused(-32602, err.Error())
	}
	ans, outcome, err := o.L.Do(ctx, ledger.Call{Device: call.Device, QueuedAs: as, OpID: opID, Tool: call.Tool, ArgsDigest: call.ArgsDigest, LegacyDigest: call.LegacyDigest, RequestID: reqID, Resend: ledger.ResendOf(params)},
		func(ctx context.Context) (ledger.Answer, error) {
			status, body := next(ctx, call.Body)
			// 502, 504: the upstream call was sent and its answer lost (the
			// upstream step's own words): in doubt, never forwarded again
			// unasked; and so is a resend the gateway keeps in doubt
			// itself (resentDiary's -32031).
			inDoubt := gjson.GetBytes(body, "error.code").Int() == ledger.CodeInDoubt
			return ledger.Answer{Status: status, Body: body, MaybeApplied: answerLost(status) || inDoubt}, nil
		})
	switch {
	case errors.Is(err, ledger.ErrInFlight):
		return refused(ledger.CodeInFlight, "this op is being forwarded now (retry later; nothing waits for it here)")
	case errors.Is(err, ledger.ErrInDoubt):
		return refused(ledger.CodeInDoubt, "this op may have been applied: it reached the primary and no answer came back (the answer was lost, or the gateway stopped with it in flight): look it up, and send it again with _meta[\""+ledger.ResendKey+"\"] only if it is not there")
	case errors.Is(err, ledger.ErrReused):
		return refused(-32602, err.Error())
	case errors.Is(err, ledger.ErrUnavailable):
		o.Log.Error("op-id ledger unavailable: refusing the write", "device", call.Device, "tool", call.Tool, "err", err)
		return refused(CodeDenied, "the op-id ledger cannot be read; writes are refused")
	case err != nil:
		return Forwarded{Status: 502, Body: rpcErrBytes(reqID, -32000, "devbox-config gateway: "+err.Error())}
	}
	o.Log.Debug("op-id ledger", "device", call.Device, "queued_as", as, "record_of", ans.RecordOf, "tool", call.Tool, "op", opID[:12], "outcome", outcome)
	return Forwarded{Status: ans.Status, Body: ans.Body, Replayed: outcome == ledger.OutcomeReplayed, QueuedAs: as, RecordOf: ans.RecordOf}
}

// queuedAs is the device a write says its op was queued as
// (params._meta[ledger.QueuedAsKey]: an edge's retry, on a renamed devbox
// or a copy, of an op queued before), "" for none or the caller itself.
// It can only answer the write from the record of the very same write
// (tool and arguments) that device filed, or let that device's later
// send of it be answered from the caller's (ledger.Call.QueuedAs); the
// row is the caller's. A name of no device, or of a removed one, is taken
// as it is: it finds no record, or the removed device's (a renamed
// devbox's), and refusing it would tell a caller which devices exist.
func queuedAs(caller string, params json.RawMessage) (string, error) {
	as, ok := ledger.QueuedAsOf(params)
	if !ok || as != "" && !deviceIDRE().MatchString(as) {
		return "", fmt.Errorf("params._meta[%q] must be a device id (1-64 of letters, digits, . _ -)", ledger.QueuedAsKey)
	}
	if as == caller {
		return "", nil
	}
	return as, nil
}

// marked reports an answer whose result._meta[key] is true (markMeta).
func marked(resp []byte, key string) bool {
	return gjson.GetBytes(resp, "result._meta."+gjson.Escape(key)).Bool()
}

// markMeta sets result._meta[key] true in a JSON-RPC answer: key is
// ledger.ReplayedKey for one answered from the op-id ledger's record (the
// write landed when the op id was first sent), heldKey for a write whose
// record was there before it (sendWrite). An answer with no result
// object is as it was.
func markMeta(resp []byte, key string) []byte {
	if !gjson.GetBytes(resp, "result").IsObject() {
		return resp
	}
	out, err := sjson.SetBytes(resp, "result._meta."+gjson.Escape(key), true)
	if err != nil {
		return resp
	}
	return out
}
