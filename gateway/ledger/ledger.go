package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/sqlitewal"
)

// Defaults.
const (
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultStaleAfter = 2 * time.Minute
	// PruneEvery is the most often a claim prunes expired rows.
	PruneEvery = time.Hour
	// DefaultStaleGrace separates the holder's forward deadline
	// (StaleAfter from its claim) from "in doubt", so the two never
	// overlap: the holder has settled its claim by then if it is alive.
	DefaultStaleGrace = 5 * time.Second
)

// Answer is what the upstream answered a forwarded call with.
type Answer struct {
	Status int    // HTTP status
	Body   []byte // the JSON-RPC response
	// MaybeApplied: the call reached the upstream and no answer came
	// back (the forward's own judgement: the request was written, the
	// connection then failed). The op is then in doubt, not open again.
	MaybeApplied bool
	// RecordOf, on an answer replayed from the record of another device
	// (the same write, filed under the device the call said it was queued
	// as, or by a device that said it was queued as the caller: Call.QueuedAs),
	// is that device; "" otherwise.
	RecordOf string
}

// Outcome says how Do answered.
type Outcome string

const (
	// OutcomeForwarded: the first call with the op id; forwarded, and its
	// answer recorded.
	OutcomeForwarded Outcome = "forwarded"
	// OutcomeUnrecorded: forwarded, but the answer says the write was not
	// applied (or could not be recorded), so the next attempt is forwarded
	// again.
	OutcomeUnrecorded Outcome = "unrecorded"
	// OutcomeReplayed: answered from the record; the upstream was not
	// called.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeResent: an op in doubt (its claim outlived its holder: a
	// gateway that stopped mid-forward) forwarded again because the
	// caller said it may be (Call.Resend).
	OutcomeResent Outcome = "resent"
)

// ErrReused is returned when an op id already stands for another write
// (another tool or other arguments) from the same device.
var ErrReused = errors.New("op id already used for a different write")

// ErrUnavailable wraps a failure to read or write the ledger itself;
// forward was not run.
var ErrUnavailable = errors.New("op-id ledger unavailable")

// ErrInFlight: the op id is being forwarded now (by this gateway or
// another sharing the file). Retryable; the caller holds nothing while it
// waits.
var ErrInFlight = errors.New("op id in flight: being forwarded now")

// ErrInDoubt: the op id reached the upstream without an answer coming
// back: its answer was lost (the forward said MaybeApplied), or it was in
// flight when its gateway stopped (its claim outlived StaleAfter and the
// grace). The upstream may have applied it.
// It is forwarded again only on a call that says why it may be
// (Call.Resend: the caller looked it up and it is not there, or an
// operator said to).
var ErrInDoubt = errors.New("op id in doubt: it reached the upstream without an answer (lost, or its gateway stopped), and may have been applied")

// Call identifies one tools/call for the ledger.
type Call struct {
	Device string // the authenticated device id
	OpID   string // from OpIDOf
	Tool   string
	// ArgsDigest is any stable digest of the call's arguments (the
	// gateway's: keyed, of the arguments alone); a reuse of the op id with
	// another digest is refused.
	ArgsDigest string
	// LegacyDigest, when set, is another digest of the same arguments a
	// row written by an earlier gateway may hold (the unkeyed one, before
	// args_digest was keyed): such a row matches it too, so that a resend
	// across the upgrade is not refused as a reuse.
	LegacyDigest string
	// RequestID is this request's JSON-RPC id: a replayed answer carries
	// it in place of the first request's.
	RequestID json.RawMessage
	// Resend is why a caller sends an op that may have landed again
	// (params._meta ResendKey): an op in doubt is forwarded only with it.
	Resend string
	// QueuedAs is the device the call says its op was queued as
	// (params._meta QueuedAsKey: an edge's retry of an op it held as
	// another device's, on a renamed devbox or a copy of one), "" for
	// none. It only finds a record of the same write under that device,
	// or under another device naming the same one, to answer from, and
	// is kept on the caller's row so that a later send of the op by that
	// device, or by another naming it, finds this one's (kin): the row is
	// the caller's, and a claim whose device filed no such write is as
	// if it were not there.
	QueuedAs string
}

// Options tune a Ledger; zero values are the defaults.
type Options struct {
	Retention time.Duration // how long a row is kept (DefaultRetention)
	// StaleAfter bounds a forward (its context ends then); an inflight row
	// older than StaleAfter+StaleGrace outlived its holder and is in doubt
	// (DefaultStaleAfter, DefaultStaleGrace): set it above the longest
	// write an op id may carry.
	StaleAfter, StaleGrace time.Duration
	Now                    func() time.Time
	Log                    *slog.Logger
}

// Ledger is the durable op-id ledger. It is safe for concurrent use, and
// several Ledgers (processes) may share one file.
type Ledger struct {
	path     string
	db       *sql.DB
	stmt     statements
	opt      Options
	instance string
	live     *os.File // the instance's lock (live.go; nil: none could be had)
	claims   atomic.Uint64

	bgdb       *sql.DB // the background connection: checkpoints
	bg         sync.WaitGroup
	lastPrune  atomic.Int64 // unix ms
	commits    atomic.Int64 // since the last checkpoint began
	ckptBusy   atomic.Bool
	ckptBehind atomic.Bool // the WAL has not restarted for long: the next checkpoint waits for writers

}

