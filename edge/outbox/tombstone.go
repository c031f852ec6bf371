package outbox

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Tombstones: what this device deleted, so merged reads never show the
// primary's copy of it (issue 27). A drawer or source tombstone is kept
// until the device writes the same content again (Lift: the same drawer
// id, so the primary's copy is the new write's). A diary tombstone is kept
// then too, bounded at the rewrite (lifted_at): the primary's copy of the
// deleted entry has another id than the new entry's and stays hidden; the
// new entry's copy, written there after the rewrite, shows. Any tombstone
// goes once the delete it rode with reached the primary (settleDone: the
// primary's copy is gone then, in its gateway's trash). An operator's drop
// or delivered leaves it.
const tombstoneSchema = `
CREATE TABLE IF NOT EXISTS tombstones(
  kind       TEXT NOT NULL,
  key        TEXT NOT NULL,
  agent      TEXT NOT NULL DEFAULT '',
  stamp      TEXT NOT NULL DEFAULT '',
  text       TEXT NOT NULL DEFAULT '',
  op_id      TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  lifted_at  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(kind, key)
) WITHOUT ROWID;
`

// TombKind is what a tombstone names.
type TombKind string

const (
	// TombDrawer: a drawer, by id.
	TombDrawer TombKind = "drawer"
	// TombSource: every drawer of a source (delete_by_source), by the
	// source_file it named.
	TombSource TombKind = "source"
	// TombDiary: a diary entry, by agent, timestamp and text (diary_read
	// answers carry no id). Key is the entry's drawer id.
	TombDiary TombKind = "diary"
)

// Tombstone is one record this device deleted.
type Tombstone struct {
	Kind TombKind
	// Key is the drawer id (drawer, diary) or the source_file (source).
	Key string
	// Agent (lower-cased, as diary_read answers it), Stamp (the entry's
	// timestamp as MemPalace wrote it) and Text: a diary entry's.
	Agent, Stamp, Text string
	// OpID is the queued delete that carries it to the primary ("": none).
	OpID    string
	Created time.Time
	// Lifted is when this device wrote a diary tombstone's text again
	// (zero: not yet): the tombstone hides only the copies stamped before.
	Lifted time.Time
}

// AddTombstones records ts (a tombstone already there is replaced).
func (s *Store) AddTombstones(ctx context.Context, ts []Tombstone) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox tombstones: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, t := range ts {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tombstones(kind, key, agent, stamp, text, op_id, created_at, lifted_at) VALUES(?,?,?,?,?,?,?,?)`,
			string(t.Kind), t.Key, t.Agent, t.Stamp, t.Text, t.OpID, s.now().UnixMilli(), millis(t.Lifted)); err != nil {
			return fmt.Errorf("outbox tombstones: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox tombstones: %w", err)
	}
	return nil
}

// TombstonesSent notes the queued delete that carries ts to the primary.
func (s *Store) TombstonesSent(ctx context.Context, ts []Tombstone, opID string) error {
	for i := range ts {
		ts[i].OpID = opID
	}
	return s.AddTombstones(ctx, ts)
}

// LiftTombstones removes the tombstones a write recreated: drawer ids
// (and the diary entries with those ids) and sources. The diary
// tombstones of an agent with one of texts are bounded instead, at the
// first such write: the primary's copy of the deleted entry (another id,
// stamped when it was sent, before the rewrite) stays hidden, the copy of
// the new one (stamped after) shows, and so does every later one.
func (s *Store) LiftTombstones(ctx context.Context, drawers, sources []string, agent string, texts []string) error {
	q := make([]string, 0, 2)
	var args []any
	if len(drawers) > 0 {
		q = append(q, `(kind IN ('drawer','diary') AND key IN (`+marks(len(drawers))+`))`)
		args = appendAll(args, drawers)
	}
	if len(sources) > 0 {
		q = append(q, `(kind='source' AND key IN (`+marks(len(sources))+`))`)
		args = appendAll(args, sources)
	}
	if len(q) > 0 {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM tombstones WHERE `+strings.Join(q, " OR "), args...); err != nil {
			return fmt.Errorf("outbox tombstones: lifting: %w", err)
		}
	}
	if agent != "" && len(texts) > 0 {
		if _, err := s.db.ExecContext(ctx, `UPDATE tombstones SET lifted_at=? WHERE kind='diary' AND lifted_at=0 AND agent=? AND text IN (`+marks(len(texts))+`)`,
			appendAll([]any{s.now().UnixMilli(), agent}, texts)...); err != nil {
			return fmt.Errorf("outbox tombstones: lifting: %w", err)
		}
	}
	return nil
}

// Tombstones lists every tombstone, oldest first.
func (s *Store) Tombstones(ctx context.Context) ([]Tombstone, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (t Tombstone, err error) {
		var ms, lifted int64
		err = r.Scan(&t.Kind, &t.Key, &t.Agent, &t.Stamp, &t.Text, &t.OpID, &ms, &lifted)
		t.Created = time.UnixMilli(ms)
		if lifted != 0 {
			t.Lifted = time.UnixMilli(lifted)
		}
		return t, err
	}, `SELECT kind, key, agent, stamp, text, op_id, created_at, lifted_at FROM tombstones ORDER BY created_at, kind, key`)
	if err != nil {
		return nil, fmt.Errorf("outbox tombstones: %w", err)
	}
	return out, nil
}

// millis is t in Unix milliseconds, 0 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func appendAll(args []any, vs []string) []any {
	for _, v := range vs {
		args = append(args, v)
	}
	return args
}
