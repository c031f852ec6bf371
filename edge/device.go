package edge

// What the gateway says of this device (its Devbox-Config-Device header:
// admin or not, the trusted set, the instruction wing) is kept in the
// outbox's meta each time it changes, so a later run that cannot reach
// the gateway still applies the last word it heard: a trust revocation
// heard once is not forgotten while the gateway is down.

import (
	"context"
	"net/http"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// deviceMetaKey is where it is kept: each op the outbox queues records
// the device id it holds (outbox.Op.TokenDevice).
const deviceMetaKey = outbox.MetaDeviceSeen

// loadDevice reads the header an earlier run kept (none: nothing kept,
// or it does not read).
func (e *Edge) loadDevice(ctx context.Context) {
	if e.outbox == nil {
		return
	}
	v, err := e.outbox.Meta(ctx, deviceMetaKey)
	if err != nil || v == "" {
		return
	}
	if in, ok := deviceinfo.FromHeader(http.Header{deviceinfo.Header: {v}}); ok {
		e.keptDevice.Store(&in)
	}
}

// keepDevice keeps a header the gateway sent (Primary's OnDevice: only
// when it changed, one change at a time under the Primary's deviceMu).
func (e *Edge) keepDevice(header string) {
	in, ok := deviceinfo.FromHeader(http.Header{deviceinfo.Header: {header}})
	if !ok {
		return
	}
	e.keptDevice.Store(&in)
	if e.outbox == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.outbox.SetMeta(ctx, deviceMetaKey, header); err != nil {
		e.log.Warn("what the gateway says of this device not kept: a later run without the gateway applies the last one kept", "err", err)
	}
}

// device is what the gateway says of this device: its header as this run
// heard it, else as the last run that heard one kept it (false: none
// ever heard, or pass-through).
func (e *Edge) device() (deviceinfo.Info, bool) {
	if e.remote == nil {
		return deviceinfo.Info{}, false
	}
	if in, ok := e.remote.Device(); ok {
		return in, true
	}
	if in := e.keptDevice.Load(); in != nil {
		return *in, true
	}
	return deviceinfo.Info{}, false
}
