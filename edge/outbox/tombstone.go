package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// Tombstones: what this device deleted, so merged reads never show the
// primary's copy of it (issue 27). A drawer or source tombstone is kept
// until the device writes the same content again (Lift: the same drawer
// id, so the primary's copy is the new write's). A diary entry's copy on
// the primary has another id and the primary's own timestamp (naive local
// time on a 3.11 primary: never comparable with this device's), so its
// tombstone names that copy as the primary wrote it: copies, the
// timestamps the primary gave it (its answer to this device's
// diary_write, or its record when the entry was read from there), and
// write_op, this device's diary_write of it still unsent at the delete,
// whose answer (ops.result_json) names the copy once it lands. The same
// text written again is another copy, never hidden. Any tombstone goes
// once the delete it rode with reached the primary (tookIt: the primary's
// copy is gone then, in its gateway's trash), a send in flight at an
// operator's drop or delivered too. The drop or delivered leaves it.
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
  copies     TEXT NOT NULL DEFAULT '',
  write_op   TEXT NOT NULL DEFAULT '',
  shown      TEXT NOT NULL DEFAULT '',
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
	// TombDiary: a diary entry, by agent and text and the primary's
	// timestamps of its copies (diary_read answers carry no id). Key is
	// the entry's drawer id.
	TombDiary TombKind = "diary"
)

// Tombstone is one record this device deleted.
type Tombstone struct {
	Kind TombKind
	// Key is the drawer id (drawer, diary) or the source_file (source).
	Key string
	// Agent (lower-cased, as diary_read answers it), Stamp (the entry's
	// timestamp as the palace it was read from wrote it) and Text: a
	// diary entry's.
	Agent, Stamp, Text string
	// Copies are the timestamps, exactly as the primary wrote them, of
	// the diary entry's copies there (none known: nothing to hide).
	Copies []string
	// WriteOp is this device's diary_write of the entry, unsent at the
	// delete: its copy's timestamp joins Copies once it lands.
	WriteOp string
	// Shown are, for a source, the drawers this device filed of it since
	// the delete (a write naming the source): they show, the deleted ones
	// stay hidden.
	Shown []string
	// Base is, for a drawer, the base (origin.Base) of the text its
	// delete_drawer removed from the local palace ("": none known): a
	// later delete_drawer of the drawer, which the local palace no longer
	// holds, carries it (kept in the text column, a diary entry's only).
	Base string
	// OpID is the queued delete that carries it to the primary ("": none).
	OpID    string
	Created time.Time
	// Lifted is when this device wrote a diary tombstone's text again
	// (zero: not yet). Informational: what a tombstone hides is Copies.
	Lifted time.Time
}

// text is its text column: a diary entry's text, a drawer's base.
func (t Tombstone) text() string {
	if t.Kind == TombDrawer {
		return t.Base
	}
	return t.Text
}

// DeletedBase is the Base of drawer id's tombstone ("": none, or none
// known).
func (s *Store) DeletedBase(ctx context.Context, id string) (string, error) {
	var base string
	err := s.db.QueryRowContext(ctx, `SELECT text FROM tombstones WHERE kind='drawer' AND key=?`, id).Scan(&base)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("outbox tombstones: %w", err)
	}
	return base, nil
}

