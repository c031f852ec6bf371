package edge

import (
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// What the gateway says of this device is acted on only once it is kept:
// a session told of a trust revocation (its wake-up summary narrowed by
// it) whose edge is then stopped or killed must not forget it, or the
// next session, with the primary hung, is told of the untrusted sender's
// ask as trusted again. And two answers at once carrying different
// headers (the operator's change landing mid-call) keep the one the
// edge then acts on, not the older one.
func TestDeviceActedOnOnlyOnceKept(t *testing.T) {
	t.Parallel()
	all := deviceinfo.Info{Version: 1, ID: "desk-9b21", Origins: 1}.HeaderValue()
	ops := deviceinfo.Info{Version: 1, ID: "desk-9b21", Origins: 1, Trusts: []string{"ops-0001", "desk-9b21"}}.HeaderValue()
	release := make(chan struct{})
	var mu sync.Mutex
	var kept string
	p := NewPrimary("http://127.0.0.1:1/mcp", func() string { return "" }, slog.New(slog.DiscardHandler), PrimaryOptions{
		OnDevice: func(h string) {
			if h == ops {
				<-release // the revocation's keeping is slow (a busy disk)
			}
			mu.Lock()
			kept = h
			mu.Unlock()
		},
	})
	defer p.Close()
	p.sawDevice(http.Header{deviceinfo.Header: {all}})

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.sawDevice(http.Header{deviceinfo.Header: {ops}}) }()
	time.Sleep(50 * time.Millisecond)
	if in, _ := p.Device(); in.Trusts != nil {
		t.Error("the revocation was acted on before it was kept: an edge stopped now forgets it")
	}
	wg.Add(1)
	go func() { defer wg.Done(); p.sawDevice(http.Header{deviceinfo.Header: {all}}) }() // an older answer, late
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if acted := p.device.Load().header; kept != acted {
		t.Errorf("the edge acts on %s but kept %s: the next run without the primary applies what this one no longer does", acted, kept)
	}
}
