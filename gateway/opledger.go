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
func (o OpLedger) Forward(ctx context.Context, call ToolCall, next Send) (int, []byte, bool) {
	if call.Reads {
		s, b := next(ctx, call.Body)
		return s, b, false
	}
	status, body, outcome := o.forward(ctx, call, next)
	return status, body, outcome == ledger.OutcomeReplayed
}

// forward is a write's way through the ledger, with its outcome ("" for
// a call the ledger did not answer: a refusal, no op id).
func (o OpLedger) forward(ctx context.Context, call ToolCall, next Send) (int, []byte, ledger.Outcome) {
	reqID := json.RawMessage(gjson.GetBytes(call.Body, "id").Raw) // none: null, in rpcErr and the ledger's replay
	params := json.RawMessage(gjson.GetBytes(call.Body, "params").Raw)
	opID, ok, err := ledger.OpIDOf(params)
	if err != nil {
		return 200, rpcErrBytes(reqID, -32602, "devbox-config gateway: "+err.Error()), ""
	}
	if !ok {
		status, body := next(ctx, call.Body)
		return status, body, ""
	}
	keyDev, err := ledgerDevice(call.Device, params)
	if err != nil {
		return 200, rpcErrBytes(reqID, -32602, "devbox-config gateway: "+err.Error()), ""
	}
	ans, outcome, err := o.L.Do(ctx, ledger.Call{Device: keyDev, OpID: opID, Tool: call.Tool, ArgsDigest: call.ArgsDigest, LegacyDigest: call.LegacyDigest, RequestID: reqID, Resend: ledger.ResendOf(params)},
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
		return 200, rpcErrBytes(reqID, ledger.CodeInFlight, "devbox-config gateway: this op is being forwarded now (retry later; nothing waits for it here)"), ""
	case errors.Is(err, ledger.ErrInDoubt):
		return 200, rpcErrBytes(reqID, ledger.CodeInDoubt, "devbox-config gateway: this op may have been applied: it reached the primary and no answer came back (the answer was lost, or the gateway stopped with it in flight): look it up, and send it again with _meta[\""+ledger.ResendKey+"\"] only if it is not there"), ""
	case errors.Is(err, ledger.ErrReused):
		return 200, rpcErrBytes(reqID, -32602, "devbox-config gateway: "+err.Error()), ""
	case errors.Is(err, ledger.ErrUnavailable):
		o.Log.Error("op-id ledger unavailable: refusing the write", "device", call.Device, "tool", call.Tool, "err", err)
		return 200, rpcErrBytes(reqID, CodeDenied, "devbox-config gateway: the op-id ledger cannot be read; writes are refused"), ""
	case err != nil:
		return 502, rpcErrBytes(reqID, -32000, "devbox-config gateway: "+err.Error()), ""
	}
	o.Log.Debug("op-id ledger", "device", call.Device, "queued_as", keyDev, "tool", call.Tool, "op", opID[:12], "outcome", outcome)
	return ans.Status, ans.Body, outcome
}

// ledgerDevice is the device the ledger keys a write's op id under: the
// one the edge says the op was queued as (params._meta[ledger.QueuedAsKey]:
// a retry, on a renamed devbox or a copy, of an op queued before), else
// the caller's, so that the op is filed once whichever machine sends it.
// Any device may name another: an op id is 256 random bits that only the
// outbox that made it (or a copy of it) holds, a record answers only a
// call with the same tool and arguments, through the caller's own filter,
// and a write forwarded is the caller's (its token's device is its
// author). Naming another device tells a caller only whether that device
// filed the very write the caller sends, for an op id it holds, and can
// spoil no other op id.
func ledgerDevice(caller string, params json.RawMessage) (string, error) {
	as, ok := ledger.QueuedAsOf(params)
	switch {
	case !ok || as != "" && !deviceIDRE().MatchString(as):
		return "", fmt.Errorf("params._meta[%q] must be a device id (1-64 of letters, digits, . _ -)", ledger.QueuedAsKey)
	case as == "":
		return caller, nil
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
