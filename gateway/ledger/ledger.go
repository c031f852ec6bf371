package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/sqlitewal"
)

// Defaults.
const (
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultStaleAfter = 2 * time.Minute
	// PruneEvery is the most often a claim prunes expired rows.
	PruneEvery = time.Hour
	// staleGrace separates the holder's forward deadline (StaleAfter from
	// its claim) from a takeover, so the two never overlap.
	staleGrace = 5 * time.Second
)

// Answer is what the upstream answered a forwarded call with.
type Answer struct {
	Status int    // HTTP status
	Body   []byte // the JSON-RPC response
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
	// OutcomeJoined: a duplicate that arrived while the first was in
	// flight in this process; it got the first one's answer.
	OutcomeJoined Outcome = "joined"
)

// ErrReused is returned when an op id already stands for another write
// (another tool or other arguments) from the same device.
var ErrReused = errors.New("op id already used for a different write")

// ErrUnavailable wraps a failure to read or write the ledger itself;
// forward was not run.
var ErrUnavailable = errors.New("op-id ledger unavailable")

var errAbandoned = errors.New("ledger: the first copy of this call ended without an answer")

// Call identifies one tools/call for the ledger.
type Call struct {
	Device string // the authenticated device id
	OpID   string // from OpIDOf
	Tool   string
	// ArgsDigest is any stable digest of the call's arguments (the audit
	// log's args_digest); a reuse of the op id with another digest is
	// refused.
	ArgsDigest string
	// RequestID is this request's JSON-RPC id: a replayed or joined answer
	// carries it in place of the first request's.
	RequestID json.RawMessage
}

// Options tune a Ledger; zero values are the defaults.
type Options struct {
	Retention time.Duration // how long a row is kept (DefaultRetention)
	// StaleAfter bounds a forward (its context ends then) and is when an
	// inflight row may be claimed again (+5 s; DefaultStaleAfter): set it
	// above the longest write an op id may carry.
	StaleAfter time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// Ledger is the durable op-id ledger. It is safe for concurrent use, and
// several Ledgers (processes) may share one file.
type Ledger struct {
	path     string
	db       *sql.DB
	stmt     statements
	opt      Options
	instance string
	claims   atomic.Uint64

	bgdb       *sql.DB // the background connection: checkpoints
	bg         sync.WaitGroup
	lastPrune  atomic.Int64 // unix ms
	commits    atomic.Int64 // since the last checkpoint began
	ckptBusy   atomic.Bool
	ckptBehind atomic.Bool // the WAL has not restarted for long: the next checkpoint waits for writers

	mu      sync.Mutex
	flights map[key]*flight
}

type key struct{ device, opID string }

// flight is a call in progress in this process; duplicates wait on done.
type flight struct {
	call  Call
	done  chan struct{}
	ans   Answer
	out   Outcome
	err   error
	claim string // the claim token, once the key is taken
}

// A rowid table: rows are appended in time order, so the pruning needs no
// index of its own (the expired rows are the first ones), and the only
// randomly placed write is the small (device, op_id) index entry.
const schema = `
CREATE TABLE IF NOT EXISTS ops(
  device      TEXT NOT NULL,
  op_id       TEXT NOT NULL,
  tool        TEXT NOT NULL,
  args_digest TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('inflight','open','done')),
  claim       TEXT NOT NULL DEFAULT '',
  result      TEXT,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS ops_key ON ops(device, op_id);
`

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
	if opt.Retention == 0 {
		opt.Retention = DefaultRetention
	}
	if opt.StaleAfter == 0 {
		opt.StaleAfter = DefaultStaleAfter
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	// It holds the upstream's answers: owner only (SQLite gives the -wal
	// and -shm files the database file's mode).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	f.Close()
	// WAL + synchronous=NORMAL: a commit is not fsynced, a process crash
	// loses nothing (see doc.go for a power cut). No automatic checkpoint:
	// its fsyncs would land on the request whose commit crossed the
	// threshold (tens of ms on a busy disk); checkpoint runs them in the
	// background on a connection of its own.
	// busy_timeout first, so that switching a new file to WAL waits for
	// another process doing the same; _txlock=immediate, so that creating
	// the schema takes the write lock at BEGIN (waiting), not on upgrading
	// a read, which SQLite refuses at once when another process wrote
	// first (both found by TestTwoOSProcessesOneFile).
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)&_txlock=immediate"
	var id [8]byte
	rand.Read(id[:])
	l := &Ledger{path: path, opt: opt, instance: hex.EncodeToString(id[:]), flights: map[key]*flight{}}
	for _, db := range []**sql.DB{&l.db, &l.bgdb} {
		if *db, err = sql.Open("sqlite", dsn); err != nil {
			l.Close()
			return nil, fmt.Errorf("ledger %s: %w", path, err)
		}
		(*db).SetMaxOpenConns(1)
	}
	// Another gateway opening the same fresh file can make it busy.
	err = sqlitewal.RetryBusy(l.createSchema)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("ledger %s is not a usable SQLite database: %w", path, err)
	}
	var ok string
	if err := l.db.QueryRow("PRAGMA quick_check").Scan(&ok); err != nil || ok != "ok" {
		l.Close()
		return nil, fmt.Errorf("ledger %s failed its integrity check (%v %s); move it aside to start a new one", path, err, ok)
	}
	if err := l.prepare(); err != nil {
		l.Close()
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	if err := l.prune(context.Background()); err != nil {
		l.Close()
		return nil, fmt.Errorf("ledger %s: pruning expired rows: %w", path, err)
	}
	return l, nil
}

