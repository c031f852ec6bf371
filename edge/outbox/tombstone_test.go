package outbox_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// An outbox whose tombstones an older edge kept (no lifted_at) opens with
// them, unbounded; a rewrite of a diary entry's text bounds its tombstone
// once (a second rewrite keeps the first bound), and a drawer's goes.
func TestTombstonesOfAnOlderOutbox(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), outbox.FileName)
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE tombstones(kind TEXT NOT NULL, key TEXT NOT NULL, agent TEXT NOT NULL DEFAULT '', stamp TEXT NOT NULL DEFAULT '',
			text TEXT NOT NULL DEFAULT '', op_id TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, PRIMARY KEY(kind, key)) WITHOUT ROWID`,
		`INSERT INTO tombstones(kind, key, agent, stamp, text, created_at) VALUES('diary', 'diary_wing_me_1', 'me', '2026-12-01T10:00:00', 'standup: nothing new', 1)`,
		`INSERT INTO tombstones(kind, key, created_at) VALUES('drawer', 'drawer_a', 2)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	clock := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	s, err := outbox.OpenOptions(path, outbox.Options{Device: "dev", Label: "lab", Now: func() time.Time { clock = clock.Add(time.Minute); return clock }})
	if err != nil {
		t.Fatalf("an older outbox with tombstones: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	ts, err := s.Tombstones(ctx)
	if err != nil || len(ts) != 2 || !ts[0].Lifted.IsZero() {
		t.Fatalf("tombstones kept: %+v %v", ts, err)
	}
	lifted := func() outbox.Tombstone {
		t.Helper()
		if err := s.LiftTombstones(ctx, []string{"drawer_a"}, nil, "me", []string{"standup: nothing new"}); err != nil {
			t.Fatal(err)
		}
		ts, err := s.Tombstones(ctx)
		if err != nil || len(ts) != 1 || ts[0].Kind != outbox.TombDiary || ts[0].Lifted.IsZero() {
			t.Fatalf("after a rewrite: %+v %v, want the diary tombstone alone, bounded", ts, err)
		}
		return ts[0]
	}
	first := lifted()
	if again := lifted(); !again.Lifted.Equal(first.Lifted) {
		t.Fatalf("a second rewrite moved the bound from %v to %v: it would hide the first rewrite's copy", first.Lifted, again.Lifted)
	}
}
