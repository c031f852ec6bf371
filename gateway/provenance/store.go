package provenance

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/sqlitewal"
)

// FileName is the index's file name, in the audit log's directory.
const FileName = "provenance.sqlite"

// Beside is the index's default path for a gateway whose audit log is
// auditLog.
func Beside(auditLog string) string { return filepath.Join(filepath.Dir(auditLog), FileName) }

// Stamp is who wrote a record through the gateway.
type Stamp struct {
	Device string // the device id
	Label  string // its label when it wrote
	Agent  string // the agent the write named ("" for facts)
	// Via is the admin device whose join attributed the record to Device,
	// or the device that moved Device's drawer ("" when Device wrote it
	// itself and nobody else moved it).
	Via string
	At  time.Time
}

// Entry is one record to stamp.
type Entry struct {
	Key   Key
	Stamp Stamp
	// Replace: the record's content was rewritten (update_drawer), or the
	// drawer was filed anew (a stamp the index holds is of one deleted
	// since), so the new writer replaces the old; otherwise the first
	// stamp stays.
	Replace bool
}

// SchemaVersion is the index's PRAGMA user_version (0: an index made
// before it was recorded): raise it with every change to schema.
const SchemaVersion = 1

// table is a kind's table and its key columns.
type table struct {
	name string
	cols []string
}

// tables maps each kind to its table.
var tables = map[Kind]table{
	KindDrawer: {"drawers", []string{"id"}},
	KindEvent:  {"events", []string{"id"}},
	KindFact:   {"facts", []string{"subject", "predicate", "object", "valid_from"}},
	KindDiary:  {"diary", []string{"entry_agent", "timestamp", "text_sha256"}},
	KindTunnel: {"tunnels", []string{"id"}},
}

// Store is the gateway's provenance index: a SQLite file, and all of it
// in memory, where every answer's records are looked up.
type Store struct {
	path string
	db   *sql.DB
	// writing is held by Record and Forget from their transaction to
	// their change in memory, and by Refresh from its read to its swap,
	// so a reload read before a stamp's commit cannot replace the map
	// after that stamp went into it.
	writing sync.Mutex

	mu   sync.RWMutex
	m    map[string]Stamp
	strs map[string]string // device ids and labels, held once
	// preds counts the stamped facts of m by predicate and writer, so a
	// kg_stats answer's predicates are told apart by who wrote them
	// (PredicateWrittenBy) without a pass over the index.
	preds map[string]map[writer]int
	// seen is the database's data_version when m was last read whole:
	// another process's commit (a trash restore) changes it (Refresh).
	seen int64
	// walMod and walSize are the write-ahead log's mtime (ns) and size
	// when Fresh last looked.
	walMod, walSize atomic.Int64
}

// Open opens (creating if needed) the index at path and reads it into
// memory. An index an older build made is migrated (logged on log; nil:
// none), and one a newer release made is refused
// (sqlitewal.ErrNewerSchema).
func Open(path string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// It names who wrote what: owner only.
	if err := sqlitewal.CreatePrivate(path); err != nil {
		return nil, fmt.Errorf("provenance index %s: %w", path, err)
	}
	// synchronous=NORMAL: a stamp lost to a power cut leaves its record
	// of unknown origin, which no device that names a trusted set trusts.
	db, err := sqlitewal.Open(path, "NORMAL")
	if err != nil {
		return nil, fmt.Errorf("provenance index %s: %w", path, err)
	}
	s := &Store{path: path, db: db}
	create := func(tx *sql.Tx) error { _, err := tx.Exec(schema()); return err }
	err = sqlitewal.RetryBusy(func() error { return sqlitewal.Versioned(db, "provenance index", path, SchemaVersion, log, create) })
	switch {
	case errors.Is(err, sqlitewal.ErrNewerSchema):
		db.Close() // the version's error is the one to report
		return nil, fmt.Errorf("provenance index %s: %w", path, err)
	case err != nil:
		db.Close() // the schema's error is the one to report
		return nil, fmt.Errorf("provenance index %s is not a usable SQLite database: %w", path, err)
	}
	if err := s.Refresh(); err != nil {
		db.Close() // the load's error is the one to report
		return nil, fmt.Errorf("provenance index %s: %w", path, err)
	}
	return s, nil
}

// Refresh reads the whole index again if another process (`gateway trash
// restore`) committed to it since it was last read; the gateway calls it
// with its config poll, and through Fresh before each answer's records.
// One connection (SetMaxOpenConns(1)) makes data_version meaningful.
func (s *Store) Refresh() error {
	var v int64
	if err := s.db.QueryRow(`PRAGMA data_version`).Scan(&v); err != nil {
		return err
	}
	s.mu.RLock()
	same := v == s.seen && s.m != nil
	s.mu.RUnlock()
	if same {
		return nil
	}
	s.writing.Lock()
	defer s.writing.Unlock()
	next, err := s.load()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.m, s.strs, s.preds, s.seen = next.m, next.strs, next.preds, v
	s.mu.Unlock()
	return nil
}

// Fresh is Refresh when the index's write-ahead log changed since Fresh
// last looked (one stat of it, no query), so the first read after another
// process's commit (`gateway trash restore`) sees it: the gateway calls
// it before it looks up an answer's records. A log it cannot stat is left
// to Refresh's poll.
func (s *Store) Fresh() error {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return nil // no log to look at (not created yet): Watch's poll reads it
	}
	mod, size := fi.ModTime().UnixNano(), fi.Size()
	if s.walMod.Swap(mod) == mod && s.walSize.Swap(size) == size {
		return nil
	}
	s.walSize.Store(size) // both, when the mtime alone differed
	return s.Refresh()
}

