package edge

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// The agent cancels a delete_drawer while the local palace is still at
// it: the local palace deletes the drawer anyway, as MemPalace does, so
// the delete must be kept as one made here (a tombstone hiding the
// primary's copy). Before, the edge gave up on the local answer at the
// cancel: the drawer was gone locally and the primary's copy showed in
// merged reads, as if never deleted.
func TestCancelledDeleteTheLocalPalaceAppliesIsKept(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_delete_drawer=800"}})
	h.handshake()
	h.ready()
	const content = "the deploy key, pasted by mistake"
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": content}))
	if a := h.await("add", 10*time.Second); a["result"] == nil {
		t.Fatalf("add_drawer: %v", a)
	}
	h.eventually("the drawer on the primary", func() bool { return h.primary.Dump().CountContent(content) == 1 })
	id := DrawerIDFor("w", "r", content)
	h.callThenCancel("del", "mempalace_delete_drawer", map[string]any{"drawer_id": id}, 100*time.Millisecond)
	h.eventually("the local palace applied the delete", func() bool {
		st, err := fakepalace.ReadDump(h.palace)
		return err == nil && len(st.Drawers) == 0
	})
	h.eventually("the delete kept as a tombstone", func() bool {
		s, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "")
		if err != nil {
			return false
		}
		defer s.Close()
		ts, _ := s.Tombstones(context.Background())
		for _, x := range ts {
			if x.Kind == outbox.TombDrawer && x.Key == id {
				return true
			}
		}
		return false
	})
}
