package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// MetaDeviceSeen is the meta key under which the edge keeps the
// gateway's Devbox-Config-Device header as it last heard it (edge's
// device.go, `edge flush` too): a JSON object whose id is the device the
// gateway names this edge's token. Each op records that id as it is
// queued (Op.TokenDevice).
const MetaDeviceSeen = "device_seen"

// deviceSeenID reads MetaDeviceSeen's device id ("": none kept, or it
// does not read).
const deviceSeenID = `SELECT COALESCE((SELECT CAST(CASE WHEN json_valid(value) THEN json_extract(value,'$.id') END AS TEXT) FROM meta WHERE key=?), '')`

// DeviceTarget is a Primary that knows the device a devbox-config gateway
// names its token ("": no gateway, a plain mempalace serve, or the
// primary not reached: the send that follows fails on its own).
type DeviceTarget interface {
	Device(ctx context.Context) string
}

// otherDevice is the device the gateway names this token when it is not
// the one it named it when op was queued ("": the same, not known then
// or now, or no gateway). What .env says (MEMPALACE_ORIGIN_DEVICE) plays
// no part: only the gateway's word on the token. A join's ops are never
// held: --origin-device may name another device on purpose (an admin
// joining for it), and the gateway decides that.
func (f *Flusher) otherDevice(ctx context.Context, op Op) string {
	dt, ok := f.P.(DeviceTarget)
	if !ok || f.History || op.TokenDevice == "" {
		return ""
	}
	dctx, cancel := context.WithTimeout(ctx, f.SendTimeout)
	defer cancel()
	if dev := dt.Device(dctx); dev != "" && dev != op.TokenDevice {
		return dev
	}
	return ""
}

// holdForDevice makes op dead, unsent, as queued while the gateway named
// the token another device than the one it names it now (OtherDevice): its writes
// are not sent as that device until an operator says so. An op that may
// have landed keeps saying so.
func (f *Flusher) holdForDevice(ctx context.Context, op Op, dev string) {
	msg := fmt.Sprintf("queued as device %s; the gateway names this token %s: not sent", op.TokenDevice, dev)
	ej, err := json.Marshal(map[string]any{"kind": OtherDevice, "message": msg, "device": dev, "at": f.S.now().UTC()})
	if err != nil {
		ej = []byte(`{"kind":"` + OtherDevice.String() + `"}`) // a name JSON cannot encode; a retry asks the gateway again
	}
	err = f.fenced(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE ops SET maybe_applied=(maybe_applied OR state='inflight'), state='dead', error_json=? WHERE local_seq=? AND state IN ('queued','inflight')`,
			string(ej), op.LocalSeq)
		return err
	})
	if err != nil {
		f.Log.Error("outbox: an op queued as another device not recorded as held; it is not sent", "op", op.Short(), "err", err)
		return
	}
	f.Log.Error("outbox op held: queued as another device than the gateway names this token; `devbox-config edge status` says whose it is: one queued before this outbox was copied is the original machine's to send (`devbox-config edge outbox drop`; `retry --force` if the original is gone for good and never sent it), one this machine wrote is sent as "+dev+" by `retry`", "op", op.Short(), "tool", op.Tool, "queued_as", op.TokenDevice, "token_is", dev)
	f.S.notices.Add(1)
	f.S.notify(op.ID)
}
