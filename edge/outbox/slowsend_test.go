package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A write the primary takes longer to answer than the send timeout (a
// big checkpoint over a slow link, or to a slow primary) lands: each send
// of it has twice the time of the one before. Before, every send was cut
// at the same timeout, the op sent whole again and again, and it never
// landed.
func TestAWriteSlowerThanTheSendTimeoutLandsOnALaterSend(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const slow = 500 * time.Millisecond
	f := r.behindTimed(func(tool string, _ []byte) bool {
		if tool == "mempalace_add_drawer" {
			time.Sleep(slow) // then passed on: the primary answers after slow
		}
		return false
	}, slow/2) // the call timeout
	r.flusher.SendTimeout = slow / 2
	op := r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "a slow write"})
	r.drain()
	if got, _ := r.store.GetByID(context.Background(), op.ID); got.State != outbox.Done {
		t.Errorf("the slow write's op: %s %s", got.State, got.Error)
	}
	if n := len(f.calls("mempalace_add_drawer")); n < 2 {
		t.Errorf("the write was sent %d times: its first send, bound by %v, should have timed out", n, slow/2)
	}
	if n := r.primary.Dump().CountContent("a slow write"); n != 1 {
		t.Errorf("%d drawers of the slow write on the primary, want 1", n)
	}
}
