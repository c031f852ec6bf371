package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// An intent is never sent as it is: the local answer settles it
// (promoted: sent once, an identical one already queued taking its
// place; abandoned: gone), and one a killed edge left is held, for the
// policy to release.
func TestIntentSettledByTheLocalAnswer(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	intend := func(content string) outbox.Op {
		b, _ := json.Marshal(map[string]any{"wing": "w", "room": "r", "content": content})
		op, err := r.store.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Payload: b, Intent: true})
		if err != nil || op.State != outbox.Intent {
			t.Fatalf("intent: %+v %v", op, err)
		}
		return op
	}
	taken, refused, twin, left := intend("taken"), intend("refused"), intend("taken"), intend("left by a kill")
	if sent, _ := r.flusher.Drain(ctx); sent != 0 {
		t.Errorf("the flusher sent %d intents", sent)
	}
	if op, err := r.store.Promote(ctx, taken, false, ""); err != nil || op.State != outbox.Queued {
		t.Errorf("promoted: %+v %v", op, err)
	}
	if op, err := r.store.Promote(ctx, twin, false, ""); err != nil || op.ID != taken.ID {
		t.Errorf("an identical write promoted is not the queued one: %+v %v", op, err)
	}
	if ok, err := r.store.Abandon(ctx, refused); !ok || err != nil {
		t.Errorf("abandoned: %v %v", ok, err)
	}
	if n, err := r.store.ResolveIntents(ctx); n != 1 || err != nil {
		t.Errorf("resolved %d intents (%v), want the one left", n, err)
	}
	if op, _ := r.store.Get(ctx, left.LocalSeq); op.State != outbox.Held {
		t.Errorf("an intent a killed edge left: %s, want held", op.State)
	}
	r.settleAll()
	st := r.primary.Dump()
	if st.CountContent("taken") != 1 || st.CountContent("refused") != 0 {
		t.Errorf("on the primary: taken %d (want 1), refused %d (want 0)", st.CountContent("taken"), st.CountContent("refused"))
	}
	if _, err := r.store.Get(ctx, refused.LocalSeq); err == nil {
		t.Error("the refused write's intent is still in the outbox")
	}
}
