package origin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"
)

// The wire names.
const (
	// Key is the member every record of an answer gains.
	Key = "origin"
	// TunnelKey is the member a follow_tunnels connection gains beside
	// Key (its drawer's): the origin of the tunnel it goes through.
	TunnelKey = "tunnel_origin"
	// Unknown is Origin.Device for a record the gateway did not stamp.
	Unknown = "unknown"
	// MetaKey is the params._meta member by which a join names the device
	// its writes are attributed to (honoured from admin devices only).
	MetaKey = "devbox-config/origin-device"
	// JoinKey is the params._meta member (true) by which a join marks
	// every write as its replay of a palace's history: a gateway refuses
	// one that would file again what its trash holds as deleted.
	JoinKey = "devbox-config/join"
	// JoinDrawerKey is the params._meta member by which a join's
	// add_drawer names the id its local palace holds the drawer under,
	// when that is not the id the content gives (the drawer was updated
	// after it was filed: MemPalace keeps a drawer's first id): the
	// gateway checks its trash by that id too. Only with JoinKey.
	JoinDrawerKey = "devbox-config/join-drawer"
	// JoinCopyKey is the params._meta member (a number, n) by which a
	// join's diary_write says it is the n-th equal copy (one agent, wing
	// and text) the primary lacks: the gateway refuses it only when its
	// trash holds n or more deleted (absent: 1). Only with JoinKey.
	JoinCopyKey = "devbox-config/join-copy"
	// ReplayKey is the params._meta member (true) by which an edge marks
	// an add_drawer its local palace answered already_exists: a replay
	// of the drawer that palace holds, not a fresh write. A gateway
	// checks its trash as for a join's write (the edge sends JoinKey
	// too, which a gateway older than ReplayKey already checks), and
	// words its refusal for a replay.
	ReplayKey = "devbox-config/replay"
	// ReplayItemsKey is the params._meta member (a list of item indexes)
	// by which an edge names the items of a checkpoint its local palace
	// reported as duplicates of the very drawer each would file (its
	// copy): replays, not fresh writes. A gateway drops those whose
	// drawer its trash holds as deleted, files the rest, and lists the
	// dropped ones in the answer's errors; an older one ignores the key.
	ReplayItemsKey = "devbox-config/replay-items"
	// BaseKey is the params._meta member (64 lowercase hex) by which an
	// edge's update_drawer names the sha256 of the drawer's text its local
	// palace held before the edit: a gateway refuses the update
	// (ledger.CodeChangedOnPrimary) when the primary holds another text
	// (and not the update's own), so a stale edit does not overwrite a
	// newer one unseen. Absent: the update overwrites, as ever.
	BaseKey = "devbox-config/base"
	// ReplayDeletedRule is the rule of a replay the gateway does not file
	// again because an admin deleted it on the primary: its audit line's,
	// and the "rule" of each item of a checkpoint's answer errors it left
	// out (by which an edge tells its agent of them).
	ReplayDeletedRule = "replay:deleted-on-primary"
	// Version is this format's version (deviceinfo's "origins").
	Version = 1
)