// SchemaVersion is the ledger's PRAGMA user_version (0: a ledger made
// before it was recorded): raise it with every change to schema.
const SchemaVersion = 2

// A rowid table: rows are appended in time order, so the pruning needs no
// index of its own (the expired rows are the first ones), and the only
// randomly placed write is the small (device, op_id) index entry.
const schema = `
CREATE TABLE IF NOT EXISTS ops(
  device      TEXT NOT NULL,
  op_id       TEXT NOT NULL,
  tool        TEXT NOT NULL,
  args_digest TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('inflight','open','done','doubt')),
  claim       TEXT NOT NULL DEFAULT '',
  result      TEXT,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  held        INTEGER NOT NULL DEFAULT 0, -- Held: the op's first send found its record there
  seen_before TEXT NOT NULL DEFAULT '', -- NoteBefore: what the op's first send found before it was sent
  queued_as   TEXT -- Call.QueuedAs: the device the op says it was queued as (NULL: none)
);
CREATE UNIQUE INDEX IF NOT EXISTS ops_key ON ops(device, op_id);
`

// queuedAsIndex finds the rows that say their op was queued as a device
// (kin): only those few are in it. Made after the column's migration.
const queuedAsIndex = `CREATE INDEX IF NOT EXISTS ops_queued_as ON ops(op_id, queued_as) WHERE queued_as IS NOT NULL`

// Open opens (creating if needed) the ledger at path with the given
// retention (0: DefaultRetention) and prunes expired rows.
func Open(path string, retention time.Duration) (*Ledger, error) {
	return OpenOptions(path, Options{Retention: retention})
}

