package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The flush lease: at most one process sends an outbox's ops, provably.
// The lease row names its owner, when it expires and a fencing token that
// grows by one at every change of hands. The holder renews it every
// Lease/3 while it sends (keepLease), so it outlasts a send of any bound
// (up to 16 times SendTimeout) while the renewals succeed; a renewal that
// fails cuts the sends in flight at once. It records every outcome in a
// transaction that first checks the token is still its own (fenced): a
// flusher that lost
// the lease (paused past its expiry, its file unwritable) records nothing
// and sends nothing more, and the next holder finds the op in flight,
// which it treats as maybe applied.

type lease struct {
	Owner   string `json:"owner"`
	Expires int64  `json:"expires"` // unix ms
	Token   int64  `json:"token"`
	// Live is the holder's Store's liveness owner (live.go): a holder
	// whose lock is free is dead, and its lease is taken at once. ""
	// (an older build, no lock): it holds until it expires.
	Live string `json:"live,omitempty"`
}

// mine is the lease as this flusher last wrote it (zero: not held).
func (f *Flusher) mine() lease {
	if l := f.held.Load(); l != nil {
		return *l
	}
	return lease{}
}

// ErrLeaseHeld: another process holds the flush lease (it flushes).
var ErrLeaseHeld = errors.New("another edge process is flushing this palace")

// leaseHeld is ErrLeaseHeld with its holder and when its lease expires.
// A process killed mid-flush (SIGKILL, OOM) holds it until then only when
// its liveness is not known (an older build, no flock): otherwise its
// lock, free once it is dead, lets the next flusher take it at once. The
// holder's pid is not checked: a palace on a shared volume may be flushed
// from another pid namespace; its lock file is on the volume.
func (f *Flusher) leaseHeld(ctx context.Context) error {
	l, err := readLease(ctx, f.S.flushDB)
	if err != nil || l.Owner == "" {
		return ErrLeaseHeld
	}
	exp := time.UnixMilli(l.Expires)
	left := exp.Sub(f.S.now())
	secs := int64((left + time.Second - 1) / time.Second) // rounded up
	why := ""                                             // a holder with a lock is alive: it was not taken
	if l.Live == "" {
		why = "; that process's liveness is not known (an older build, or no file lock on this volume): killed mid-flush, it holds the lease until then"
	}
	return fmt.Errorf("%w (%s) until its lease expires at %s, in %d s, or sooner when that process finishes%s", ErrLeaseHeld, l.Owner, exp.Local().Format("15:04:05"), max(secs, 0), why)
}

// errLeaseLost: the lease changed hands; this flusher records nothing.
var errLeaseLost = errors.New("the flush lease passed to another process")

func readLease(ctx context.Context, q querier) (lease, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='lease'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return lease{}, nil
	}
	if err != nil {
		return lease{}, err
	}
	var l lease
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return lease{}, fmt.Errorf("lease %q: %w", v, err)
	}
	return l, nil
}

// acquire takes or renews the flush lease: false while another process
// holds it; an error when the database could not say.
func (f *Flusher) acquire(ctx context.Context) (bool, error) {
	now := f.S.now()
	tx, err := f.S.flushDB.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	l, err := readLease(ctx, tx)
	if err != nil {
		f.Log.Warn("outbox lease unreadable; taking it", "err", err) // a lease this code did not write: taken over, as an expired one
		l = lease{}
	}
	live := time.UnixMilli(l.Expires).After(now)
	if live && l.Owner != "" && l.Owner != f.Owner && l.Live != "" && f.S.gone(l.Live) {
		f.Log.Info("the flush lease's holder is dead; taking its lease", "holder", l.Owner)
		live = false // the token still fences it, should it come back
	}
	if l.Owner != "" && l.Owner != f.Owner && live {
		return false, nil
	}
	token := l.Token
	if l.Owner != f.Owner || !live {
		token++ // the lease changes hands (or lapsed and is taken again)
	}
	// A renewal holds it for Lease, or SendTimeout+Lease/3 when that is
	// longer: a send starts with at least SendTimeout left (lane), and the
	// renewals every Lease/3 keep it held past a longer bound.
	l = lease{Owner: f.Owner, Expires: now.Add(max(f.Lease, f.SendTimeout+f.Lease/3)).UnixMilli(), Token: token, Live: f.S.owner}
	b, _ := json.Marshal(l) // plain values: they encode
	if err := setMeta(ctx, tx, "lease", string(b)); err != nil {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	f.held.Store(&l)
	return true, nil
}

func (f *Flusher) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// The token stays, so the next holder's is one more.
	if _, err := f.S.flushDB.ExecContext(ctx, `UPDATE meta SET value=json_set(value, '$.owner', '', '$.expires', 0) WHERE key='lease' AND json_extract(value, '$.owner')=?`, f.Owner); err != nil {
		f.Log.Debug("outbox lease not released; it expires", "err", err)
	}
	f.held.Store(nil)
}

// keepLease renews the lease every Lease/3 until stop closes; when the
// lease is lost it calls lost (which ends the sends in flight).
func (f *Flusher) keepLease(ctx context.Context, stop <-chan struct{}, lost func()) {
	t := time.NewTicker(f.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := f.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			f.Log.Error("outbox lease not renewed", "err", err)
		}
		if !ok {
			f.Log.Warn("outbox lease lost: sends in flight are abandoned; the next holder looks them up")
			lost()
			return
		}
	}
}

// leaseLeft is how long the lease runs from now (0 if not held).
func (f *Flusher) leaseLeft() time.Duration {
	return max(0, time.UnixMilli(f.mine().Expires).Sub(f.S.now()))
}

// fenced runs fn in a transaction that first checks the lease is still
// this flusher's (errLeaseLost otherwise, with nothing written).
func (f *Flusher) fenced(ctx context.Context, fn func(tx *sql.Tx) error) error {
	token := f.mine().Token
	tx, err := f.S.flushDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	l, err := readLease(ctx, tx)
	if err != nil {
		return err
	}
	if l.Owner != f.Owner || l.Token != token || token == 0 {
		return errLeaseLost
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
