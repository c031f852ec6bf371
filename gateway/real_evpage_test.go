package gateway

import (
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// TestRealACutEventPageIsFilled: TestACutEventPageIsFilled against real
// MemPalace 3.11.0 serve, more than a page (520) of events narw does not
// see between ops's two asks: every page narw reads, oldest first,
// newest first, one event at a time, holds both asks and nothing else.
func TestRealACutEventPageIsFilled(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	g := newGWAt(t, pagingDevices, &upstream{name: "serve", url: srv.URL})
	a, b := floodedLogVia(t, g, 520, func(args map[string]any) {
		if r, err := srv.Call("mempalace_event_append", args); err != nil || r["success"] != true {
			t.Fatalf("event_append: %v %v", r, err)
		}
	})
	readFilledPages(t, g, a, b)
}
