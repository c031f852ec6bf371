package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// Store is the SQLite outbox.
type Store struct {
	path     string
	db       *sql.DB // synchronous=FULL: enqueue and operator commands
	flushDB  *sql.DB // synchronous=NORMAL: the flusher's bookkeeping
	device   string
	label    string
	primary  string        // Options.Primary
	token    func() string // Options.Token
	identity string        // this file's random identity: a copy of the file takes a new one (loadIdentity)
	copy     *Copied       // a copy a read-only open saw, not given its identity (copy.go)
	now      func() time.Time
	owner    string    // this Store's name in live/ ("": it holds no lock; live.go)
	live     io.Closer // its lock, held until Close

	mu      sync.Mutex
	waiters map[string][]chan struct{}
	joins   map[string]joinRead // the join outboxes beside it, as read last (neversent.go)
	wake    chan struct{}
	kicked  chan struct{} // Kicked: the edge's, beside the flusher's wake
	closed  bool
	rings   sync.WaitGroup // doorbell rings in flight; Close waits for them
	bell    string         // this Store's flusher's doorbell ("": none; ring skips it)
}

// The schema. An op's causal keys are in op_keys only while the op is not
// done, nor dead as refused as written (deadAtOnce): an op may be sent
// when no earlier op shares a key with it.
// auto_vacuum=INCREMENTAL (set before the first table) lets the flusher's
// pruning give the space of old ops back to the file system.
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
  lane            TEXT NOT NULL DEFAULT 'palace',
  ordinal         INTEGER NOT NULL DEFAULT 0,
  state           TEXT NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  refusals        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  flushed_at      INTEGER,
  error_json      TEXT,
  result_json     TEXT,
  maybe_applied   INTEGER NOT NULL DEFAULT 0,
  resend          INTEGER NOT NULL DEFAULT 0,
  owner           TEXT NOT NULL DEFAULT '',
  token_device    TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS ops_dedupe_active ON ops(dedupe_key) WHERE state IN ('queued','inflight');
