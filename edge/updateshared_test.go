package edge

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An update_drawer of a drawer only the primary holds, with the primary
// down or hung, says the primary could not be asked (degraded), not a bare
// "Drawer not found": the drawer exists, and the agent is told to try
// again when the primary is back; nothing is queued. (An outside tester:
// the local palace's "Drawer not found" came back, while get_drawer in
// the same state said degraded, primary down.)
func TestUpdateOfAPrimaryOnlyDrawerWithThePrimaryUnreachable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		stop func(h *harness, hang func())
	}{
		{"down", func(h *harness, _ func()) { h.stopPrimary() }},
		{"hung", func(_ *harness, hang func()) { hang() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, srv := startPrimary(t)
			url, hang := hangingProxy(t, srv.URL())
			h := start(t, harnessOpts{primaryURL: url, timeout: time.Second})
			h.srv = srv
			id, _ := postTool(t, srv.URL(), testToken, "add_drawer", map[string]any{"wing": "wing_shared", "room": "r", "content": "another device's notes"})["drawer_id"].(string)
			if id == "" {
				t.Fatal("the drawer was not written on the primary")
			}
			c.stop(h, func() { hang.Store(true) })
			m, res := h.call("update_drawer", map[string]any{"drawer_id": id, "content": "changed"})
			msg := refusalText(res)
			if !strings.Contains(msg, "primary") || edgeOf(m)["degraded"] != true {
				t.Errorf("the update of a drawer only the unreachable primary holds: %v", m)
			}
			if ops, _ := h.edge.outbox.List(context.Background(), 10); len(ops) != 0 {
				t.Errorf("the update is in the outbox: %+v", ops)
			}
		})
	}
}
