// Package outbox is the edge's durable, ordered, replay-safe queue of writes
// bound for the primary (RFC 001 §4.3). It lives in <palace>/edge/
// outbox.sqlite, beside the local palace it mirrors, on the volume that edge
// mode requires to be persisted.
//
// Enqueue commits with synchronous=FULL: the agent was already told its
// write succeeded. The flusher's bookkeeping (inflight, done) uses NORMAL on
// its own connection: in WAL mode a process crash loses nothing, and a
// power cut can at worst forget a "done", which the replay rules make safe.
package outbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// State is where an op is in its life: Queued, Inflight, Done or Dead.
type State string

const (
	// Queued: waiting to be sent (again, after a failed attempt).
	Queued State = "queued"
	// Inflight: being sent; after a crash, maybe applied.
	Inflight State = "inflight"
	// Done: the primary has it (or an operator dropped it: Error says).
	Done State = "done"
	// Dead: the primary keeps refusing it; it holds the ops behind it until
	// an operator retries or drops it.
	Dead State = "dead"
)

func (s State) String() string { return string(s) }

// Op is one queued write.
type Op struct {
	LocalSeq      int64           `json:"local_seq"`
	ID            string          `json:"op_id"`
	OriginDevice  string          `json:"origin_device"`
	OriginLabel   string          `json:"origin_label"`
	Tool          string          `json:"tool_name"`
	Payload       json.RawMessage `json:"payload_json"`
	Wing          string          `json:"wing"`
	State         State           `json:"state"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	CreatedAt     time.Time       `json:"created_at"`
	FlushedAt     *time.Time      `json:"flushed_at,omitempty"`
	Error         json.RawMessage `json:"error_json,omitempty"`
	Result        json.RawMessage `json:"result_json,omitempty"`
	// MaybeApplied: an attempt may have landed without an answer (a lost
	// reply, a kill while in flight). It sticks until the op is done: the
	// op is never sent again before a look-up says it is not there.
	MaybeApplied bool `json:"maybe_applied"`
}

// Store is the SQLite outbox.
type Store struct {
	path    string
	db      *sql.DB // synchronous=FULL: enqueue and operator commands
	flushDB *sql.DB // synchronous=NORMAL: the flusher's bookkeeping
	device  string
	label   string
	now     func() time.Time

	mu      sync.Mutex
	waiters map[string][]chan struct{}
	wake    chan struct{}
	closed  bool
	rings   sync.WaitGroup // doorbell rings in flight; Close waits for them
}

const schema = `
CREATE TABLE IF NOT EXISTS ops(
  local_seq       INTEGER PRIMARY KEY AUTOINCREMENT,
  op_id           TEXT NOT NULL UNIQUE,
  dedupe_key      TEXT NOT NULL,
  origin_device   TEXT NOT NULL DEFAULT '',
  origin_label    TEXT NOT NULL DEFAULT '',
  tool_name       TEXT NOT NULL,
  payload_json    TEXT NOT NULL,
  wing            TEXT NOT NULL DEFAULT '',
  state           TEXT NOT NULL CHECK (state IN ('queued','inflight','done','dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  flushed_at      INTEGER,
  error_json      TEXT,
  result_json     TEXT,
  maybe_applied   INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS ops_dedupe_active ON ops(dedupe_key) WHERE state IN ('queued','inflight');
CREATE INDEX IF NOT EXISTS ops_active ON ops(local_seq) WHERE state IN ('queued','inflight','dead');
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
`

// setUp creates or migrates the schema, again while another process
// opening the same fresh file makes it busy (sqlitewal.RetryBusy).
func setUp(db *sql.DB) error {
	return sqlitewal.RetryBusy(func() error {
		if _, err := db.Exec(schema); err != nil {
			return err
		}
		return migrate(db)
	})
}

// migrate brings an outbox made by an older edge up to the schema.
func migrate(db *sql.DB) error {
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('ops') WHERE name='maybe_applied'`).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		// An op an older edge left in flight, or whose last error was
		// ambiguous, may have landed.
		if _, err := db.Exec(`ALTER TABLE ops ADD COLUMN maybe_applied INTEGER NOT NULL DEFAULT 0;
			UPDATE ops SET maybe_applied=1 WHERE state='inflight' OR json_extract(error_json,'$.kind')='ambiguous'`); err != nil {
			return fmt.Errorf("adding maybe_applied: %w", err)
		}
	}
	return nil
}

// FileName is the outbox's file name inside <palace>/edge.
const FileName = "outbox.sqlite"

// Open opens (creating if needed) the outbox at path. device and label are
// the provenance this process stamps on new ops.
func Open(path, device, label string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	open := func(sync string) (*sql.DB, error) {
		// busy_timeout first: switching a fresh file to WAL takes a lock that
		// another process opening it at the same moment may hold.
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		return db, nil
	}
	db, err := open("FULL")
	if err != nil {
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	if err := setUp(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox %s is not a usable SQLite database: %w", path, err)
	}
	var ok string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&ok); err != nil || ok != "ok" {
		db.Close()
		return nil, fmt.Errorf("outbox %s failed its integrity check (%v %s); move it aside to start a new one", path, err, ok)
	}
	fdb, err := open("NORMAL")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	return &Store{path: path, db: db, flushDB: fdb, device: device, label: label, now: time.Now, waiters: map[string][]chan struct{}{}, wake: make(chan struct{}, 1)}, nil
}

// Close waits for the doorbell rings in flight, then closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.rings.Wait()
	return errors.Join(s.flushDB.Close(), s.db.Close())
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Write is one write to queue.
type Write struct {
	// Name is the tool as the agent called it; Tool its catalogue record
	// (the caller's, when it has it; looked up by Name when it is zero).
	Name string
	Tool catalogue.Tool
	// Payload is the arguments to send; Wing the wing they write ("" for
	// none).
	Payload json.RawMessage
	Wing    string
}

// Enqueue adds a write. The op_id is sha256(origin_device, local_seq,
// tool, canonical payload); local_seq is allocated under SQLite's write
// lock, so it stays monotonic across every process sharing the palace.
// Coordination writes get metadata.edge_op_id = op_id stamped into the
// payload, so an ambiguous send can be looked up instead of repeated. An
// identical add_drawer/checkpoint already queued is returned as it is.
func (s *Store) Enqueue(ctx context.Context, w Write) (Op, error) {
	tool, payload, wing, rec := w.Name, w.Payload, w.Wing, w.Tool
	if !rec.Known() {
		rec, _ = catalogue.Lookup(tool)
	}
	canon, err := canonical(payload)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: payload of %s: %w", tool, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	dedupe := ""
	if rec.Replay == catalogue.ServerDeduped {
		dedupe = "content:" + hash(tool, string(canon))
		var existing int64
		if err := tx.QueryRowContext(ctx, `SELECT local_seq FROM ops WHERE dedupe_key=? AND state IN ('queued','inflight')`, dedupe).Scan(&existing); err == nil {
			tx.Rollback()
			return s.Get(ctx, existing)
		}
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name='ops'), 0)`).Scan(&seq); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	seq++
	opID := hash(s.device, fmt.Sprint(seq), tool, string(canon))
	if dedupe == "" {
		dedupe = "op:" + opID
	}
	stored := canon
	if rec.OpStamp {
		if stored, err = stampOpID(canon, opID); err != nil {
			return Op{}, err
		}
	}
	now := s.now()
	_, err = tx.ExecContext(ctx, `INSERT INTO ops(local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, state, created_at)
		VALUES(?,?,?,?,?,?,?,?,'queued',?)`, seq, opID, dedupe, s.device, s.label, tool, string(stored), wing, now.UnixMilli())
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	s.Kick()
	s.ringAll()
	return Op{LocalSeq: seq, ID: opID, OriginDevice: s.device, OriginLabel: s.label, Tool: tool, Payload: stored, Wing: wing, State: Queued, CreatedAt: now}, nil
}

// Kick wakes this process's flusher (Enqueue also rings the doorbell of
// every other process's).
func (s *Store) Kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

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
	defer rows.Close()
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
	defer rows.Close()
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
	e, _ := json.Marshal(map[string]any{"kind": "dropped", "message": "dropped by the operator", "at": s.now().UTC()})
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
	defer rows.Close()
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

func (s *Store) meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key=?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func (s *Store) setMeta(ctx context.Context, db *sql.DB, key, value string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`, key, value)
	return err
}

