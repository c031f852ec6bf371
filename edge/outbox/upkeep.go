package outbox

import (
	"context"
	"strconv"
	"time"
)

// Retention: done ops are deleted once they are older than the retention
// (their answer and payload are of no use to any look-up then: the diary
// fences, in meta, are what look-ups keep), and the pages they held are
// given back to the file system (incremental vacuum), so the outbox's
// size follows what is pending and recent, not its history.
const (
	// DefaultRetention outlives a gateway ledger's default 7 days, so an
	// op's outbox record outlives the ledger's record of it.
	DefaultRetention = 8 * 24 * time.Hour
	// PruneEvery is the most often Run prunes.
	PruneEvery = time.Hour
	// pruneBatch bounds one delete, so an enqueue never waits behind a
	// prune of a long history for more than one batch.
	pruneBatch = 5000
)

// upkeep (Run's, between rounds) resolves what an edge process that is
// gone left (adopt), and prunes when a prune is due.
func (f *Flusher) upkeep(ctx context.Context) {
	f.adopt(ctx)
	f.prune(ctx)
}

// adopt has Adopt resolve the intents and delete notes of an edge process
// that is gone, and notes whether one still running has some (others).
// With none, it costs one look at the pending ops and the delete notes;
// the owners' locks are looked at only for those there are.
func (f *Flusher) adopt(ctx context.Context) {
	if f.Adopt == nil {
		return
	}
	gone, running, err := f.S.othersLeft(ctx)
	if err != nil {
		f.Log.Warn("outbox: another edge's unsettled writes not looked at; next time", "err", err)
		f.others = true // looked at again within Lease
		return
	}
	f.others = running
	if gone {
		f.Adopt(ctx) // its release rings: the next round sends them
	}
}

// prune prunes the done ops when a prune is due.
func (f *Flusher) prune(ctx context.Context) {
	now := f.S.now()
	if now.Sub(f.lastPrune) < min(PruneEvery, f.Retention) {
		return
	}
	f.lastPrune = now
	if n, err := f.S.Prune(ctx, f.Retention); err != nil {
		f.Log.Warn("outbox: done ops not pruned; next time", "err", err)
	} else if n > 0 {
		f.Log.Debug("outbox: pruned done ops", "ops", n)
	}
}

// Prune deletes the done ops that settled longer than retention ago and
// gives the space back; it returns how many it deleted. In an outbox
// recorded as a copy it keeps the ops queued before the copy and settled
// unsent (dropped: the original sends them), so a join still leaves
// their entries to the original (PendingDiaries).
func (s *Store) Prune(ctx context.Context, retention time.Duration) (int64, error) {
	cutoff := s.now().Add(-retention).UnixMilli()
	c, err := copyRecord(ctx, s.flushDB)
	if err != nil {
		return 0, err
	}
	keep := int64(0) // ops below it settled unsent are kept
	if c != nil {
		keep = c.Next
	}
	var total int64
	for {
		res, err := s.flushDB.ExecContext(ctx, `DELETE FROM ops WHERE local_seq IN (
			SELECT local_seq FROM ops WHERE state='done' AND flushed_at < ? AND NOT (local_seq < ? AND error_json IS NOT NULL) LIMIT ?)`, cutoff, keep, pruneBatch)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < pruneBatch {
			break
		}
	}
	if total == 0 {
		return 0, nil
	}
	// An entry written before it may have had its write (a join's) pruned.
	if err := setMeta(ctx, s.flushDB, metaPrunedBefore, strconv.FormatInt(cutoff, 10)); err != nil {
		return total, err
	}
	// The notes of which op carries a diary entry, for the ops gone.
	if _, err := s.flushDB.ExecContext(ctx, `DELETE FROM meta WHERE key LIKE 'entry:%' AND value NOT IN (SELECT op_id FROM ops)`); err != nil {
		return total, err
	}
	// And the notes keyed by an op gone: the already_closed notes of the
	// invalidates (closedNotes), the bases of the updates (Write.Base),
	// the devices retried ops were first queued as (queuedAsKey).
	for _, prefix := range []string{closedNotes, warnedNotes, baseNotes, queuedAsNotes} {
		if _, err := s.flushDB.ExecContext(ctx, `DELETE FROM meta WHERE key GLOB ? || '*' AND substr(key, length(?) + 1) NOT IN (SELECT op_id FROM ops)`, prefix, prefix); err != nil {
			return total, err
		}
	}
	_, err = s.flushDB.ExecContext(ctx, `PRAGMA incremental_vacuum`)
	return total, err
}