// AddTombstones records ts (a tombstone already there is replaced).
func (s *Store) AddTombstones(ctx context.Context, ts []Tombstone) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox tombstones: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, t := range ts {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tombstones(kind, key, agent, stamp, text, op_id, created_at, lifted_at, copies, write_op, shown) VALUES(?,?,?,?,?,?,?,?,?,?,?)`,
			string(t.Kind), t.Key, t.Agent, t.Stamp, t.text(), t.OpID, s.now().UnixMilli(), millis(t.Lifted), strings.Join(t.Copies, "\n"), t.WriteOp, strings.Join(t.Shown, "\n")); err != nil {
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
// (and the diary entries with those ids), and takes them and sources out
// of the kept deletes the local palace has not applied
// (SupersedeUnapplied). A source's tombstone stays: the drawers the write
// files of it (sources: each source's drawer ids) are Shown, and the
// deleted ones stay hidden. The diary
// tombstones of an agent with one of texts are bounded instead, at the
// first such write: the primary's copy of the deleted entry (another id,
// stamped when it was sent, before the rewrite) stays hidden, the copy of
// the new one (stamped after) shows, and so does every later one.
func (s *Store) LiftTombstones(ctx context.Context, drawers []string, sources map[string][]string, agent string, texts []string) error {
	if len(drawers) > 0 {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM tombstones WHERE kind IN ('drawer','diary') AND key IN (`+marks(len(drawers))+`)`, appendAll(nil, drawers)...); err != nil {
			return fmt.Errorf("outbox tombstones: lifting: %w", err)
		}
	}
	for src, ids := range sources {
		shown := strings.Join(ids, "\n")
		if _, err := s.db.ExecContext(ctx, `UPDATE tombstones SET shown=CASE WHEN shown='' THEN ? ELSE shown||char(10)||? END, lifted_at=? WHERE kind='source' AND key=?`,
			shown, shown, s.now().UnixMilli(), src); err != nil {
			return fmt.Errorf("outbox tombstones: lifting: %w", err)
		}
	}
	if err := s.SupersedeUnapplied(ctx, drawers, slices.Collect(maps.Keys(sources))); err != nil {
		return err
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
		var copies, shown, tool, landed string
		err = r.Scan(&t.Kind, &t.Key, &t.Agent, &t.Stamp, &t.Text, &t.OpID, &ms, &lifted, &copies, &t.WriteOp, &shown, &tool, &landed)
		if shown != "" {
			t.Shown = strings.Split(shown, "\n")
		}
		if t.Kind == TombDrawer {
			t.Base, t.Text = t.Text, ""
		}
		t.Created = time.UnixMilli(ms)
		if lifted != 0 {
			t.Lifted = time.UnixMilli(lifted)
		}
		if copies != "" {
			t.Copies = strings.Split(copies, "\n")
		}
		if ts := landedCopy(tool, landed); ts != "" && !slices.Contains(t.Copies, ts) {
			t.Copies = append(t.Copies, ts)
		}
		return t, err
	}, `SELECT t.kind, t.key, t.agent, t.stamp, t.text, t.op_id, t.created_at, t.lifted_at, t.copies, t.write_op, t.shown, COALESCE(o.tool_name, ''), COALESCE(o.result_json, '')
	    FROM tombstones t LEFT JOIN ops o ON t.write_op<>'' AND o.op_id=t.write_op ORDER BY t.created_at, t.kind, t.key`)
	if err != nil {
		return nil, fmt.Errorf("outbox tombstones: %w", err)
	}
	return out, nil
}

// DiaryCopy finds this device's write of the diary entry en (a
// diary_write, or a checkpoint's diary): the op CancelUnsentDiaries takes
// for it (entryOp: by en's local id, else the fallback for an older
// edge's op). stamp is its copy's timestamp on the primary, as the
// primary answered it, when it landed; opID is the op when it has not
// settled yet. Both "" when there is no such op (it was pruned, or the
// entry was not this device's write) or its answer names no copy
// (landedCopy).
func (s *Store) DiaryCopy(ctx context.Context, en DeletedEntry) (stamp, opID string, err error) {
	o, ok, err := entryOp(ctx, s.db, en)
	if err != nil {
		return "", "", fmt.Errorf("outbox: a deleted diary entry's write: %w", err)
	}
	switch {
	case !ok:
		return "", "", nil
	case o.State != Done:
		return "", o.ID, nil
	}
	return landedCopy(o.Tool, string(o.Result)), "", nil
}

// landedCopy is the timestamp the primary gave the diary entry a landed
// op of tool wrote, as its answer (result) says: a diary_write's answer
// is MemPalace's diary_write answer, with the entry's timestamp; a
// checkpoint's carries that answer for its diary under "diary"; one the
// outbox found had landed by a look-up (sendDiary, sendCheckpoint) carries
// the found entry's filed_at, as the primary's listing gave it, the same
// way. "" when the answer names none: an op cancelled before it was sent,
// or a look-up whose listing had no filed_at (or a replay of history,
// which counts entries). Such an entry's copy is not named, and merged
// reads may show it: a timestamp made up from the id's stamp might differ
// from the one the primary wrote by a digit, and would hide nothing, or
// another entry.
func landedCopy(tool, result string) string {
	if rec, _ := catalogue.Lookup(tool); rec.Name == "checkpoint" {
		return gjson.Get(result, "diary.timestamp").String()
	}
	return gjson.Get(result, "timestamp").String()
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
