package outbox_test

import (
	"context"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Issue 26, point 4: day 1's "standup: nothing new" lands; day 2's equal
// entry is cut off before MemPalace applied it; its retry's look-up must
// not take day 1's entry for it. Before, the look-up found an entry with
// the text's hash and marked day 2's done: the local palace held two
// entries, the primary one.
func TestTheSameDiaryTextOnAnotherDayIsAnotherEntry(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cut := 0
	r.behind(func(tool string, _ []byte) bool {
		if tool == "mempalace_diary_write" {
			cut++
			return cut == 2 // day 2's first send: read, then cut; maybe applied, in fact not
		}
		return false
	})
	entry := map[string]any{"agent_name": "pi", "entry": "standup: nothing new"}
	r.enqueue("diary_write", entry)
	r.drain()
	r.enqueue("diary_write", entry)
	r.drain()
	if n := r.primary.Dump().CountContent("standup: nothing new"); n != 2 {
		t.Errorf("%d entries on the primary, want 2 (day 1's and day 2's)", n)
	}
	// And when day 3's did land, its lost answer makes no fourth.
	r.srv.DropAfterApplyTool("mempalace_diary_write", 1)
	r.enqueue("diary_write", entry)
	r.drain()
	if n := r.primary.Dump().CountContent("standup: nothing new"); n != 3 {
		t.Errorf("%d entries on the primary, want 3", n)
	}
}

// A replay of history (join) holding two equal entries makes the primary
// hold two: the n-th of n equal local entries is on the primary when it
// holds n of them, never "one exists, so done".
func TestHistoryCountsEqualEntries(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.flusher.History = true
	ctx := context.Background()
	for _, ordinal := range []int{1, 2} {
		if _, err := r.store.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"standup: nothing new"}`), Ordinal: ordinal}); err != nil {
			t.Fatal(err)
		}
	}
	r.drain()
	if n := r.primary.Dump().CountContent("standup: nothing new"); n != 2 {
		t.Fatalf("%d entries on the primary, want 2", n)
	}
	// Joining again (or a second palace holding the same two) adds none.
	for _, ordinal := range []int{1, 2} {
		r.store.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: []byte(`{"agent_name":"pi","entry":"standup: nothing new"}`), Ordinal: ordinal})
	}
	r.drain()
	if n := r.primary.Dump().CountContent("standup: nothing new"); n != 2 {
		t.Fatalf("%d entries on the primary after a second join, want 2", n)
	}
}