// OpenOptions is Open with every option.
func OpenOptions(path string, opt Options) (*Ledger, error) {
	if opt.Retention < 0 || opt.StaleAfter < 0 {
		return nil, fmt.Errorf("ledger %s: retention and stale bound must not be negative", path)
	}
	opt.Retention = cmp.Or(opt.Retention, DefaultRetention)
	opt.StaleAfter = cmp.Or(opt.StaleAfter, DefaultStaleAfter)
	opt.StaleGrace = cmp.Or(opt.StaleGrace, DefaultStaleGrace)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	// It holds the upstream's answers: owner only.
	err := sqlitewal.CreatePrivate(path)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	// WAL + synchronous=NORMAL: a commit is not fsynced, a process crash
	// loses nothing (see doc.go for a power cut). No automatic checkpoint:
	// its fsyncs would land on the request whose commit crossed the
	// threshold (tens of ms on a busy disk); checkpoint runs them in the
	// background on a connection of its own.
	l := &Ledger{path: path, opt: opt}
	if l.instance, l.live, err = holdLive(path); err != nil {
		opt.Log.Warn("op-id ledger: no lock names this process, so an op it leaves in flight at a crash waits out StaleAfter before it is in doubt", "dir", liveDir(path), "err", err)
	}
	for _, db := range []**sql.DB{&l.db, &l.bgdb} {
		if *db, err = sqlitewal.Open(path, "NORMAL", "wal_autocheckpoint(0)"); err != nil {
			l.Close() // the open's error is the one to report
			return nil, fmt.Errorf("ledger %s: %w", path, err)
		}
	}
	// Another gateway opening the same fresh file can make it busy.
	err = sqlitewal.RetryBusy(func() error {
		return sqlitewal.Versioned(l.db, "op-id ledger", path, SchemaVersion, opt.Log, createSchema)
	})
	switch {
	case errors.Is(err, sqlitewal.ErrNewerSchema):
		l.Close() // the version's error is the one to report
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	case err != nil:
		l.Close() // the open's error is the one to report
		return nil, fmt.Errorf("ledger %s is not a usable SQLite database: %w", path, err)
	}
	var ok string
	if err := l.db.QueryRow("PRAGMA quick_check").Scan(&ok); err != nil || ok != "ok" {
		l.Close() // the open's error is the one to report
		return nil, fmt.Errorf("ledger %s failed its integrity check (%v %s); move it aside to start a new one", path, err, ok)
	}
	if err := l.prepare(); err != nil {
		l.Close() // the open's error is the one to report
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	if err := l.prune(context.Background()); err != nil {
		l.Close() // the open's error is the one to report
		return nil, fmt.Errorf("ledger %s: pruning expired rows: %w", path, err)
	}
	return l, nil
}

// Close waits for a prune or checkpoint in progress and closes the
// database.
func (l *Ledger) Close() error {
	l.bg.Wait()
	if l.live != nil {
		os.Remove(l.live.Name()) // gone either way: missing or unlocked
		l.live.Close()           // a lock file: closing it releases the lock
	}
	for _, st := range []*sql.Stmt{l.stmt.insert, l.stmt.get, l.stmt.take, l.stmt.done, l.stmt.reopen, l.stmt.doubt, l.stmt.held, l.stmt.before, l.stmt.kin} {
		if st != nil {
			st.Close() // a statement: closing it frees memory only
		}
	}
	if l.bgdb != nil {
		l.bgdb.Close() // read and checkpoint only: the main connection's close reports
	}
	if l.db == nil {
		return nil
	}
	return l.db.Close() // the last connection to close checkpoints the WAL
}

// createSchema creates the schema, or brings a ledger made by an older
// build up to it (in sqlitewal.Versioned's transaction).
func createSchema(tx *sql.Tx) error {
	var old string
	if err := tx.QueryRow(`SELECT COALESCE((SELECT sql FROM sqlite_master WHERE type='table' AND name='ops'), '')`).Scan(&old); err != nil {
		return err
	}
	if old != "" && !strings.Contains(old, "'doubt'") {
		// A ledger from before the doubt state: rebuilt in rowid order
		// (pruning relies on it), every row kept.
		for _, q := range []string{`DROP INDEX IF EXISTS ops_key`, `ALTER TABLE ops RENAME TO ops_v1`, schema,
			`INSERT INTO ops(device, op_id, tool, args_digest, state, claim, result, created_at, updated_at)
				SELECT device, op_id, tool, args_digest, state, claim, result, created_at, updated_at FROM ops_v1 ORDER BY rowid`,
			`DROP TABLE ops_v1`} {
			if _, err := tx.Exec(q); err != nil {
				return fmt.Errorf("migrating the ledger: %w", err)
			}
		}
	} else if _, err := tx.Exec(schema); err != nil {
		return err
	}
	for _, c := range []struct{ name, def string }{
		{"held", "INTEGER NOT NULL DEFAULT 0"},      // before Held: its ops' first sends found nothing
		{"seen_before", "TEXT NOT NULL DEFAULT ''"}, // before NoteBefore: its first sends noted nothing
		{"queued_as", "TEXT"},                       // before Call.QueuedAs: no op said it
	} {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info('ops') WHERE name=?`, c.name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if _, err := tx.Exec(`ALTER TABLE ops ADD COLUMN ` + c.name + ` ` + c.def); err != nil {
			return fmt.Errorf("migrating the ledger: %w", err)
		}
	}
	if _, err := tx.Exec(queuedAsIndex); err != nil {
		return fmt.Errorf("migrating the ledger: %w", err)
	}
	return nil
}

// statements are the ledger's queries, prepared once (a fresh op runs
// two of them; preparing each time was a visible share of its cost).
type statements struct {
	insert, get, take, done, reopen, doubt, held, before, kin *sql.Stmt
}

func (l *Ledger) prepare() error {
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = l.db.Prepare(q)
		return st
	}
	l.stmt = statements{
		insert: prep(`INSERT INTO ops(device, op_id, tool, args_digest, state, claim, created_at, updated_at, queued_as)
			VALUES(?,?,?,?,'inflight',?,?,?,NULLIF(?, '')) ON CONFLICT DO NOTHING`),
		// The same write (tool, digest) under the device a call says its
		// op was queued as, and under devices whose rows say theirs was
		// queued as the caller's or as the same device (kin).
		kin: prep(`SELECT device, state, claim, result, updated_at FROM ops
			WHERE device=?1 AND op_id=?2 AND device<>?3 AND tool=?4 AND args_digest IN (?5, ?6) AND state<>'open'
			UNION ALL SELECT device, state, claim, result, updated_at FROM ops
			WHERE op_id=?2 AND queued_as IN (?3, ?1) AND device<>?3 AND tool=?4 AND args_digest IN (?5, ?6) AND state<>'open'`),
		get: prep(`SELECT tool, args_digest, state, claim, result, updated_at, held, seen_before FROM ops WHERE device=? AND op_id=?`),
		// A send after one that was not applied (open) is a first send
		// again: it looks again (held), with nothing noted: reopen clears
		// the note, so a gateway from before notes that takes an open row
		// leaves none behind (review25 finding 4).
		take: prep(`UPDATE ops SET state='inflight', claim=?, updated_at=?, held = held AND state<>'open'
			WHERE device=? AND op_id=? AND (state='open' OR (? AND (state='doubt' OR (state='inflight' AND (updated_at < ? OR claim = ?)))))`),
		done:   prep(`UPDATE ops SET state='done', claim='', result=?, updated_at=? WHERE device=? AND op_id=? AND claim=?`),
		reopen: prep(`UPDATE ops SET state='open', claim='', seen_before='', updated_at=? WHERE device=? AND op_id=? AND claim=?`),
		doubt:  prep(`UPDATE ops SET state='doubt', claim='', updated_at=? WHERE device=? AND op_id=? AND claim=?`),
		held:   prep(`UPDATE ops SET held=1 WHERE device=? AND op_id=? AND claim=?`),
		before: prep(`UPDATE ops SET seen_before=? WHERE device=? AND op_id=? AND claim=?`),
	}
	return err
}

// Path is the database file.
func (l *Ledger) Path() string { return l.path }
