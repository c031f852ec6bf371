package outbox

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

// Primary is what the flusher sends to: a tool call returning the parsed
// JSON of the result's text block. Errors: ErrUnauthorized, *RPCError, or
// anything else (a transport failure: the call may or may not have landed).
type Primary interface {
	Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
	Up() bool
}

// ErrUnauthorized is a 401/403 from the primary: a configuration problem,
// not an outage. The edge's Primary returns it; the flusher stops and
// reports.
var ErrUnauthorized = errors.New("the primary refused the token (401/403): check MEMPALACE_REMOTE_TOKEN")

// RPCError is a JSON-RPC error answered by the primary.
type RPCError struct {
	Code    int
	Message string
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Flusher drains the outbox to the primary. Several processes may share
// one palace; a lease in the database makes exactly one of them flush.
type Flusher struct {
	S       *Store
	P       Primary
	Log     *slog.Logger
	Owner   string        // this process's lease name
	Lease   time.Duration // default 10 s
	MaxPerm int           // attempts with a permanent error before dead (default 5)
	// BaseDelay and MaxDelay bound the persisted backoff (500 ms, 5 min).
	BaseDelay, MaxDelay time.Duration
	// History: the ops replay a palace's existing records (devbox-config
	// join, RFC 001 §4.4), so a diary entry whose text is already in the
	// primary's diary wing is that record, sent before. Otherwise (the
	// edge's live writes) a diary entry is looked up only after an attempt
	// that may have landed: an agent writing the same text twice made two
	// entries, and the primary gets both.
	History bool
	// Poll is how often a flusher whose doorbell could not be bound (a
	// palace path too long for a Unix socket) re-checks the database for
	// another process's enqueue (default 100 ms).
	Poll time.Duration
}

type lease struct {
	Owner   string `json:"owner"`
	Expires int64  `json:"expires"`
}

func (f *Flusher) defaults() {
	if f.Owner == "" {
		b := make([]byte, 6)
		crand.Read(b) // never fails (crypto/rand)
		f.Owner = fmt.Sprintf("edge-%d-%s", os.Getpid(), hex.EncodeToString(b))
	}
	if f.Lease == 0 {
		f.Lease = 10 * time.Second
	}
	if f.MaxPerm == 0 {
		f.MaxPerm = 5
	}
	if f.BaseDelay == 0 {
		f.BaseDelay = 500 * time.Millisecond
	}
	if f.MaxDelay == 0 {
		f.MaxDelay = 5 * time.Minute
	}
	if f.Poll == 0 {
		f.Poll = 100 * time.Millisecond
	}
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
}

// Run flushes until ctx ends. While nothing can be sent (the queue is
// empty, a dead op holds it, the primary is down) it holds no lease and
// sleeps without a timer: an enqueue in this process, the doorbell (an
// enqueue in any process on this palace) or the primary's recovery wakes
// it. Only a backoff that is due later sets a timer.
func (f *Flusher) Run(ctx context.Context) {
	f.defaults()
	defer f.release()
	b, err := f.S.listenBell()
	if err != nil {
		f.Log.Warn("no doorbell for other processes' writes; polling the outbox instead", "err", err, "every", f.Poll)
	} else {
		defer b.Close()
	}
	for ctx.Err() == nil {
		ok, err := f.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			f.Log.Error("outbox lease unreadable; trying again", "err", err)
		}
		if !ok {
			f.sleep(ctx, f.Lease/4) // another process flushes, or the database failed
			continue
		}
		n, wait := f.drain(ctx)
		if n > 0 {
			continue
		}
		if wait >= idle {
			f.release() // nothing to do: let any process take it when there is
			if b != nil {
				f.sleep(ctx, 0)
			} else {
				f.pollUntilChanged(ctx)
			}
			continue
		}
		f.sleep(ctx, min(wait, f.Lease/3))
	}
}

// idle is drain's answer when nothing can be sent until something happens.
const idle = time.Hour

// pollUntilChanged waits for a wake or another process's commit (PRAGMA
// data_version), for an outbox whose doorbell could not be bound.
func (f *Flusher) pollUntilChanged(ctx context.Context) {
	var last int64 = -1
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-f.S.wake:
			return
		case <-time.After(f.Poll):
		}
		var v int64
		if err := f.S.flushDB.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err == nil {
			if last >= 0 && v != last {
				return
			}
			last = v
		}
	}
}

// Drain sends everything sendable now and returns when the queue is empty
// or the head cannot be sent (primary down, backoff). For `edge flush`.
func (f *Flusher) Drain(ctx context.Context) (sent int, err error) {
	f.defaults()
	defer f.release()
	for {
		ok, err := f.acquire(ctx)
		if err != nil {
			return sent, err
		}
		if !ok {
			return sent, ErrLeaseHeld
		}
		n, _ := f.drain(ctx)
		sent += n
		if n == 0 {
			return sent, nil
		}
	}
}

// sleep waits for a wake, or d (0: no timer, only a wake).
func (f *Flusher) sleep(ctx context.Context, d time.Duration) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
	case <-f.S.wake:
	case <-timeout:
	}
}

