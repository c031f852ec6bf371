package outbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Issue 26, point 7: a tool the catalogue does not know (a third party's,
// served beside MemPalace's) that answers success without a JSON object
// (a JSON array, prose; isError false) has delivered its write: MCP says
// so. Before, such an answer was "ambiguous" for ever: the op was sent
// again and again and every later op waited behind it.
func TestASuccessWithoutAnObjectIsDelivered(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{"array": `[1, 2, 3]`, "prose": `Saved your note.`, "empty": ``} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			f := r.behind(nil)
			f.answer = func(tool string) json.RawMessage {
				if tool != "acme_notes_write" {
					return nil
				}
				b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": false})
				return b
			}
			op, err := r.store.Enqueue(context.Background(), outbox.Write{Name: "acme_notes_write", Payload: []byte(`{"note":"x"}`)})
			if err != nil {
				t.Fatal(err)
			}
			r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "after the third party's"})
			r.drain()
			got, _ := r.store.GetByID(context.Background(), op.ID)
			if got.State != outbox.Done || got.Attempts != 1 {
				t.Errorf("the third party's write: %s after %d attempts (%s)", got.State, got.Attempts, got.Error)
			}
			if r.primary.Dump().CountContent("after the third party's") != 1 {
				t.Error("the write after it did not reach the primary")
			}
		})
	}
}

// One Drain (`edge flush`) sends again what a dropped connection cut
// off, a bounded number of times, instead of stopping at the first
// failure and calling a primary that is up "unreachable".
func TestDrainRetriesADroppedConnection(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cut := 0
	r.behind(func(tool string, _ []byte) bool {
		if tool == "mempalace_add_drawer" {
			cut++
			return cut == 1
		}
		return false
	})
	r.enqueue("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "cut once"})
	sent, err := r.flusher.Drain(context.Background())
	if err != nil || sent != 1 || r.primary.Dump().CountContent("cut once") != 1 {
		t.Fatalf("one flush with a dropped connection: sent %d, %v; on the primary %d", sent, err, r.primary.Dump().CountContent("cut once"))
	}
}

// A delete the primary answers "Drawer not found" (another device deleted
// it first, a resend after a lost answer, an id that exists nowhere) has
// nothing left to do: the drawer is gone, as the delete wanted. It is
// done at once, noted as already gone there; one flush leaves nothing
// queued. Before, it was "refused by the primary", sent again after each
// backoff until it went dead, and every `edge flush` exited 1 for it
// (outside tester, attack5 08). delete_drawers' missing items were
// already done (its answer is a success with per-item errors).
func TestADeleteOfADrawerThePrimaryDoesNotHoldIsDone(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		tool string
		args map[string]any
	}{
		"delete_drawer":  {"delete_drawer", map[string]any{"drawer_id": "drawer_w_r_000000000000000000000000"}},
		"delete_drawers": {"delete_drawers", map[string]any{"drawer_ids": []any{"drawer_w_r_000000000000000000000000", "drawer_w_r_000000000000000000000001"}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			op := r.enqueue(c.tool, c.args)
			if _, err := r.flusher.Drain(context.Background()); err != nil {
				t.Fatalf("flush: %v", err)
			}
			got, _ := r.store.GetByID(context.Background(), op.ID)
			if got.State != outbox.Done || got.Attempts != 1 || got.Refusals != 0 {
				t.Fatalf("a %s of a drawer the primary does not hold: %s after %d attempts, %d refusals (%s)", c.tool, got.State, got.Attempts, got.Refusals, got.Error)
			}
			if c.tool == "delete_drawer" && !strings.Contains(outbox.Words(got.Error), "already gone on the primary") {
				t.Errorf("the done delete's note: %q, want it already gone on the primary", outbox.Words(got.Error))
			}
			if st, _ := r.store.Stats(context.Background()); st.LastError != "" {
				t.Errorf("a delete of a drawer already gone left a last error: %s", st.LastError)
			}
		})
	}
}
