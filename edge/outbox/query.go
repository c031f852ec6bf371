package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// opCols are the columns scanOp reads, in its order.
const opCols = `local_seq, op_id, origin_device, origin_label, tool_name, payload_json, wing, state, attempts, next_attempt_at, created_at, flushed_at, error_json, result_json, maybe_applied`

func scanOp(row interface{ Scan(...any) error }) (Op, error) {
	var o Op
	var payload string
	var next, created int64
	var flushed sql.NullInt64
	var errJSON, resJSON sql.NullString
	if err := row.Scan(&o.LocalSeq, &o.ID, &o.OriginDevice, &o.OriginLabel, &o.Tool, &payload, &o.Wing, &o.State, &o.Attempts, &next, &created, &flushed, &errJSON, &resJSON, &o.MaybeApplied); err != nil {
		return Op{}, err
	}
	o.Payload = json.RawMessage(payload)
	o.NextAttemptAt, o.CreatedAt = time.UnixMilli(next), time.UnixMilli(created)
	if flushed.Valid {
		t := time.UnixMilli(flushed.Int64)
		o.FlushedAt = &t
	}
	if errJSON.Valid {
		o.Error = json.RawMessage(errJSON.String)
	}
	if resJSON.Valid {
		o.Result = json.RawMessage(resJSON.String)
	}
	return o, nil
}

// Get returns one op by local_seq.
func (s *Store) Get(ctx context.Context, seq int64) (Op, error) {
	return scanOp(s.db.QueryRowContext(ctx, `SELECT `+opCols+` FROM ops WHERE local_seq=?`, seq))
}

// GetByID returns one op by op_id (or a unique prefix of it).
func (s *Store) GetByID(ctx context.Context, id string) (Op, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+opCols+` FROM ops WHERE op_id LIKE ? || '%' LIMIT 2`, id)
	if err != nil {
		return Op{}, err
	}
	defer rows.Close() // read only: its error says nothing
	var found []Op
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return Op{}, err
		}
		found = append(found, o)
	}
	switch len(found) {
	case 0:
		return Op{}, fmt.Errorf("no op %q in the outbox", id)
	case 1:
		return found[0], nil
	}
	return Op{}, fmt.Errorf("op id %q is ambiguous; give more characters", id)
}

