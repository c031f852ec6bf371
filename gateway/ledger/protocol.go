package ledger

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The wire names shared by the edge and the gateway.
const (
	// MetaKey is the params._meta member carrying an outbox op's id.
	MetaKey = "devbox-config/op-id"
	// ResendKey is the params._meta member of a send made again after it
	// may have landed: "looked-up" (the edge's look-up found it is not on
	// the primary) or "operator" (an operator said to send it again). The
	// ledger forwards an op it holds in doubt only with it.
	ResendKey = "devbox-config/resend"
	// QueuedAsKey is the params._meta member naming the device an op was
	// queued as, when the edge sends it as another (an `edge outbox
	// retry` of an op held as queued under another device: a renamed
	// devbox, or a copy of one). The ledger keys the op under that
	// device, so that it is filed once whichever machine sends it.
	QueuedAsKey = "devbox-config/queued-as"
	// MadeAtKey is the params._meta member of a queued kg_add: when its
	// op was made, by the edge's clock (RFC 3339 with its fraction, UTC). A gateway files
	// an add of a value replaced on the primary beside its replacement
	// only when the add was made after the replacement landed (the
	// device could have seen it), not when it was made offline before.
	MadeAtKey = "devbox-config/made-at"
	// ReplayedKey is the result._meta member (true) a gateway adds to an
	// answer the ledger gave from its record ([OutcomeReplayed]): the
	// write landed when the op id was first sent, not now.
	ReplayedKey = "devbox-config/replayed"
	// Header is the response header a gateway with a ledger sets on every
	// /mcp answer; HeaderValue is its value (protocol op-id, version 1).
	Header      = "Devbox-Config-Ledger"
	HeaderValue = "op-id/1"
	// Capability is the key under the initialize result's
	// capabilities.experimental; its value is {"version": Version}.
	Capability = "devbox-config/op-id-ledger"
	Version    = 1
)

// JSON-RPC error codes a devbox-config gateway answers about an op id (or
// a device's share of the primary), which the edge's outbox reads.
const (
	// CodeRateLimited: over the device's rate, or its share of the write
	// queue is full. Retry after a backoff.
	CodeRateLimited = -32029
	// CodeInFlight: ErrInFlight. Retry after a backoff.
	CodeInFlight = -32030
	// CodeInDoubt: ErrInDoubt. Look the write up; send it again with
	// ResendKey only if it is not on the primary.
	CodeInDoubt = -32031
	// CodeDeletedOnPrimary: a join's replay (params._meta["devbox-config/join"]),
	// or an edge's (params._meta["devbox-config/replay"]: an add_drawer its
	// local palace answered already_exists), or an update_drawer, of a
	// record an admin deleted on the primary, which the gateway's trash
	// holds as deleted (for an update, in a wing the device reads): not
	// written, and not to be sent again (a join's outbox settles it as
	// done, deleted there; an edge's makes it dead, told to the agent).
	CodeDeletedOnPrimary = -32032
	// CodeChangedOnPrimary: an edge's update_drawer (or delete_drawer) whose base
	// (params._meta["devbox-config/base"], origin.BaseKey: the sha256 of
	// the text its local palace replaced) is not the primary's text: the
	// drawer changed on the primary since the edit was made (another
	// device's update). Not written, not sent again on its own (an
	// edge's outbox makes it dead, told to the agent; a retry sends it
	// without the base, overwriting).
	CodeChangedOnPrimary = -32033
	// CodeBodyTimeout: the request's body did not arrive within the
	// gateway's body floor (HTTP 408): not read, nothing applied. Retry
	// after a backoff; over the same slow link a body that big never
	// arrives in time.
	CodeBodyTimeout = -32034
	// CodeNotOnPrimary: a kg_invalidate, or a kg_supersede, of a triple
	// the primary holds no fact of (none open, none closed): MemPalace
	// would answer it success and change nothing (a supersede: open its
	// new fact beside whatever is current). Not written. The fact's
	// kg_add may still be on its way (queued on another palace of the
	// device), so an edge sends it again as any refusal, and it is dead
	// after as many; a join sends a fact only a palace holds.
	CodeNotOnPrimary = -32035
)

