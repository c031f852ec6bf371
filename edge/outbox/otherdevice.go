package outbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// MetaDeviceSeen is the meta key under which the edge keeps the
// gateway's Devbox-Config-Device header as it last heard it (edge's
// device.go, `edge flush` too): a JSON object whose id is the device the
// gateway names this edge's token. Each op records that id as it is
// queued (Op.TokenDevice).
const MetaDeviceSeen = "device_seen"

// deviceSeenUnder prefixes the meta key of the device id the gateway
// last named the token (deviceSeenKey: per token, or per the outbox's
// device when no token is known; KeepDeviceSeen).
const deviceSeenUnder = "device_seen@"

// queuedAsID is the device a new op records as queued as (Op.TokenDevice):
// the one the gateway last named the token now (?1: deviceSeenKey), ""
// if it never named this one (.env was switched to it since: what the
// gateway said of another is not this configuration's), or, in an outbox kept before the
// devices were kept by id, MetaDeviceSeen's (?2).
const queuedAsID = `SELECT COALESCE(
	(SELECT value FROM meta WHERE key=?1),
	(SELECT CAST(CASE WHEN json_valid(value) THEN json_extract(value,'$.id') END AS TEXT) FROM meta WHERE key=?2
		AND NOT EXISTS (SELECT 1 FROM meta WHERE key GLOB 'device_seen@*')),
	'')`

// deviceSeenKey is the meta key of the device id the gateway last named
// the token under: keyed by the token (tokenPrint), which is what the
// gateway names, so a write made with the devbox's own token while
// MEMPALACE_ORIGIN_DEVICE still names another id is queued as the token's
// device (attack80 F2); by the outbox's device when no token is known.
func (s *Store) deviceSeenKey() string {
	if p := s.tokenPrint(); p != "" {
		return deviceSeenUnder + "token:" + p
	}
	return deviceSeenUnder + s.device
}

// tokenPrint is the token's fingerprint, a hash prefix, never the token
// ("": no token known).
func (s *Store) tokenPrint() string {
	if s.token == nil {
		return ""
	}
	tok := s.token()
	if tok == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:8])
}

// underToken prefixes the token_device of an op queued before the
// gateway named its token (TokenDevice ""): the fingerprint of the token
// it was queued under (Op.queuedUnder). Like unrecorded, no device id.
const underToken = "?token:"

// setTokenColumn reads ops' token_device into o.
func (o *Op) setTokenColumn(v string) {
	switch {
	case v == unrecorded:
		o.premigration = true
	case strings.HasPrefix(v, underToken):
		o.queuedUnder = strings.TrimPrefix(v, underToken)
	default:
		o.TokenDevice = v
	}
}

// tokenColumn is ops' token_device of o (setTokenColumn's inverse).
func (o Op) tokenColumn() string {
	switch {
	case o.TokenDevice != "":
		return o.TokenDevice
	case o.premigration:
		return unrecorded
	case o.queuedUnder != "":
		return underToken + o.queuedUnder
	}
	return ""
}

// KeepDeviceSeen keeps the gateway's Devbox-Config-Device header
// (MetaDeviceSeen) and the device id it names the token, per token
// (deviceSeenKey): an op queued after .env names another token is not
// recorded as queued as the device the gateway named the last one
// (attack76 F3), and one queued with the devbox's own token is its
// device's whatever MEMPALACE_ORIGIN_DEVICE says (attack80 F2).
func (s *Store) KeepDeviceSeen(ctx context.Context, header, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	if err := setMeta(ctx, tx, MetaDeviceSeen, header); err != nil {
		return err
	}
	if err := setMeta(ctx, tx, s.deviceSeenKey(), id); err != nil {
		return err
	}
	return tx.Commit()
}

// DeviceTarget is a Primary that knows what a devbox-config gateway says
// of its token (its Devbox-Config-Device header; ID "": no gateway, a
// plain mempalace serve, or the primary not reached: the send that
// follows fails on its own).
type DeviceTarget interface {
	Device(ctx context.Context) deviceinfo.Info
}

