package edge

// What the gateway says of this device (its Devbox-Config-Device header:
// admin or not, the trusted set, the instruction wing) is kept in the
// outbox's meta each time it changes, so a later run that cannot reach
// the gateway still applies the last word it heard: a trust revocation
// heard once is not forgotten while the gateway is down.

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// loadDevice reads the header an earlier run kept (none: nothing kept,
// or it does not read).
func (e *Edge) loadDevice(ctx context.Context) {
	if e.outbox == nil {
		return
	}
	v, err := e.outbox.Meta(ctx, outbox.MetaDeviceSeen)
	if err != nil || v == "" {
		return
	}
	if in, ok := deviceinfo.FromHeader(http.Header{deviceinfo.Header: {v}}); ok {
		e.keptDevice.Store(&in)
	}
}

// keepDevice keeps a header the gateway sent (Primary's OnDevice: only
// when it changed, one change at a time under the Primary's deviceMu),
// in the outbox and then for this run.
func (e *Edge) keepDevice(header string) {
	if in, ok := KeepDeviceHeader(e.outbox, header, e.log); ok {
		e.keptDevice.Store(&in)
	}
}

// KeepDeviceHeader keeps a Devbox-Config-Device header the gateway sent
// in s's meta (outbox.KeepDeviceSeen: each op queued next with the same
// token records the device id it holds,
// outbox.Op.TokenDevice), if it reads (false: it
// does not, and the header kept before stays). s nil: nothing is kept.
// The edge and `edge flush` keep it alike.
func KeepDeviceHeader(s *outbox.Store, header string, log *slog.Logger) (deviceinfo.Info, bool) {
	in, ok := deviceinfo.FromHeader(http.Header{deviceinfo.Header: {header}})
	if !ok || s == nil {
		return in, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.KeepDeviceSeen(ctx, header, in.ID); err != nil {
		log.Warn("what the gateway says of this device not kept: a later run without the gateway applies the last one kept", "err", err)
	}
	return in, true
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