// Words a CodeDeletedOnPrimary refusal's message carries, by which an edge
// tells it what to do: PurgedWords, the drawer was purged from the trash
// (no restore brings it back: drop the op); RestoredAsWords, followed by
// the new id, it was restored under another (make the edit again there).
const (
	PurgedWords     = "operator purged it"
	RestoredAsWords = "restored by the operator as "
)

// FileName is the ledger's file name, in the audit log's directory.
const FileName = "op-ledger.sqlite"

// Beside is the ledger's default path for a gateway whose audit log is
// auditLog.
func Beside(auditLog string) string {
	return filepath.Join(filepath.Dir(auditLog), FileName)
}

// OpIDOf returns the op id in a tools/call request's params
// (params._meta["devbox-config/op-id"]). ok is false when there is none;
// an op id that is present but not 64 lowercase hex digits is an error.
func OpIDOf(params json.RawMessage) (id string, ok bool, err error) {
	meta := gjson.GetBytes(params, "_meta")
	if !meta.IsObject() {
		return "", false, nil
	}
	var v gjson.Result
	found := false
	meta.ForEach(func(k, val gjson.Result) bool {
		if k.String() == MetaKey {
			v, found = val, true
			return false
		}
		return true
	})
	if !found {
		return "", false, nil
	}
	at := fmt.Sprintf("params._meta[%q]", MetaKey)
	if v.Type != gjson.String {
		return "", false, fmt.Errorf("%s: must be a string of 64 lowercase hex digits, got %s", at, kind(v))
	}
	if err := checkOpID(v.Str); err != nil {
		return "", false, fmt.Errorf("%s: %w", at, err)
	}
	return v.Str, true, nil
}

// ResendOf returns why a tools/call is a resend of an op that may have
// landed (params._meta[ResendKey]), "" for none.
func ResendOf(params json.RawMessage) string {
	return gjson.GetBytes(params, "_meta."+gjson.Escape(ResendKey)).String()
}

// QueuedAsOf returns the device a tools/call says its op was queued as
// (params._meta[QueuedAsKey]), "" for none; ok is false when it is
// there and not a string.
func QueuedAsOf(params json.RawMessage) (dev string, ok bool) {
	v := gjson.GetBytes(params, "_meta."+gjson.Escape(QueuedAsKey))
	return v.Str, !v.Exists() || v.Type == gjson.String
}

func kind(v gjson.Result) string {
	switch {
	case v.IsObject():
		return "an object"
	case v.IsArray():
		return "an array"
	case v.Type == gjson.Number:
		return "a number"
	case v.Type == gjson.True, v.Type == gjson.False:
		return "a boolean"
	}
	return "null"
}

// checkOpID accepts exactly 64 lowercase hex digits (a sha256, as the
// outbox makes them).
func checkOpID(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("must be 64 lowercase hex digits, got %d characters", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("must be 64 lowercase hex digits, got %q at position %d", c, i+1)
		}
	}
	return nil
}

// Advertise marks an answer as coming from a gateway with a ledger.
func Advertise(h http.Header) { h.Set(Header, HeaderValue) }

// Advertised reports whether an answer's headers say a ledger protects
// the sender's op ids.
func Advertised(h http.Header) bool { return h.Get(Header) == HeaderValue }

// AdvertiseInitialize adds the ledger capability to an initialize answer
// (a JSON-RPC response whose result has capabilities). Anything else (an
// error answer, an SSE body) is returned unchanged.
func AdvertiseInitialize(resp []byte) []byte {
	if r := gjson.GetBytes(resp, "result"); !r.IsObject() {
		return resp
	}
	if c := gjson.GetBytes(resp, "result.capabilities"); c.Exists() && !c.IsObject() {
		return resp
	}
	if e := gjson.GetBytes(resp, "result.capabilities.experimental"); e.Exists() && !e.IsObject() {
		return resp
	}
	out, err := sjson.SetRawBytes(resp, "result.capabilities.experimental."+gjson.Escape(Capability), fmt.Appendf(nil, `{"version":%d}`, Version))
	if err != nil {
		return resp
	}
	return out
}

// AdvertisedIn reports whether an initialize result (the JSON-RPC result
// object) announces the ledger, at this package's version or later.
func AdvertisedIn(initResult json.RawMessage) bool {
	v := gjson.GetBytes(initResult, "capabilities.experimental."+gjson.Escape(Capability)+".version")
	return v.Type == gjson.Number && v.Int() >= Version
}