// otherDevice is the device the gateway names this token when op is not
// to be sent as it ("": send it): the gateway named the token another
// when op was queued; or op was queued before this edge heard the gateway
// name its token, under another token than the one .env gives now
// (Op.queuedUnder: a removed device's write, its devbox given another
// device's token, attack94 F4); or, for an op of an outbox an older edge
// kept without recording either (Op.premigration), the device op was
// stamped with is one the gateway lists as removed (attack83 F6; ids
// compared as the gateway does, case aside, among the latest 32 removals
// the header names). An op queued before this edge heard any, under the
// token it has now, is the token's, sent, whatever .env says (review28
// O1). An op stamped with the device the gateway names the token now is
// sent (a token issued again to the same device). Otherwise what .env
// says (MEMPALACE_ORIGIN_DEVICE) plays no part: only the gateway's word.
// A join's ops are never held: --origin-device may name another device on
// purpose (an admin joining for it), and the gateway decides that.
func (f *Flusher) otherDevice(ctx context.Context, op Op) string {
	dt, ok := f.P.(DeviceTarget)
	under := op.TokenDevice == "" && op.queuedUnder != "" && op.queuedUnder != f.S.tokenPrint() // queued under another token than .env's now
	if !ok || f.History || queuedAs(op) == "" && !under {
		return ""
	}
	dctx, cancel := context.WithTimeout(ctx, f.SendTimeout)
	defer cancel()
	in := dt.Device(dctx)
	if in.ID == "" || in.ID == queuedAs(op) {
		return ""
	}
	removed := op.premigration && slices.ContainsFunc(in.Removed, func(id string) bool { return strings.EqualFold(id, op.OriginDevice) })
	if op.TokenDevice != "" || removed || under {
		return in.ID
	}
	return ""
}

// queuedAs is the device op counts as queued as: the one the gateway
// named the token then, else the one it was stamped with.
func queuedAs(op Op) string { return cmp.Or(op.TokenDevice, op.OriginDevice) }

// holdForDevice makes op dead, unsent, as queued as another device than
// the one the gateway names the token now (OtherDevice), and records it
// as queued as that one (queuedAs): its writes are not sent as dev until
// an operator says so. An op that may have landed keeps saying so.
func (f *Flusher) holdForDevice(ctx context.Context, op Op, dev string) {
	as := queuedAs(op)
	msg := fmt.Sprintf("queued as device %s; the gateway names this token %s: not sent", as, dev)
	switch {
	case op.TokenDevice == "" && op.queuedUnder != "" && as == "": // .env named no device (MEMPALACE_ORIGIN_DEVICE is optional)
		msg = fmt.Sprintf("queued under another token, whose device was never heard; the gateway names this token %s: not sent", dev)
	case op.TokenDevice == "" && op.queuedUnder != "":
		msg = fmt.Sprintf("queued under another token, as device %s; the gateway names this token %s: not sent", as, dev)
	}
	fields := map[string]any{"kind": OtherDevice, "message": msg, "device": dev, "at": f.S.now().UTC()}
	if n := FailureOf(op.Error).Timeouts; n > 0 {
		fields["timeouts"] = n // an operator's retry sends it with the bound it had grown to (sendBound)
	}
	ej, err := json.Marshal(fields)
	if err != nil {
		ej = []byte(`{"kind":"` + OtherDevice.String() + `"}`) // a name JSON cannot encode; a retry asks the gateway again
	}
	err = f.fenced(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE ops SET maybe_applied=(maybe_applied OR state='inflight'), state='dead', error_json=?, token_device=? WHERE local_seq=? AND state IN ('queued','inflight')`,
			string(ej), as, op.LocalSeq)
		if err != nil {
			return err
		}
		return addNews(ctx, tx) // its agent is told (DeadOps)
	})
	if err != nil {
		f.Log.Error("outbox: an op queued as another device not recorded as held; it is not sent", "op", op.Short(), "err", err)
		return
	}
	f.Log.Error("outbox op held: queued as another device than the gateway names this token; `devbox-config edge status` says whose it is: one queued before this outbox was copied is the original machine's to send (`devbox-config edge outbox drop`; `retry --force` if the original is gone for good and never sent it), one this machine wrote is sent as "+dev+" by `retry`", "op", op.Short(), "tool", op.Tool, "queued_as", as, "token_is", dev)
	f.S.notify(op.ID)
}
