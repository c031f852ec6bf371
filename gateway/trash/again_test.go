package trash

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A restore of an older delete of a drawer, made after a newer delete of
// the same id, is in the palace: `trash list` does not say the newer
// delete (made before the restore) took it out again, and a purge says
// the drawer is in the palace (before: againJoin took the later delete by
// number, and the purge was silent while every device read the drawer;
// attack87 F1). A delete after the restore does take it out again.
func TestAnOlderDeleteRestoredAfterANewerOneIsInThePalace(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), FileName), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 7, 7, 36, 0, 0, time.UTC)
	s.Now = func() time.Time { return now }
	g := Drawer{ID: "drawer_w_r_g", Wing: "w", Room: "r", Content: "Gamma: rotate keys monthly.", Metadata: json.RawMessage(`{}`), Kind: KindFiled}
	del := func() int64 {
		t.Helper()
		id, err := s.Keep(ctx, Delete{Device: "ops", Tool: "delete_drawer", Drawers: []Drawer{g}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, id, StateDeleted, "", nil); err != nil {
			t.Fatal(err)
		}
		return id
	}
	older := del()
	now = now.Add(5 * time.Minute)
	newer := del() // filed again by another device, and deleted again
	now = now.Add(11 * time.Minute)
	if err := s.MarkRestored(ctx, older, g.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Get(ctx, older); err != nil || d.Drawers[0].DeletedAgain != nil || d.Drawers[0].Live() == "" {
		t.Fatalf("the restored copy reads as taken out again by a delete before the restore: %+v %v", d.Drawers, err)
	}
	if ids, live, err := s.Purge(ctx, strconv.FormatInt(newer, 10)); err != nil || len(ids) != 1 || ids[0] != newer || len(live) != 1 || live[0].RestoredAs != g.ID {
		t.Fatalf("purge of the newer delete, while the older's restore is in the palace: ids %v, live %+v, %v", ids, live, err)
	}
	if _, live, err := s.Purge(ctx, g.ID); err != nil || len(live) != 1 || live[0].RestoredAs != g.ID {
		t.Fatalf("purge of a drawer a restore put in the palace: live %+v, %v", live, err)
	}
	now = now.Add(time.Minute)
	after := del()
	if d, err := s.Get(ctx, older); err != nil || d.Drawers[0].DeletedAgain == nil || d.Drawers[0].DeletedAgain.Delete != after {
		t.Fatalf("a delete after the restore took it out again: %+v %v", d.Drawers, err)
	}
}