// ErrLeaseHeld: another process holds the flush lease (it flushes).
var ErrLeaseHeld = errors.New("another edge process is flushing this palace")

// acquire takes or renews the flush lease: false while another process
// holds it; an error when the database could not say.
func (f *Flusher) acquire(ctx context.Context) (bool, error) {
	now := f.S.now()
	tx, err := f.S.flushDB.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	var v string
	err = tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='lease'`).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	var l lease
	if v != "" {
		if err := json.Unmarshal([]byte(v), &l); err != nil {
			// a lease this code did not write: taken over, as an expired one
			f.Log.Warn("outbox lease unreadable; taking it", "value", v, "err", err)
			l = lease{}
		}
	}
	if l.Owner != "" && l.Owner != f.Owner && time.UnixMilli(l.Expires).After(now) {
		return false, nil
	}
	b, err := json.Marshal(lease{Owner: f.Owner, Expires: now.Add(f.Lease).UnixMilli()})
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('lease', ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`, string(b)); err != nil {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("outbox lease: %w", err)
	}
	return true, nil
}

func (f *Flusher) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := f.S.flushDB.ExecContext(ctx, `DELETE FROM meta WHERE key='lease' AND json_extract(value, '$.owner')=?`, f.Owner); err != nil {
		f.Log.Debug("outbox lease not released; it expires", "err", err)
	}
}

// drain sends ops in local_seq order, one at a time, and stops at the
// first that cannot be sent so order holds. It returns how many reached a
// final state and, when it stopped, how long until the head is due.
func (f *Flusher) drain(ctx context.Context) (int, time.Duration) {
	run := &flushRun{diarySuffixes: map[string]map[string]bool{}}
	n := 0
	renew := time.Now()
	for ctx.Err() == nil {
		if time.Since(renew) > f.Lease/3 {
			ok, err := f.acquire(ctx)
			if err != nil {
				f.Log.Error("outbox lease not renewed", "err", err)
			}
			if !ok {
				return n, f.Lease / 4
			}
			renew = time.Now()
		}
		op, err := scanOp(f.S.flushDB.QueryRowContext(ctx, `SELECT `+opCols+` FROM ops WHERE state IN ('queued','inflight','dead') ORDER BY local_seq LIMIT 1`))
		if errors.Is(err, sql.ErrNoRows) {
			return n, idle
		}
		if err != nil {
			if ctx.Err() == nil { // a cancelled read is the edge stopping, not a failure
				f.Log.Error("outbox read failed", "err", err)
			}
			return n, time.Second
		}
		if op.State == Dead {
			// Order holds: a dead op blocks the ops after it until an
			// operator retries or drops it (devbox-config edge outbox).
			return n, idle
		}
		if wait := time.Until(op.NextAttemptAt); wait > 0 {
			return n, wait
		}
		if !f.P.Up() {
			return n, idle // the primary's recovery kicks us
		}
		// Once an attempt may have landed, the op stays "maybe applied"
		// until it is done: whatever a later attempt's own error was (a
		// look-up that failed says nothing about the write).
		ambiguous := op.MaybeApplied || op.State == Inflight
		if _, err := f.S.flushDB.ExecContext(ctx, `UPDATE ops SET maybe_applied=CASE WHEN state='inflight' THEN 1 ELSE maybe_applied END, state='inflight', attempts=attempts+1 WHERE local_seq=?`, op.LocalSeq); err != nil {
			return n, time.Second
		}
		op.Attempts++
		res, err := f.send(ctx, run, op, ambiguous)
		if ctx.Err() != nil {
			return n, 0 // shutting down: the op stays inflight, ambiguous next time
		}
		if f.settle(ctx, op, res, err) {
			n++
			continue
		}
		return n, time.Until(f.nextAttempt(op))
	}
	return n, 0
}

// errorKind is how an attempt failed, as error_json's "kind" records it.
type errorKind string

const (
	landed        errorKind = "" // not a failure: the primary has the write
	kindTransient errorKind = "transient"
	kindAmbiguous errorKind = "ambiguous" // may have landed
	kindAuth      errorKind = "unauthorized"
	kindPermanent errorKind = "permanent"
)

func (k errorKind) String() string { return string(k) }

