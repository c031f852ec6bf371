package outbox_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// Two edge processes on one palace each add the writes they could not
// record; a join clears the record only if it read the local palace
// after the last of them, or a later one would be forgotten unsent.
func TestStayedLocalAddsUpAndAJoinClearsWhatItRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	a, err := outbox.Open(path, "dev", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := outbox.Open(path, "dev", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t0 := time.UnixMilli(1_700_000_000_000)
	if err := a.NoteStayedLocal(ctx, outbox.StayedLocal{N: 3, Since: t0.Add(time.Minute), Last: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := b.NoteStayedLocal(ctx, outbox.StayedLocal{N: 2, Since: t0, Last: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sl := st.StayedLocal; sl == nil || sl.N != 5 || !sl.Since.Equal(t0) || !sl.Last.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the record of both: %+v", sl)
	}
	if err := a.ClearStayedLocal(ctx, t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if st, _ = a.Stats(ctx); st.StayedLocal == nil {
		t.Fatal("a join that read the palace before the last write cleared the record")
	}
	if err := a.ClearStayedLocal(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st, _ = a.Stats(ctx); st.StayedLocal != nil {
		t.Fatalf("after a join that read everything: %+v", st.StayedLocal)
	}
}