// Base is the BaseKey value of a drawer's text: its sha256 (of the
// UTF-8 bytes get_drawer's content holds), 64 lowercase hex digits.
func Base(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Origin is who wrote one record, as the gateway answers it.
type Origin struct {
	// Device is the writing device's id, or Unknown.
	Device string `json:"device"`
	// Label is the device's label when it wrote (for humans only).
	Label string `json:"label,omitempty"`
	// Agent is the agent the write named: added_by's agent segment for a
	// drawer, the diary's agent, an event's from_agent ("" for facts).
	Agent string `json:"agent,omitempty"`
	// At is when the gateway stamped it (RFC 3339, UTC).
	At string `json:"at,omitempty"`
	// Via is the admin device whose join attributed the record to Device
	// ("" when Device itself wrote it).
	Via string `json:"via,omitempty"`
	// Removed is the device of Device and Via that the gateway's config
	// has removed ("" when neither is): then Trusted is false.
	Removed string `json:"removed,omitempty"`
	// Unlisted is the device of Device and Via that is neither a device
	// of the gateway's config nor a removed one ("" when both are known):
	// then Trusted is false.
	Unlisted string `json:"unlisted,omitempty"`
	// Trusted: the reading device trusts Device (always true for a device
	// that names no trusted set).
	Trusted bool `json:"trusted"`
	// Palace is set by an edge on a merged read, never by the gateway:
	// which palace answered with the record (PalaceLocal, PalacePrimary
	// or PalaceBoth).
	Palace string `json:"palace,omitempty"`
}

// The values of Origin.Palace.
const (
	PalaceLocal   = "local"   // only the edge's own local palace's answer held it
	PalacePrimary = "primary" // only the primary's answer held it
	PalaceBoth    = "both"    // both answers held it
)

// Known reports an origin the gateway stamped.
func (o Origin) Known() bool { return o.Device != "" && o.Device != Unknown }

// AppendJSON appends o as one compact JSON object, members in the order
// of the struct, empty optional ones left out.
func (o Origin) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"device":`...)
	dst = appendString(dst, o.Device)
	opt := func(k, v string) {
		if v != "" {
			dst = append(append(append(dst, ',', '"'), k...), '"', ':')
			dst = appendString(dst, v)
		}
	}
	opt("label", o.Label)
	opt("agent", o.Agent)
	opt("at", o.At)
	opt("via", o.Via)
	opt("removed", o.Removed)
	opt("unlisted", o.Unlisted)
	dst = append(dst, `,"trusted":`...)
	dst = strconv.AppendBool(dst, o.Trusted)
	opt("palace", o.Palace)
	return append(dst, '}')
}

// appendString appends s (valid UTF-8) as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		if c == '"' || c == '\\' {
			dst = append(dst, '\\', c)
			continue
		}
		const hex = "0123456789abcdef"
		dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
	}
	return append(append(dst, s[start:]...), '"')
}

// Of reads the origin of one record (the record's JSON object); false
// when it has none, or one that is not an object with a device.
func Of(record []byte) (Origin, bool) {
	v := gjson.GetBytes(record, Key)
	if !v.IsObject() || v.Get("device").Type != gjson.String {
		return Origin{}, false
	}
	var o Origin
	if json.Unmarshal([]byte(v.Raw), &o) != nil {
		return Origin{}, false
	}
	return o, true
}

// deviceKey is WithDevice's context key.
type deviceKey struct{}

// WithDevice marks the calls made with ctx as a join's, attributing their
// writes to device id: the primary's client puts id in
// params._meta[MetaKey].
func WithDevice(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, deviceKey{}, id)
}

// joinKey is WithJoin's context key.
type joinKey struct{}

// WithJoin marks the calls made with ctx as a join's replay: the primary's
// client puts params._meta[JoinKey] = true.
func WithJoin(ctx context.Context) context.Context {
	return context.WithValue(ctx, joinKey{}, true)
}

// joinDrawersKey is WithJoinDrawers' context key.
type joinDrawersKey struct{}

// WithJoinDrawers gives a join's calls the local drawer id of each op
// (by op id) whose add_drawer names another id than its local one: the
// primary's client puts it in params._meta[JoinDrawerKey].
func WithJoinDrawers(ctx context.Context, ids map[string]string) context.Context {
	return context.WithValue(ctx, joinDrawersKey{}, ids)
}

// JoinDrawer is the local drawer id WithJoinDrawers gave op ("": none).
func JoinDrawer(ctx context.Context, op string) string {
	ids, _ := ctx.Value(joinDrawersKey{}).(map[string]string)
	return ids[op]
}

// Joining reports calls WithJoin marked.
func Joining(ctx context.Context) bool { return ctx.Value(joinKey{}) == true }

// DeviceFrom is the device WithDevice put in ctx ("" for any other call).
func DeviceFrom(ctx context.Context) string {
	id, _ := ctx.Value(deviceKey{}).(string)
	return id
}