func schema() string {
	var b strings.Builder
	for _, k := range []Kind{KindDrawer, KindEvent, KindFact, KindDiary, KindTunnel} {
		t := tables[k]
		fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s(", t.name)
		for _, c := range t.cols {
			fmt.Fprintf(&b, "%s TEXT NOT NULL, ", c)
		}
		fmt.Fprintf(&b, "device TEXT NOT NULL, label TEXT NOT NULL, agent TEXT NOT NULL, via TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY(%s)) WITHOUT ROWID;\n", strings.Join(t.cols, ", "))
	}
	return b.String()
}

// load reads every table into a Store's memory (m, strs, preds).
func (s *Store) load() (*Store, error) {
	next := &Store{m: map[string]Stamp{}, strs: map[string]string{}, preds: map[string]map[writer]int{}}
	for kind, t := range tables {
		rows, err := s.db.Query(fmt.Sprintf("SELECT %s, device, label, agent, via, at FROM %s", strings.Join(t.cols, ", "), t.name))
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(t.cols))
		dest := make([]any, 0, len(t.cols)+5)
		for i := range parts {
			dest = append(dest, &parts[i])
		}
		var st Stamp
		var at int64
		dest = append(dest, &st.Device, &st.Label, &st.Agent, &st.Via, &at)
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				rows.Close() // the scan's error is the one to report
				return nil, err
			}
			st.At = time.UnixMilli(at).UTC()
			k := Key{kind, parts}
			next.m[k.mapKey()] = next.interned(st)
			next.tally(k, st, 1)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// interned is st with its device, label and via held once for the
// whole index (the caller holds mu, or is load).
func (s *Store) interned(st Stamp) Stamp {
	for _, p := range []*string{&st.Device, &st.Label, &st.Via} {
		if v, ok := s.strs[*p]; ok {
			*p = v
		} else {
			s.strs[*p] = *p
		}
	}
	return st
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Len is how many records the index holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// Record stamps entries, in one transaction, then in memory: once it
// returns, every lookup sees them.
func (s *Store) Record(ctx context.Context, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	s.writing.Lock()
	defer s.writing.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, e := range entries {
		t, args, err := keyRow(e.Key, 5)
		if err != nil {
			return err
		}
		verb := "INSERT OR IGNORE"
		if e.Replace {
			verb = "INSERT OR REPLACE"
		}
		q := fmt.Sprintf("%s INTO %s(%s, device, label, agent, via, at) VALUES(%s?, ?, ?, ?, ?)", verb, t.name, strings.Join(t.cols, ", "), strings.Repeat("?, ", len(t.cols)))
		args = append(args, e.Stamp.Device, e.Stamp.Label, e.Stamp.Agent, e.Stamp.Via, e.Stamp.At.UnixMilli())
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		k := e.Key.mapKey()
		old, had := s.m[k]
		if had && !e.Replace {
			continue
		}
		if had {
			s.tally(e.Key, old, -1)
		}
		st := e.Stamp
		st.At = st.At.UTC().Truncate(time.Millisecond)
		s.m[k] = s.interned(st)
		s.tally(e.Key, st, 1)
	}
	return nil
}

// Forget drops keys' stamps: their records read as of unknown origin
// (a restore putting back text whose writer the index never knew).
func (s *Store) Forget(ctx context.Context, keys ...Key) error {
	s.writing.Lock()
	defer s.writing.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, k := range keys {
		t, args, err := keyRow(k, 0)
		if err != nil {
			return err
		}
		where := strings.Join(t.cols, " = ? AND ") + " = ?"
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", t.name, where), args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if old, had := s.m[k.mapKey()]; had {
			s.tally(k, old, -1)
			delete(s.m, k.mapKey())
		}
	}
	return nil
}

// keyRow is k's table and its key columns' values, as the leading
// arguments of a statement (room for extra more).
func keyRow(k Key, extra int) (table, []any, error) {
	t, ok := tables[k.Kind]
	if !ok || len(k.Parts) != len(t.cols) {
		return table{}, nil, fmt.Errorf("provenance: a %s key of %d parts", k.Kind, len(k.Parts))
	}
	args := make([]any, len(k.Parts), len(k.Parts)+extra)
	for i, p := range k.Parts {
		args[i] = p
	}
	return t, args, nil
}

// Lookup is the stamp of a record (false: the gateway did not stamp it).
func (s *Store) Lookup(k Key) (Stamp, bool) {
	mk := k.mapKey()
	s.mu.RLock()
	st, ok := s.m[mk]
	s.mu.RUnlock()
	return st, ok
}

// writer is who wrote a fact: its stamp's device and via.
type writer struct{ device, via string }

// tally counts (n: 1) or uncounts (n: -1) the stamp st of the record of
// key k in preds, if k is a fact's (the caller holds mu, or is load).
func (s *Store) tally(k Key, st Stamp, n int) {
	if k.Kind != KindFact || len(k.Parts) < 2 {
		return
	}
	pred, w := k.Parts[1], writer{st.Device, st.Via}
	by := s.preds[pred]
	if by == nil {
		by = map[writer]int{}
		s.preds[pred] = by
	}
	if by[w] += n; by[w] <= 0 {
		delete(by, w)
	}
	if len(by) == 0 {
		delete(s.preds, pred)
	}
}

// PredicateWrittenBy reports whether by holds for the device and via of
// the stamp of any fact the index holds whose predicate is pred (as
// catalogue.PredicateID gives it): false when no stamped fact has it (a
// fact of unknown origin names no writer).
func (s *Store) PredicateWrittenBy(pred string, by func(device, via string) bool) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for w := range s.preds[pred] {
		if by(w.device, w.via) {
			return true
		}
	}
	return false
}
