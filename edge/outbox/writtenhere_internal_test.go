package outbox

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
)

// WrittenHere names the drawers whose text on the primary may not be
// this device's: one an update or add not sent yet names, one an update
// refused as written names (its causal keys are gone, the local text
// stays), never one whose write landed.
func TestWrittenHereNamesTheDrawersOfWritesNotLanded(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, w := range []Write{
		{Name: catalogue.Prefix + "update_drawer", Payload: []byte(`{"drawer_id":"queued","content":"c"}`)},
		{Name: catalogue.Prefix + "add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"new"}`)},
		{Name: catalogue.Prefix + "update_drawer", Payload: []byte(`{"drawer_id":"refused","content":"c"}`)},
		{Name: catalogue.Prefix + "update_drawer", Payload: []byte(`{"drawer_id":"landed","content":"c"}`)},
	} {
		if _, err := s.Enqueue(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE ops SET state='dead' WHERE local_seq=3`, `DELETE FROM op_keys WHERE local_seq=3`, // refused as written
		`UPDATE ops SET state='done' WHERE local_seq=4`, `DELETE FROM op_keys WHERE local_seq=4`,
	} {
		if _, err := s.flushDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	here, err := s.WrittenHere(ctx)
	want := []string{"queued", "refused", catalogue.DrawerID("w", "r", "new")}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(here)); err != nil || !slices.Equal(got, want) {
		t.Fatalf("written here: %v (%v), want %v", got, err, want)
	}
}
