package ledger

import (
	"context"
	"time"
)

// maybePrune prunes in the background if the last prune is PruneEvery
// (or the retention, if shorter) old: work only when there are writes.
func (l *Ledger) maybePrune(now int64) {
	every := min(PruneEvery, l.opt.Retention).Milliseconds()
	last := l.lastPrune.Load()
	if now-last < every || !l.lastPrune.CompareAndSwap(last, now) {
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.prune(ctx); err != nil {
			l.opt.Log.Error("op-id ledger: pruning expired rows", "err", err)
		}
	}()
}

// prune deletes the rows older than the retention.
func (l *Ledger) prune(ctx context.Context) error {
	now := l.opt.Now()
	l.lastPrune.Store(now.UnixMilli())
	// Rows are in rowid order of their first use: delete up to the first
	// one still within the retention (a row whose clock ran behind its
	// predecessor's is kept a little longer).
	_, err := l.db.ExecContext(ctx, `DELETE FROM ops WHERE rowid < COALESCE(
		(SELECT rowid FROM ops WHERE created_at >= ? ORDER BY rowid LIMIT 1),
		(SELECT max(rowid) + 1 FROM ops))`, now.Add(-l.opt.Retention).UnixMilli())
	return err
}

// Background checkpoints: every checkpointEvery commits, a PASSIVE
// checkpoint (it never blocks a writer) on the background connection.
// The WAL starts over at the first write after a checkpoint has copied
// every frame; under a stream of writes with no pause, one lands during
// every checkpoint and the WAL only grows. Once it is longer than
// checkpointBehind frames, the next checkpoint is RESTART: it waits for
// the writer (one request stalls for a checkpoint, only under such a
// stream) and the WAL starts over. An idle ledger does none.
const (
	checkpointEvery  = 256  // commits (a fresh op is two)
	checkpointBehind = 2048 // WAL frames (8 MiB of 4 KiB pages)
)

// committed counts a commit and starts a checkpoint when one is due.
func (l *Ledger) committed() {
	// Due from the checkpointEvery-th commit on; one still running defers
	// it to the next commit.
	if l.commits.Add(1) < checkpointEvery || !l.ckptBusy.CompareAndSwap(false, true) {
		return
	}
	l.commits.Store(0)
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer l.ckptBusy.Store(false)
		mode, db := "PASSIVE", l.bgdb
		if l.ckptBehind.Load() {
			// On the writers' own connection: it waits its turn in the pool
			// instead of polling SQLite's busy handler against a writer that
			// is never idle, and no writer of this process starts meanwhile.
			mode, db = "RESTART", l.db
		}
		var busy, frames, done int
		if err := db.QueryRow("PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &done); err != nil {
			l.opt.Log.Error("op-id ledger: checkpoint", "mode", mode, "err", err)
			return
		}
		// A passive checkpoint reports the frames it found, all copied;
		// but a WAL this long has not restarted for a while: writes went on
		// during every checkpoint.
		l.ckptBehind.Store(frames > checkpointBehind)
	}()
}
