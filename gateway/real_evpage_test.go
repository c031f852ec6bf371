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

// TestRealASealedCursorDoesNotOpenTheOtherCursor:
// TestASealedCursorDoesNotOpenTheOtherCursor against real MemPalace
// 3.11.0 serve, which reads since_event_id and before_event_id together
// as the events between them.
func TestRealASealedCursorDoesNotOpenTheOtherCursor(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	g := newGWAt(t, pagingDevices, &upstream{name: "serve", url: srv.URL})
	readBesideASealedCursor(t, g, func(args map[string]any) string {
		r, err := srv.Call("mempalace_event_append", args)
		e, _ := r["event"].(map[string]any)
		if err != nil || e == nil {
			t.Fatalf("event_append: %v %v", r, err)
		}
		return str(e["id"])
	})
}