// List returns ops in local_seq order; states filters (none: all but done).
func (s *Store) List(ctx context.Context, limit int, states ...State) ([]Op, error) {
	if len(states) == 0 {
		states = []State{Queued, Inflight, Dead}
	}
	q := `SELECT ` + opCols + ` FROM ops WHERE state IN (` + strings.TrimSuffix(strings.Repeat("?,", len(states)), ",") + `) ORDER BY local_seq LIMIT ?`
	args := []any{}
	for _, st := range states {
		args = append(args, string(st))
	}
	rows, err := s.db.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close() // read only: its error says nothing
	var out []Op
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Retry puts a dead (or waiting) op back at the front of the queue with its
// attempts reset. Operator command.
func (s *Store) Retry(ctx context.Context, id string) (Op, error) {
	o, err := s.GetByID(ctx, id)
	if err != nil {
		return Op{}, err
	}
	if o.State == Done {
		return o, fmt.Errorf("op %s already reached the primary", o.ID[:12])
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE ops SET state='queued', attempts=0, next_attempt_at=0 WHERE local_seq=?`, o.LocalSeq); err != nil {
		return Op{}, err
	}
	s.Kick()
	return s.Get(ctx, o.LocalSeq)
}

// Drop removes an op that will never be sent (a dead one, or a queued one
// the operator gives up on): the only way an op leaves the queue unsent.
// It is marked dead with a "dropped" error and skipped from then on.
func (s *Store) Drop(ctx context.Context, id string) (Op, error) {
	o, err := s.GetByID(ctx, id)
	if err != nil {
		return Op{}, err
	}
	if o.State == Done {
		return o, fmt.Errorf("op %s already reached the primary", o.ID[:12])
	}
	e, _ := json.Marshal(map[string]any{"kind": "dropped", "message": "dropped by the operator", "at": s.now().UTC()}) // plain values: they encode
	if _, err := s.db.ExecContext(ctx, `UPDATE ops SET state='done', error_json=?, flushed_at=NULL WHERE local_seq=?`, string(e), o.LocalSeq); err != nil {
		return Op{}, err
	}
	s.notify(o.ID)
	s.Kick()
	return s.Get(ctx, o.LocalSeq)
}

// Stats summarises the queue for `edge status`.
type Stats struct {
	ByState      map[State]int `json:"by_state"`
	OldestQueued *time.Time    `json:"oldest_queued,omitempty"`
	LastFlush    *time.Time    `json:"last_flush,omitempty"`
	LastError    string        `json:"last_error,omitempty"`
	Dead         []Op          `json:"dead,omitempty"`
	FlushOwner   string        `json:"flush_owner,omitempty"`
}

// Stats reads the queue's state; any read that fails is the error.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByState: map[State]int{Queued: 0, Inflight: 0, Done: 0, Dead: 0}}
	if err := s.countByState(ctx, st.ByState); err != nil {
		return st, err
	}
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(created_at) FROM ops WHERE state IN ('queued','inflight')`).Scan(&oldest); err != nil {
		return st, fmt.Errorf("outbox: %w", err)
	}
	if oldest.Valid {
		t := time.UnixMilli(oldest.Int64)
		st.OldestQueued = &t
	}
	lastFlush, err := s.meta(ctx, "last_flush")
	if err != nil {
		return st, err
	}
	if lastFlush != "" {
		t, err := time.Parse(time.RFC3339Nano, lastFlush)
		if err != nil {
			return st, fmt.Errorf("outbox: last_flush %q: %w", lastFlush, err)
		}
		st.LastFlush = &t
	}
	if st.LastError, err = s.meta(ctx, "last_error"); err != nil {
		return st, err
	}
	owner, err := s.meta(ctx, "lease")
	if err != nil {
		return st, err
	}
	if owner != "" {
		var l lease
		if err := json.Unmarshal([]byte(owner), &l); err != nil {
			return st, fmt.Errorf("outbox: lease %q: %w", owner, err)
		}
		if time.UnixMilli(l.Expires).After(s.now()) {
			st.FlushOwner = l.Owner
		}
	}
	st.Dead, err = s.List(ctx, 100, Dead)
	return st, err
}

// countByState counts the ops in each state into by.
func (s *Store) countByState(ctx context.Context, by map[State]int) error {
	rows, err := s.db.QueryContext(ctx, `SELECT state, COUNT(*) FROM ops GROUP BY state`)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer rows.Close() // read only: its error says nothing
	for rows.Next() {
		var k State
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		by[k] = n
	}
	return rows.Err()
}

// Wait blocks until the op reached the primary (done) or died, an attempt
// to send it failed (it is queued with the error: the flusher sends it
// again after its backoff or the primary's recovery), or ctx ends; it returns
// the op as it then is. The flusher may be another process, so the row is
// re-read on every wake and at least every 50 ms.
func (s *Store) Wait(ctx context.Context, opID string) (Op, error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[opID] = append(s.waiters[opID], ch)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		ws := s.waiters[opID]
		for i, w := range ws {
			if w == ch {
				s.waiters[opID] = append(ws[:i], ws[i+1:]...)
			}
		}
		if len(s.waiters[opID]) == 0 {
			delete(s.waiters, opID)
		}
		s.mu.Unlock()
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		o, err := s.GetByID(ctx, opID)
		if err != nil {
			return o, err
		}
		if o.State == Done || o.State == Dead || o.State == Queued && len(o.Error) > 0 {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-ch:
		case <-t.C:
		}
	}
}

func (s *Store) notify(opID string) {
	s.mu.Lock()
	for _, ch := range s.waiters[opID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}