// Close waits for a prune or checkpoint in progress and closes the
// database.
func (l *Ledger) Close() error {
	l.bg.Wait()
	for _, st := range []*sql.Stmt{l.stmt.insert, l.stmt.get, l.stmt.take, l.stmt.done, l.stmt.reopen} {
		if st != nil {
			st.Close()
		}
	}
	if l.bgdb != nil {
		l.bgdb.Close()
	}
	if l.db == nil {
		return nil
	}
	return l.db.Close() // the last connection to close checkpoints the WAL
}

func (l *Ledger) createSchema() error {
	tx, err := l.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(schema); err != nil {
		return err
	}
	return tx.Commit()
}

// statements are the ledger's queries, prepared once (a fresh op runs
// two of them; preparing each time was a visible share of its cost).
type statements struct {
	insert, get, take, done, reopen *sql.Stmt
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
		insert: prep(`INSERT INTO ops(device, op_id, tool, args_digest, state, claim, created_at, updated_at)
			VALUES(?,?,?,?,'inflight',?,?,?) ON CONFLICT DO NOTHING`),
		get: prep(`SELECT tool, args_digest, state, result FROM ops WHERE device=? AND op_id=?`),
		take: prep(`UPDATE ops SET state='inflight', claim=?, updated_at=?
			WHERE device=? AND op_id=? AND (state='open' OR (state='inflight' AND updated_at < ?))`),
		done:   prep(`UPDATE ops SET state='done', claim='', result=?, updated_at=? WHERE device=? AND op_id=? AND claim=?`),
		reopen: prep(`UPDATE ops SET state='open', claim='', updated_at=? WHERE device=? AND op_id=? AND claim=?`),
	}
	return err
}

// Path is the database file.
func (l *Ledger) Path() string { return l.path }

