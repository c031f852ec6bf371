package outbox_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// openOther opens a second process's Store on the rig's outbox (another
// agent session's edge on the same palace).
func (r *rig) openOther() *outbox.Store {
	r.t.Helper()
	s, err := outbox.Open(r.store.Path(), "dev-1", "lab")
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { s.Close() })
	return s
}

// start does what an edge's start does with the outbox: resolves the
// intents and delete notes left unsettled, and releases what is held.
func (r *rig) start(s *outbox.Store) int {
	r.t.Helper()
	n, err := resolveLeft(context.Background(), s)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// resolveLeft is start's work (the edge's resolveLeft with a policy that
// replicates everything).
func resolveLeft(ctx context.Context, s *outbox.Store) (int, error) {
	n, err := s.ResolveIntents(ctx)
	if err != nil {
		return n, err
	}
	held, err := s.List(ctx, 100, outbox.Held)
	if err != nil {
		return n, err
	}
	for _, o := range held {
		if err := s.Release(ctx, o, json.RawMessage(o.Payload), true); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Two edges on one palace: edge A is killed with a write waiting for its
// local palace (an intent) and a delete noted. Edge B, running and idle,
// resolves them without a restart, within its Lease: its flusher, rung by
// A's intent, looks at A's lock again at each upkeep (Adopt), and sends
// nothing of A's while A lives. Before, they waited for the next edge
// start or `edge flush`, however long B ran (attack84 F1).
func TestARunningEdgeResolvesAKilledEdgesIntents(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const lease = 200 * time.Millisecond
	r.flusher.Lease = lease
	r.flusher.Adopt = func(ctx context.Context) {
		if _, err := resolveLeft(ctx, r.store); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.flusher.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	a := r.openOther()
	content := "A's last write, its local palace slow"
	op, err := a.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: addDrawer(content), Intent: true})
	if err != nil {
		t.Fatal(err)
	}
	call := []byte(`{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"drawer_x"}}`)
	if _, err := a.IntendDelete(ctx, []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: "drawer_x"}}, nil, nil, "", call); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * lease) // B's upkeep looks at A's lock, held
	if o, _ := r.store.Get(ctx, op.LocalSeq); o.State != outbox.Intent {
		t.Errorf("live edge A's write waiting for its local palace is %s, want still an intent", o.State)
	}
	a.Close() // A is killed: its lock is free
	killed := time.Now()
	for r.primary.Dump().CountContent(content) == 0 && time.Since(killed) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(killed)
	if n := r.primary.Dump().CountContent(content); n != 1 {
		t.Fatalf("killed edge A's write is on the primary %d times %v after, with edge B running, want once", n, took)
	}
	if us, err := r.store.Unapplied(ctx); len(us) != 1 || err != nil {
		t.Errorf("killed edge A's delete: %d kept unapplied (%v), want 1", len(us), err)
	}
	t.Logf("sent %v after A was killed (Lease %v)", took.Round(time.Millisecond), lease)
}

func addDrawer(content string) []byte {
	b, _ := json.Marshal(map[string]any{"wing": "w", "room": "r", "content": content})
	return b
}

// Two agent sessions, two edges on one palace: edge A's write (and
// delete) waits for A's local palace when edge B starts. B leaves them to
// A, which is alive; once A is gone (closed here, killed in
// TestAKilledProcessIsGoneAtOnce) the next start resolves them as a
// killed edge's.
func TestAnotherEdgesLiveIntentsAreLeftToIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	a := r.openOther()
	op, err := a.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: addDrawer("slow at A's embedder"), Intent: true})
	if err != nil {
		t.Fatal(err)
	}
	call := []byte(`{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"drawer_x"}}`)
	if _, err := a.IntendDelete(ctx, []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: "drawer_x"}}, nil, nil, "", call); err != nil {
		t.Fatal(err)
	}
	if n := r.start(r.store); n != 0 {
		t.Errorf("edge B's start resolved %d of live edge A's intents and delete notes, want none", n)
	}
	if o, _ := r.store.Get(ctx, op.LocalSeq); o.State != outbox.Intent {
		t.Errorf("A's write waiting for its local palace is %s after B started, want still an intent", o.State)
	}
	if us, _ := r.store.Unapplied(ctx); len(us) != 0 {
		t.Errorf("A's delete waiting for its local palace was kept by B (%d unapplied)", len(us))
	}
	a.Close() // A is gone (its answer never came)
	if n := r.start(r.store); n != 2 {
		t.Errorf("a start after A was gone resolved %d, want its write and its delete", n)
	}
	if o, _ := r.store.Get(ctx, op.LocalSeq); o.State != outbox.Queued {
		t.Errorf("a gone edge's write: %s, want queued (held, released)", o.State)
	}
}

// Edge A's local palace refuses a write after edge B started: the write
// never reaches the primary (before, B's start took A's pending write for
// a killed edge's and sent it).
func TestARefusedWriteIsNotSentByAnotherEdgesStart(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	a := r.openOther()
	op, err := a.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: addDrawer("refused by A's palace"), Intent: true})
	if err != nil {
		t.Fatal(err)
	}
	r.start(r.store)
	r.settleAll()
	if never, err := a.Abandon(ctx, op); !never || err != nil {
		t.Errorf("Abandon of A's refused write: never sent %v (%v), want true", never, err)
	}
	r.settleAll()
	if n := r.primary.Dump().CountContent("refused by A's palace"); n != 0 {
		t.Errorf("a write A's local palace refused is on the primary %d times, want 0", n)
	}
}

// Edge A's local palace refuses a delete after edge B started: the
// unsent write of what it would have deleted still reaches the primary
// (before, B's start kept A's delete and cancelled the write).
func TestARefusedDeleteKeepsTheWritesItCovered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	a := r.openOther()
	if _, err := a.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: addDrawer("kept")}); err != nil {
		t.Fatal(err)
	}
	id := catalogue.DrawerID("w", "r", "kept")
	p, err := a.IntendDelete(ctx, []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: id}}, nil, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.start(r.store)
	if err := a.DeleteRefused(ctx, p); err != nil {
		t.Fatal(err)
	}
	r.settleAll()
	if n := r.primary.Dump().CountContent("kept"); n != 1 {
		t.Errorf("the write a refused delete covered is on the primary %d times, want 1", n)
	}
}
