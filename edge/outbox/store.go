package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/sqlitewal"
)

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
		db.Close() // the open's error is the one to report
		return nil, fmt.Errorf("outbox %s is not a usable SQLite database: %w", path, err)
	}
	var ok string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&ok); err != nil || ok != "ok" {
		db.Close() // the open's error is the one to report
		return nil, fmt.Errorf("outbox %s failed its integrity check (%v %s); move it aside to start a new one", path, err, ok)
	}
	fdb, err := open("NORMAL")
	if err != nil {
		db.Close() // the open's error is the one to report
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

// Protection meta: what guards this outbox's sends against a repeat.
const metaProtection = "protection"

// RecordProtection notes whether the primary last advertised an op-id
// ledger (a devbox-config gateway: every write exactly once by op id) or
// not (the per-type look-ups alone). s may be nil (no outbox). The note is
// what edge status shows; an error means it shows the last one.
func RecordProtection(s *Store, ledger bool) error {
	if s == nil {
		return nil
	}
	v := "look-ups: the primary advertises no op-id ledger; each record type's look-up guards a repeat"
	if ledger {
		v = "ledger: the primary's gateway de-duplicates every send by op id; look-ups as a second guard"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.SetMeta(ctx, metaProtection, v+" (seen "+s.now().UTC().Format(time.RFC3339)+")")
}

// Protection is what RecordProtection last noted ("" before any answer).
func (s *Store) Protection(ctx context.Context) string {
	v, _ := s.meta(ctx, metaProtection) // unreadable reads as not known yet
	return v
}
