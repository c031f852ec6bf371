package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/joakimp/devbox-config/catalogue"
)

// A write bound for the local palace is in the outbox before it is sent
// there, as an intent (Write.Intent): a kill (docker stop's SIGKILL)
// while the local palace is at it cannot lose it to the fleet, even if
// the orphaned local palace then applies it. The local answer settles
// it: taken, it is promoted (queued, or held); refused, it is abandoned
// (gone, as if never written). An intent nobody settled, because its edge
// was killed, is resolved by the next edge (or `edge flush`): held, then
// released by the policy like any held op, so it is sent. Whether the
// local palace applied it cannot be known then (the orphan may still be at
// it), and the payload is all a send needs: sent, the primary may hold a
// write this palace lacks (merged reads show it), as a write given up
// after the write grace does; not sent, the fleet would lose it.

// Promote settles an intent the local palace took: queued (held when the
// policy did not parse as it was written), entry noted as Enqueue does. An
// identical add_drawer or checkpoint already queued takes its place (this
// one is done, unsent), as Enqueue would have. An intent another process
// already resolved (a killed edge's successor started meanwhile) is
// returned as it is.
func (s *Store) Promote(ctx context.Context, o Op, held bool, entry string) (Op, error) {
	rec, _ := catalogue.Lookup(o.Tool)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	state, dedupe := Queued, "op:"+o.ID
	if held {
		state = Held
	} else if rec.Replay == catalogue.ServerDeduped {
		canon, err := canonical(o.Payload)
		if err != nil {
			return Op{}, fmt.Errorf("outbox: payload of %s: %w", o.Tool, err)
		}
		dedupe = "content:" + hash(o.Tool, string(canon))
		var existing int64
		if err := tx.QueryRowContext(ctx, `SELECT local_seq FROM ops WHERE dedupe_key=? AND state IN ('queued','inflight')`, dedupe).Scan(&existing); err == nil {
			if err := settleDone(ctx, tx, o.LocalSeq, s.now(), "", `{"kind":"cancelled","message":"an identical write was already queued: never sent"}`); err != nil {
				return Op{}, fmt.Errorf("outbox: %w", err)
			}
			o.LocalSeq = existing // its op is this write's
		} else if !errors.Is(err, sql.ErrNoRows) {
			return Op{}, fmt.Errorf("outbox: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ops SET state=?, dedupe_key=? WHERE local_seq=? AND state='intent'`, state.String(), dedupe, o.LocalSeq); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if entry != "" { // under the op id it has now (a release may have made it anew)
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) SELECT ?, op_id FROM ops WHERE local_seq=?
			ON CONFLICT(key) DO UPDATE SET value=excluded.value`, entryKey(entry), o.LocalSeq); err != nil {
			return Op{}, fmt.Errorf("outbox: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if !held {
		s.ringAll()
	}
	return s.Get(ctx, o.LocalSeq)
}

// Abandon settles an intent the local palace refused (or never got): it
// is gone, never sent. One another process already resolved is taken back
// if still unsent (done, unsent); one already sent stays sent (false).
func (s *Store) Abandon(ctx context.Context, o Op) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	res, err := tx.ExecContext(ctx, `DELETE FROM ops WHERE local_seq=? AND state='intent'`, o.LocalSeq)
	if err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 { // SQLite always knows it
		res, err = tx.ExecContext(ctx, `UPDATE ops SET state='done', flushed_at=?, error_json=? WHERE local_seq=? AND `+unsent,
			s.now().UnixMilli(), `{"kind":"cancelled","message":"the local palace refused it: never sent"}`, o.LocalSeq)
		if err != nil {
			return false, fmt.Errorf("outbox: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return false, tx.Commit() // sent already, or gone
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM op_keys WHERE local_seq=?`, o.LocalSeq); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	s.ringAll() // the ops behind it may go
	return true, nil
}

// ResolveIntents holds the intents a killed edge left unsettled: the
// policy then releases them (ReleaseHeld), as any held op. It says how
// many. The edge runs it at start, `edge flush` before it flushes.
func (s *Store) ResolveIntents(ctx context.Context) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE ops SET state='held' WHERE state='intent'`)
	if err != nil {
		return 0, fmt.Errorf("outbox: resolving the writes a stopped edge left unsettled: %w", err)
	}
	n, _ := res.RowsAffected() // SQLite always knows it
	return int(n), nil
}
