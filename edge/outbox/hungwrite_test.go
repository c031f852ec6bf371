package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A palace write that hangs on a primary which still answers a ping
// (MemPalace answers ping outside the lock its writes hold: a write
// holding it, a deadlock, an embedding call that hangs) holds back the
// writes queued behind it: they are not sent into the hang, each to run
// out of its bound and be left "maybe applied"; once the primary files
// again, all of them land (review29 F1). Before, the breaker stayed closed
// and the flusher sent every queued write into the hang, one per send
// bound.
func TestAWriteHungOnThePrimaryHoldsBackTheWritesBehindIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	release := make(chan struct{})
	r.primary.SetHold("mempalace_add_drawer", release)
	r.flusher.SendTimeout = 200 * time.Millisecond
	var ops []outbox.Op
	for i := range 4 {
		ops = append(ops, r.enqueue("add_drawer", map[string]any{"wing": "w", "room": fmt.Sprintf("r%d", i), "content": fmt.Sprintf("write %d", i)}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.flusher.Run(ctx) })
	time.Sleep(2 * time.Second) // ten send bounds: before, every op was sent into the hang by then
	cancel()
	wg.Wait()
	for _, op := range ops[1:] {
		got, err := r.store.GetByID(context.Background(), op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Attempts != 0 || got.MaybeApplied {
			t.Errorf("a write behind the hung one was sent into the hang: %s, %d attempts, maybe applied %v (%s)", got.State, got.Attempts, got.MaybeApplied, got.Error)
		}
	}
	if !r.p.Up() {
		t.Errorf("a primary that answers, its writes hung, is marked down (%s)", r.p.State())
	}
	close(release)
	r.drain()
	for i := range ops {
		if n := r.primary.Dump().CountContent(fmt.Sprintf("write %d", i)); n != 1 {
			t.Errorf("write %d is on the primary %d times, want once", i, n)
		}
	}
}