// settle records the outcome; it reports whether the op is final. A
// record that cannot be written is logged: the op stays in flight, which
// the next attempt treats as maybe applied (its look-ups, or the
// gateway's ledger, keep it exactly once).
func (f *Flusher) settle(ctx context.Context, op Op, res map[string]any, err error) bool {
	now := f.S.now()
	kind, msg := classify(res, err)
	if kind == landed {
		rj, err := json.Marshal(res)
		if err == nil {
			_, err = f.S.flushDB.ExecContext(ctx, `UPDATE ops SET state='done', flushed_at=?, result_json=?, error_json=NULL WHERE local_seq=?`, now.UnixMilli(), string(rj), op.LocalSeq)
		}
		if err == nil {
			err = f.S.setMeta(ctx, f.S.flushDB, "last_flush", now.UTC().Format(time.RFC3339Nano))
		}
		if err != nil {
			f.Log.Error("outbox: a sent op's outcome not recorded", "op", op.ID[:12], "err", err)
		}
		f.S.notify(op.ID)
		return true
	}
	ej, err := json.Marshal(map[string]any{"kind": kind, "message": msg, "at": now.UTC(), "attempt": op.Attempts})
	if err != nil {
		ej = []byte(`{"kind":"` + kind.String() + `"}`) // msg held something JSON cannot encode
	}
	state := Queued
	if kind == kindPermanent && op.Attempts >= f.MaxPerm {
		state = Dead
		f.Log.Error("outbox op is dead: the primary keeps refusing it; see devbox-config edge outbox list", "op", op.ID[:12], "tool", op.Tool, "err", msg)
	} else if kind == kindAuth {
		f.Log.Error("the primary refused the token; queued writes wait for a fixed MEMPALACE_REMOTE_TOKEN", "op", op.ID[:12])
	} else {
		f.Log.Debug("outbox op not sent; will retry", "op", op.ID[:12], "tool", op.Tool, "kind", kind, "err", msg)
	}
	next := now.Add(f.backoff(op.Attempts, kind))
	maybe := kind == kindAmbiguous // the write may have landed: sticks (drain)
	_, err = f.S.flushDB.ExecContext(ctx, `UPDATE ops SET state=?, error_json=?, next_attempt_at=?, maybe_applied=(maybe_applied OR ?) WHERE local_seq=?`, string(state), string(ej), next.UnixMilli(), maybe, op.LocalSeq)
	if err == nil {
		err = f.S.setMeta(ctx, f.S.flushDB, "last_error", fmt.Sprintf("%s %s: %s", now.UTC().Format(time.RFC3339), op.Tool, msg))
	}
	if err != nil {
		f.Log.Error("outbox: a failed attempt not recorded", "op", op.ID[:12], "err", err)
	}
	f.S.notify(op.ID) // dead, or queued with its error: a waiter learns it now
	return false
}

func (f *Flusher) nextAttempt(op Op) time.Time {
	o, err := f.S.Get(context.Background(), op.LocalSeq)
	if err != nil {
		return time.Now().Add(time.Second)
	}
	return o.NextAttemptAt
}

// backoff is exponential with full jitter, capped, persisted by the caller.
func (f *Flusher) backoff(attempts int, kind errorKind) time.Duration {
	if kind == kindAuth {
		return f.MaxDelay
	}
	d := f.BaseDelay << min(attempts-1, 20)
	if d > f.MaxDelay || d <= 0 {
		d = f.MaxDelay
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// ClearBackoff makes every queued op due now (not the dead ones, which
// wait for an operator): `edge flush` means "send it now".
func (s *Store) ClearBackoff(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `UPDATE ops SET next_attempt_at=0 WHERE state IN ('queued','inflight')`)
	return err
}

// Resume clears the backoff of waiting ops (the primary is reachable
// again) and wakes the flusher; an error leaves the backoff as it was.
func (s *Store) Resume(ctx context.Context) error {
	_, err := s.flushDB.ExecContext(ctx, `UPDATE ops SET next_attempt_at=0 WHERE state IN ('queued','inflight') AND (error_json IS NULL OR json_extract(error_json,'$.kind') IN ('transient','ambiguous'))`)
	s.Kick()
	return err
}

// classify turns a send's outcome into "" (landed) or an error kind
// (RFC 003 §7.6: a 200 with success:false must be read, not trusted).
func classify(res map[string]any, err error) (kind errorKind, msg string) {
	if err != nil {
		var rpc *RPCError
		switch {
		case errors.Is(err, ErrUnauthorized):
			return kindAuth, err.Error()
		case lookUpRefused(err):
			return kindPermanent, err.Error() // the look-up can never succeed: dead, for an operator (see send)
		case errors.Is(err, ErrLookup):
			return kindTransient, err.Error() // the write was not sent; the op's maybe_applied stands
		case errors.As(err, &rpc):
			if rpc.Code <= -32000 && rpc.Code >= -32099 {
				return kindTransient, rpc.Error() // gates: peer writer, integrity, read-only, diverged, stale library; internal
			}
			return kindPermanent, rpc.Error()
		case errors.Is(err, errPermanent):
			return kindPermanent, err.Error()
		}
		return kindAmbiguous, err.Error()
	}
	failed := res["success"] == false
	errMsg, hasErr := res["error"]
	if !failed && !hasErr {
		return landed, ""
	}
	m := fmt.Sprint(errMsg)
	low := strings.ToLower(m)
	for _, t := range []string{"another mine is in progress", "read-only", "read only", "lock", "busy", "temporar", "timeout", "try again"} {
		if strings.Contains(low, t) {
			return kindTransient, m
		}
	}
	return kindPermanent, m
}

var errPermanent = errors.New("permanent")

// flushRun caches what one drain learned about the primary.
type flushRun struct {
	diarySuffixes map[string]map[string]bool // wing -> sha256(entry)[:12] set
}

func args(op Op) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(op.Payload))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: payload is not a JSON object: %w", errPermanent, err)
	}
	return m, nil
}