// SetMeta stores an edge-wide value (embedder state, primary tool list).
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	return s.setMeta(ctx, s.db, key, value)
}

// Meta reads an edge-wide value ("" if unset).
func (s *Store) Meta(ctx context.Context, key string) (string, error) { return s.meta(ctx, key) }

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

// canonical re-encodes JSON with sorted keys and no HTML escaping.
func canonical(raw json.RawMessage) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func stampOpID(canon []byte, opID string) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["edge_op_id"] = opID
	m["metadata"] = meta
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return canonical(b)
}

// Protection meta: what guards this outbox's sends against a repeat.
const metaProtection = "protection"

// RecordProtection notes whether the primary last advertised an op-id
// ledger (a devbox-config gateway: every write exactly once by op id) or
// not (the per-type look-ups alone). s may be nil (no outbox).
func RecordProtection(s *Store, ledger bool) {
	if s == nil {
		return
	}
	v := "look-ups: the primary advertises no op-id ledger; each record type's look-up guards a repeat"
	if ledger {
		v = "ledger: the primary's gateway de-duplicates every send by op id; look-ups as a second guard"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.SetMeta(ctx, metaProtection, v+" (seen "+s.now().UTC().Format(time.RFC3339)+")")
}

// Protection is what RecordProtection last noted ("" before any answer).
func (s *Store) Protection(ctx context.Context) string {
	v, _ := s.meta(ctx, metaProtection)
	return v
}
