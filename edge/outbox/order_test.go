package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// settleAll flushes (every backoff cleared each time round) until a round
// changes nothing, and returns the outbox's stats then.
func (r *rig) settleAll() outbox.Stats {
	r.t.Helper()
	ctx := context.Background()
	var last outbox.Stats
	for i := 0; i < 50; i++ {
		for !r.p.Up() {
			time.Sleep(10 * time.Millisecond)
		}
		r.store.ClearBackoff(ctx)
		r.flusher.Drain(ctx)
		st, err := r.store.Stats(ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		if st.ByState[outbox.Queued]+st.ByState[outbox.Inflight] == 0 || (i > 8 && sameCounts(st, last)) {
			return st
		}
		last = st
	}
	return last
}

func sameCounts(a, b outbox.Stats) bool {
	for k, v := range a.ByState {
		if b.ByState[k] != v {
			return false
		}
	}
	return true
}

// Issue 26, point 6: a write the primary refuses holds back only the
// writes on the same object (here, the same source file), never an
// unrelated drawer, a fact, or the coordination log; and an op refused
// with a JSON-RPC error (-32000, a handler that raised) is dead after
// exactly the 5 attempts the README promises. Before, the first refused op
// blocked every later op, events included, and -32000 counted as
// transient: the op was retried without end (21 tries seen) and never
// died.
func TestARefusedOpHoldsBackOnlyItsObject(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	refused := r.enqueue("add_drawer", map[string]any{"wing": "bad/wing", "room": "r", "content": "refused", "source_file": "notes.md"})
	sameSource := r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "same source, after it", "source_file": "notes.md"})
	r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "unrelated drawer"})
	r.enqueue("kg_add", map[string]any{"subject": "ada", "predicate": "works_at", "object": "acme"})
	r.enqueue("event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "not stuck"})
	st := r.settleAll()
	d := r.primary.Dump()
	if d.CountContent("unrelated drawer") != 1 || len(d.Triples) != 1 || countEvents(d, func(e *fakepalace.Event) bool { return e.Body == "not stuck" }) != 1 {
		t.Errorf("unrelated writes did not reach the primary behind a refused op: drawers %d, facts %d, events %d", d.CountContent("unrelated drawer"), len(d.Triples), len(d.Events))
	}
	if d.CountContent("same source, after it") != 0 {
		t.Error("a write on the refused op's object went ahead of it")
	}
	if st.ByState[outbox.Dead] != 1 || len(st.Dead) != 1 || st.Dead[0].ID != refused.ID || !strings.Contains(string(st.Dead[0].Error), "invalid characters") {
		t.Fatalf("want the refused op dead with the primary's reason: %+v", st.ByState)
	}
	if _, _, err := r.store.Drop(context.Background(), refused.ID); err != nil {
		t.Fatal(err)
	}
	r.settleAll()
	if got, _ := r.store.GetByID(context.Background(), sameSource.ID); got.State != outbox.Done || r.primary.Dump().CountContent("same source, after it") != 1 {
		t.Errorf("the write behind the dropped op: %s", got.State)
	}

	// A JSON-RPC refusal: dead after exactly five attempts.
	r.srv.FailTool("mempalace_add_drawer", 100, fakepalace.FailInternal)
	op := r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the handler raises"})
	r.settleAll()
	got, _ := r.store.GetByID(context.Background(), op.ID)
	if got.State != outbox.Dead || got.Attempts != 5 {
		t.Errorf("an op refused with -32000: %s after %d attempts, want dead after 5", got.State, got.Attempts)
	}
}