// Do answers one tools/call carrying an op id. The first call with
// (c.Device, c.OpID) runs forward (the upstream call) and records its
// answer if the answer says the write was applied; a later one gets the
// recorded answer, under its own request id, without running forward; a
// duplicate while the first is in flight waits for it.
//
// forward must use the context it is given: it is not cancelled when ctx
// is (the answer is recorded even if the caller has hung up), only after
// Options.StaleAfter. An error from forward (a transport failure) is
// returned as it is and nothing is recorded. ErrReused refuses a reuse of
// the op id; ErrUnavailable means the ledger could not be consulted and
// forward was not run. An answer that could not be recorded is returned
// with OutcomeUnrecorded and logged, not as an error: the write is made.
func (l *Ledger) Do(ctx context.Context, c Call, forward func(context.Context) (Answer, error)) (Answer, Outcome, error) {
	if c.Device == "" {
		return Answer{}, "", errors.New("ledger: a call needs a device")
	}
	if err := checkOpID(c.OpID); err != nil {
		return Answer{}, "", fmt.Errorf("ledger: op id: %w", err)
	}
	k := key{c.Device, c.OpID}
	for {
		l.mu.Lock()
		f := l.flights[k]
		if f == nil {
			// errAbandoned stands if forward panics: the duplicates waiting
			// are released with an error, not an empty answer.
			f = &flight{call: c, done: make(chan struct{}), err: errAbandoned}
			l.flights[k] = f
			l.mu.Unlock()
			defer func() {
				if f.err == errAbandoned && f.claim != "" {
					// Reopen the key at once rather than after StaleAfter.
					l.settle(context.WithoutCancel(ctx), c, f.claim, nil)
				}
				l.mu.Lock()
				delete(l.flights, k)
				l.mu.Unlock()
				close(f.done)
			}()
			f.ans, f.out, f.err = l.lead(ctx, c, forward, &f.claim)
			return f.ans, f.out, f.err
		}
		l.mu.Unlock()
		if err := sameWrite(f.call, c); err != nil {
			return Answer{}, "", err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Answer{}, "", ctx.Err()
		}
		if f.err != nil {
			if isCtxErr(f.err) && ctx.Err() == nil {
				continue // the first caller gave up waiting; this one has not
			}
			return Answer{}, "", f.err
		}
		return Answer{Status: f.ans.Status, Body: WithID(f.ans.Body, c.RequestID)}, OutcomeJoined, nil
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func sameWrite(first, c Call) error {
	if first.Tool != c.Tool || first.ArgsDigest != c.ArgsDigest {
		what := "other arguments"
		if first.Tool != c.Tool {
			what = "tool " + first.Tool
		}
		return fmt.Errorf("ledger: device %s, op id %s: %w (first used with %s; now %s)", c.Device, c.OpID, ErrReused, what, c.Tool)
	}
	return nil
}

// lead is Do for the first caller of a key in this process.
func (l *Ledger) lead(ctx context.Context, c Call, forward func(context.Context) (Answer, error), claimed *string) (Answer, Outcome, error) {
	claim, recorded, err := l.claim(ctx, c)
	if err != nil {
		return Answer{}, "", err
	}
	*claimed = claim
	if recorded != nil {
		return Answer{Status: 200, Body: response(c.RequestID, recorded)}, OutcomeReplayed, nil
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opt.StaleAfter)
	ans, ferr := forward(fctx)
	cancel()
	// Bookkeeping survives the caller hanging up, so no row stays inflight
	// (busy_timeout bounds it).
	bctx := context.WithoutCancel(ctx)
	result, ok := Recordable(ans)
	if ferr == nil && ok {
		if err := l.settle(bctx, c, claim, result); err != nil {
			l.opt.Log.Error("op-id ledger: answer not recorded; a retry will be forwarded again", "device", c.Device, "op_id", c.OpID, "err", err)
			return ans, OutcomeUnrecorded, nil
		}
		return ans, OutcomeForwarded, nil
	}
	if err := l.settle(bctx, c, claim, nil); err != nil {
		l.opt.Log.Error("op-id ledger: claim not released; a retry waits until it is stale", "device", c.Device, "op_id", c.OpID, "err", err)
	}
	if ferr != nil {
		return Answer{}, "", ferr
	}
	return ans, OutcomeUnrecorded, nil
}

// claim takes the key for this process (returning its claim token) or
// returns the recorded result. It waits, polling, while another process
// holds a fresh claim.
func (l *Ledger) claim(ctx context.Context, c Call) (claim string, recorded []byte, err error) {
	claim = fmt.Sprintf("%s-%d", l.instance, l.claims.Add(1))
	wait := 2 * time.Millisecond
	// Each statement is short and bounded by busy_timeout; a cancellable
	// context would cost the driver a watcher goroutine per statement.
	// ctx ends the wait between polls.
	sctx := context.WithoutCancel(ctx)
	for {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		now := l.opt.Now().UnixMilli()
		res, err := l.stmt.insert.ExecContext(sctx, c.Device, c.OpID, c.Tool, c.ArgsDigest, claim, now, now)
		if err != nil {
			return "", nil, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			l.committed()
			l.maybePrune(now)
			return claim, nil, nil
		}
		var first Call
		var state string
		var result sql.NullString
		err = l.stmt.get.QueryRowContext(sctx, c.Device, c.OpID).
			Scan(&first.Tool, &first.ArgsDigest, &state, &result)
		if errors.Is(err, sql.ErrNoRows) {
			continue // pruned between the two statements
		}
		if err != nil {
			return "", nil, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if err := sameWrite(first, c); err != nil {
			return "", nil, err
		}
		if state == "done" {
			return "", []byte(result.String), nil
		}
		res, err = l.stmt.take.ExecContext(sctx, claim, now, c.Device, c.OpID, now-(l.opt.StaleAfter+staleGrace).Milliseconds())
		if err != nil {
			return "", nil, fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			l.committed()
			return claim, nil, nil
		}
		// Another process is forwarding it: wait for its answer.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// settle ends a claim: records result (state done) or, with none, opens
// the key again. A claim taken over in the meantime is left alone.
func (l *Ledger) settle(ctx context.Context, c Call, claim string, result []byte) error {
	now := l.opt.Now().UnixMilli()
	var err error
	if result != nil {
		_, err = l.stmt.done.ExecContext(ctx, string(result), now, c.Device, c.OpID, claim)
	} else {
		_, err = l.stmt.reopen.ExecContext(ctx, now, c.Device, c.OpID, claim)
	}
	if err != nil {
		return fmt.Errorf("ledger %s: %w: %w", l.path, ErrUnavailable, err)
	}
	l.committed()
	return nil
}

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
