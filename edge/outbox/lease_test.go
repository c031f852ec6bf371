package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// Issue 26, point 2: a send that outlasts the lease's length keeps the
// lease (it is renewed while the send is in flight), so a second flusher
// on the palace (another harness's edge, `edge flush`) never takes the op
// and sends it again. Before, the lease was renewed only between ops: the
// second flusher took it mid-send, found the op in flight, looked it up
// before it had landed, and sent it again: two events.
func TestNoSecondSenderWhileASendOutlastsTheLease(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.primary.SetLatency("mempalace_event_append", 900*time.Millisecond)
	r.flusher.Lease = 300 * time.Millisecond
	r.enqueue("event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "once"})
	ctx := context.Background()
	done := make(chan struct{})
	go func() { defer close(done); r.flusher.Drain(ctx) }()
	time.Sleep(500 * time.Millisecond) // the send is still in flight, past one lease length

	// A second process on the same palace: its own connection to the file,
	// its own flusher.
	s2, err := outbox.Open(r.store.Path(), "dev-1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	f2 := &outbox.Flusher{S: s2, P: edge.FlushTarget(r.p), Lease: 300 * time.Millisecond, BaseDelay: time.Millisecond}
	if _, err := f2.Drain(ctx); err != nil && !errors.Is(err, outbox.ErrLeaseHeld) {
		t.Fatal(err)
	}
	<-done
	r.primary.SetLatency("mempalace_event_append", 0)
	r.drain()
	if n := countEvents(r.primary.Dump(), func(e *fakepalace.Event) bool { return e.Body == "once" }); n != 1 {
		t.Errorf("the event is on the primary %d times, want 1", n)
	}
}