CREATE INDEX IF NOT EXISTS ops_pending ON ops(lane, local_seq) WHERE state <> 'done';
CREATE INDEX IF NOT EXISTS ops_settled ON ops(flushed_at) WHERE state = 'done';
CREATE INDEX IF NOT EXISTS ops_dead ON ops(local_seq) WHERE state = 'dead';
CREATE INDEX IF NOT EXISTS ops_left_out ON ops(local_seq) WHERE state = 'done' AND tool_name = 'mempalace_checkpoint' AND error_json IS NOT NULL;
CREATE TABLE IF NOT EXISTS op_keys(
  key       TEXT NOT NULL,
  local_seq INTEGER NOT NULL,
  PRIMARY KEY(key, local_seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS op_keys_seq ON op_keys(local_seq);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
` + tombstoneSchema

// FileName is the outbox's file name inside <palace>/edge.
const FileName = "outbox.sqlite"

// Options tune a Store; zero values are the defaults.
type Options struct {
	// Device and Label are the provenance this process stamps on new ops.
	Device, Label string
	// Primary is the URL new ops are queued for, with no credentials
	// (ladder.RedactURL): Enqueue records it (QueuedFor; "": not known).
	Primary string
	// Token is MEMPALACE_REMOTE_TOKEN (nil: none known): the device the
	// gateway names it is kept per token, by a hash (KeepDeviceSeen).
	Token func() string
	// Now is the clock (time.Now).
	Now func() time.Time
	// Log hears of migrations and of a copied file (discarded if nil).
	Log *slog.Logger
	// ReadOnly (doctor) writes nothing to the outbox or beside it: it is
	// opened read only (sqlitewal.OpenReadOnly: its -wal is read, not
	// checkpointed into it; SQLite may make the -shm), one an older build
	// left is not brought to this schema (ErrOlderSchema), a copy keeps the
	// identity it came with, and no liveness lock is taken, nor any room
	// kept; nor is one that does not exist created, nor its mode narrowed.
	ReadOnly bool
	// StatFS tells a full or read-only file system from a damaged file
	// when the open fails (DiskSpace if nil).
	StatFS StatFS
}

// Open opens (creating if needed) the outbox at path. device and label are
// the provenance this process stamps on new ops.
func Open(path, device, label string) (*Store, error) {
	return OpenOptions(path, Options{Device: device, Label: label})
}

// OpenOptions is Open with every option.
func OpenOptions(path string, o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	open := func(sync string) (*sql.DB, error) {
		return sqlitewal.OpenReadOnly(path) // nothing written, nor checkpointed on close
	}
	if o.ReadOnly {
		if err := o.writable(path); err != nil {
			return nil, err
		}
	} else {
		pragmas, err := o.prepare(path)
		if err != nil {
			return nil, err
		}
		open = func(sync string) (*sql.DB, error) {
			return sqlitewal.Open(path, sync, pragmas...)
		}
	}
	db, err := open("FULL")
	if err != nil {
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	s := &Store{path: path, db: db, device: o.Device, label: o.Label, primary: o.Primary, token: o.Token, now: o.Now, waiters: map[string][]chan struct{}{}, wake: make(chan struct{}, 1), kicked: make(chan struct{}, 1)}
	if err := sqlitewal.RetryBusy(func() error { return s.setUp(o) }); err != nil {
		db.Close() // the set-up's error is the one to report
		return nil, o.fault(path, "outbox %s is not a usable SQLite database: %w", err)
	}
	var ok string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&ok); err != nil || ok != "ok" {
		db.Close() // the check's error is the one to report
		if se := o.storageFault(path, err); err != nil && se != nil {
			return nil, se
		}
		return nil, fmt.Errorf("outbox %s failed its integrity check (%v %s); move it aside to start a new one", path, err, ok)
	}
	if err := sqlitewal.RetryBusy(func() error { return s.loadIdentity(o) }); err != nil {
		db.Close() // the identity's error is the one to report
		return nil, o.fault(path, "outbox %s: its identity: %w", err)
	}
	if s.flushDB, err = open("NORMAL"); err != nil {
		db.Close() // the open's error is the one to report
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	if !o.ReadOnly {
		s.settleIn(o.Log)
	}
	return s, nil
}

// writable is, for a read-only open, the *StorageError a writing open
// (an edge's) meets: a file system mounted read-only, full, or a file not
// this user's, which the read-only open itself would not meet.
func (o Options) writable(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0) // opened, nothing written
	if err == nil {
		f.Close() // nothing written
	}
	se := o.storageFault(path, err)
	if se == nil {
		return nil
	}
	if se.Err == nil { // statfs alone said so
		se.Err = errors.New("an edge could not write it")
	}
	return se
}

// prepare makes the file for a writing open (private) and narrows an older
// build's to 0600, and returns the pragmas to open it with.
func (o Options) prepare(path string) ([]string, error) {
	// It holds the agent's writes: owner only.
	if err := sqlitewal.CreatePrivate(path); err != nil {
		return nil, o.fault(path, "outbox %s: %w", err)
	}
	// An older build left it 0644: narrowed, and its -wal and -shm, which
	// SQLite gives the database file's mode only when it creates them.
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := filewrite.Narrow(f, 0o600); err != nil {
			o.Log.Warn("the outbox stays readable by others: it holds the agent's queued writes", "file", f, "err", err, "fix", "chmod 600 "+f)
		}
	}
	// auto_vacuum before anything creates a table, so on a new file only:
	// on one with tables the pragma writes the file's header every time.
	pragmas := []string{"journal_size_limit(4194304)"}
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		pragmas = append(pragmas, "auto_vacuum(INCREMENTAL)")
	}
	return pragmas, nil
}

// settleIn takes this Store's liveness lock, sweeps those of processes
// gone, records the device its ops are made under (copy.go), and keeps
// room for the record of writes a full disk stops.
func (s *Store) settleIn(log *slog.Logger) {
	var err error
	if s.owner, s.live, err = holdLiveness(s.path); err != nil {
		log.Warn("no liveness lock: another edge process on this palace takes this one's unsettled writes and deletes for a killed edge's, and waits for its flush lease to expire", "err", err)
	}
	sweepLive(filepath.Join(filepath.Dir(s.path), liveDir))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := sqlitewal.RetryBusy(func() error { return s.recordDevice(ctx) }); err != nil {
		log.Warn("the outbox's device id is not recorded: a copy of it may be noted under an older one, or none", "err", err)
	}
	if err := sqlitewal.RetryBusy(func() error { return s.noteEntriesSince(ctx) }); err != nil {
		log.Warn("the outbox did not note when it began noting diary entries' writes: merged reads pair this palace's entries with the primary's by text", "err", err)
	}
	if err := reserveStayedLocal(s.path); err != nil {
		log.Warn("no room kept for the record of writes the outbox cannot take (a full disk): if the disk fills, edge status and doctor may not hear of them", "err", err)
	}
}

// fault is an Open's error: ErrOlderSchema as it is, a *StorageError when
// the file system caused it (storageFault), another process's lock held
// past RetryBusy in plain words (PathErr), else format (the path, then
// the error).
func (o Options) fault(path, format string, err error) error {
	if errors.Is(err, ErrOlderSchema) || errors.Is(err, sqlitewal.ErrNewerSchema) {
		return fmt.Errorf("outbox %s: %w", path, err)
	}
	if sqlitewal.Busy(err) {
		return PathErr(path, err)
	}
	if se := o.storageFault(path, err); se != nil {
		return se
	}
	return fmt.Errorf(format, path, err)
}

// PathErr is err from the outbox at path, said plainly when another
// process held its lock past SQLite's busy timeout (attack110 F2).
func PathErr(path string, err error) error {
	if sqlitewal.Busy(err) {
		return fmt.Errorf("outbox %s: another devbox-config process (an edge session or a flush) is using it right now: try again in a moment (SQLite: %w)", path, err)
	}
	return fmt.Errorf("outbox %s: %w", path, err)
}

// storageFault is storageFault with o.StatFS, DiskSpace if nil.
func (o Options) storageFault(path string, err error) *StorageError {
	if o.StatFS == nil {
		return storageFault(path, err, DiskSpace)
	}
	return storageFault(path, err, o.StatFS)
}

// Close waits for the doorbell rings in flight, then closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.rings.Wait()
	err := errors.Join(s.flushDB.Close(), s.db.Close())
	if s.live != nil { // last: until then this Store may write what names it
		os.Remove(filepath.Join(filepath.Dir(s.path), liveDir, s.owner)) // its lock is still held: nobody took it for gone
		err = errors.Join(err, s.live.Close())
		s.live = nil // a second Close lets go of nothing
	}
	return err
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Meta reads an edge-wide value ("" if unset).
func (s *Store) Meta(ctx context.Context, key string) (string, error) {
	return querierMeta(ctx, s.db, key)
}

func setMeta(ctx context.Context, db querier, key, value string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`, key, value)
	return err
}

// metaQueuedFor is the meta key of the primary the outbox's ops were
// queued for (Options.Primary; the last one an op was queued for).
const metaQueuedFor = "queued_for"

// recordQueuedFor notes in tx the primary an op is queued for; it writes
// only when that changes.
func (s *Store) recordQueuedFor(ctx context.Context, tx querier) error {
	if s.primary == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value WHERE value IS NOT excluded.value`, metaQueuedFor, s.primary)
	return err
}

// SetMeta stores an edge-wide value (embedder state, primary tool list).
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	return setMeta(ctx, s.db, key, value)
}

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
		v = "ledger: the primary's gateway de-duplicates every send by op id; an op that may have landed is sent again under it, and looked up only when the gateway holds it in doubt"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.SetMeta(ctx, metaProtection, v+" (seen "+s.now().UTC().Format(time.RFC3339)+")")
}

// Protection is what RecordProtection last noted ("" before any answer).
func (s *Store) Protection(ctx context.Context) string {
	v, _ := s.Meta(ctx, metaProtection) // unreadable reads as not known yet
	return v
}
