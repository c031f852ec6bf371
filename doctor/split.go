package doctor

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/shellword"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// splitStore is one of the §7.1 files MemPalace 3.11 finds by two rules:
// ~/.mempalace/<name> and a path by the palace (palPath). The knowledge
// graph: mempalace-mcp without --palace (harness entries, the edge's
// child) uses DEFAULT_KG_PATH in ~/.mempalace, `mempalace serve` (always
// --palace) and `mempalace mine` <palace>/<name>. known_entities.json:
// every process reads ~/.mempalace's (miner.py), none the palace's.
// hallways.json (legacy): every process keeps it beside the palace
// (config.py hallway_file) and ignores the pre-3.3.6 ~/.mempalace one
// (hallways.py _load_hallways warns, never migrates).
type splitStore struct {
	id, name, noun string
	sqlite         bool
	readers        string // who reads which side, for the message
	legacy         bool   // home is an old file nobody reads; palace side may be missing
}

func splitStores() []splitStore {
	return []splitStore{
		{IDKGSplit, "knowledge_graph.sqlite3", "knowledge graph", true,
			"the local stdio server (mempalace-mcp without --palace) uses the first, `mempalace serve` (always --palace) and `mempalace mine` the second, so each sees half of the knowledge graph", false},
		{IDEntitiesSplit, "known_entities.json", "known entities", false,
			"MemPalace 3.11 reads only the first (the CLI, the stdio server and serve alike), so the second's entities are invisible to it", false},
		{IDHallwaysSplit, "hallways.json", "hallways", false, "", true},
	}
}

// palPath is the store's file by the palace: hallways.json beside it, in
// its parent directory; the others inside it.
func (s splitStore) palPath(palace string) string {
	if s.legacy {
		return filepath.Join(filepath.Dir(palace), s.name)
	}
	return filepath.Join(palace, s.name)
}

// split is one store found as two different files.
type split struct {
	store       splitStore
	home, pal   string // paths
	homeN, palN int64  // rows (SQLite), hallways, or values (JSON)
	homeErr     error
	palErr      error
	palMissing  bool // only for a legacy store
}

// homeHasData and palHasData count an unreadable side as holding data:
// nothing is ever removed on a guess.
func (s split) homeHasData() bool { return s.homeN > 0 || s.homeErr != nil }
func (s split) palHasData() bool  { return s.palN > 0 || s.palErr != nil }

func (s split) bothHoldData() bool { return s.homeHasData() && s.palHasData() }

// findSplits reads, never writes: a store is split when both paths exist
// and are different inodes; a legacy store when its old file holds data
// and is not the configured one, which may be missing.
func findSplits(opts Options, st State) []split {
	if st.Palace == "" {
		return nil
	}
	var out []split
	for _, s := range splitStores() {
		home := filepath.Join(opts.mempalaceDir(), s.name)
		pal := s.palPath(st.Palace)
		hi, err1 := os.Stat(home)
		pi, err2 := os.Stat(pal)
		missing := s.legacy && errors.Is(err2, fs.ErrNotExist)
		if err1 != nil || (err2 != nil && !missing) || os.SameFile(hi, pi) {
			continue
		}
		sp := split{store: s, home: home, pal: pal, palMissing: missing}
		sp.homeN, sp.homeErr = countEntries(s, home)
		if !missing {
			sp.palN, sp.palErr = countEntries(s, pal)
		}
		if s.legacy && !sp.homeHasData() {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// CheckSplits is kg-split, entities-split and hallways-split (§7.1).
func CheckSplits(opts Options, st State) []Finding {
	var out []Finding
	q := shellword.Quote // the commands' paths: a HOME with a space or '#' pastes whole
	for _, sp := range findSplits(opts, st) {
		link := linkTarget(sp.home, sp.pal)
		f := Finding{ID: sp.store.id, Section: "§7.1", Severity: Warn,
			Message: fmt.Sprintf("%s (%s) and %s (%s) are two different files: %s",
				sp.home, sp.describeHome(), sp.pal, sp.describePal(), sp.store.readers),
			Fix: fmt.Sprintf("stop every mempalace process, then `devbox-config doctor --fix` (backs both up, keeps the side with data as %s and links %s to it); by hand: `ln -sfn %s %s` after removing the empty one", sp.pal, sp.home, q(link), q(sp.home))}
		if sp.store.legacy {
			f.Message = fmt.Sprintf("%s (%s) is MemPalace's pre-3.3.6 hallways file: MemPalace 3.11 keeps hallways beside the palace, in %s (%s), in every process, and ignores the old file (it warns, never migrates), so its hallways are lost to it",
				sp.home, sp.describeHome(), sp.pal, sp.describePal())
			f.Fix = fmt.Sprintf("stop every mempalace process, then `devbox-config doctor --fix` (backs both up, moves the old file to %s and links %s to it); by hand: `mv %s %s && ln -s %s %s`", sp.pal, sp.home, q(sp.home), q(sp.pal), q(link), q(sp.home))
		}
		if sp.bothHoldData() {
			if !sp.store.legacy {
				f.Severity = Error
			}
			f.Fix = fmt.Sprintf("both hold data, so nothing is automatic (doctor --fix refuses, it never merges): stop every mempalace process, merge the %s of %s into %s by hand, move %s aside, then `ln -sfn %s %s`", sp.store.noun, sp.home, sp.pal, sp.home, q(link), q(sp.home))
		}
		out = append(out, f)
	}
	return out
}

func (s split) describeHome() string { return describe(s.store, s.homeN, s.homeErr) }

func (s split) describePal() string {
	if s.palMissing {
		return "missing"
	}
	return describe(s.store, s.palN, s.palErr)
}

func describe(s splitStore, n int64, err error) string {
	switch {
	case err != nil:
		return "unreadable: " + err.Error()
	case s.sqlite:
		return fmt.Sprintf("%d rows", n)
	case s.legacy:
		return fmt.Sprintf("%d hallways", n)
	}
	return fmt.Sprintf("%d values", n)
}

// linkTarget is what ~/.mempalace/<name> should point at: relative when
// the palace is below ~/.mempalace (the RFC's `palace/<name>`), so the link
// survives the home being mounted elsewhere.
func linkTarget(home, pal string) string {
	if rel, err := filepath.Rel(filepath.Dir(home), pal); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return pal
}

func countEntries(s splitStore, path string) (int64, error) {
	if s.sqlite {
		counts, err := sqliteCounts(path)
		if err != nil {
			return 0, err
		}
		var n int64
		for _, c := range counts {
			n += c
		}
		return n, nil
	}
	if s.legacy {
		return hallwayRecords(path)
	}
	return jsonEntries(path)
}

// hallwayRecords counts a hallways file's records as MemPalace reads them
// (hallways.py _load_hallways): {"hallways": [...]} or a bare list; blank
// is 0.
func hallwayRecords(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return 0, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("not JSON: %w", err)
	}
	if m, ok := v.(map[string]any); ok {
		v = m["hallways"]
	}
	l, _ := v.([]any)
	return int64(len(l)), nil
}

// openReadOnly opens a SQLite file without creating anything next to it:
// read-only, and immutable unless a -shm already exists (a WAL-mode file
// opened read-only would otherwise get a -wal and a -shm). Without a -shm
// no process has the file open, so its main file holds every row. Only
// for the checks' counts: --fix opens the files normally (openWritable).
func openReadOnly(path string) (*sql.DB, error) {
	mode := "mode=ro"
	if _, err := os.Stat(path + "-shm"); err != nil {
		mode += "&immutable=1"
	}
	return openSQLite(path, mode)
}

// OpenReadOnly opens one of MemPalace's SQLite files for reading without
// creating anything next to it (openReadOnly), refusing a file whose rows
// may sit in an un-checkpointed -wal that an immutable read would not see.
// For readers outside doctor (join reads knowledge_graph.sqlite3 this way).
func OpenReadOnly(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	_, shmErr := os.Stat(path + "-shm")
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 && shmErr != nil {
		return nil, fmt.Errorf("%s has an un-checkpointed %s-wal (a mempalace process died?); start and stop mempalace once to fold it in", path, filepath.Base(path))
	}
	return openReadOnly(path)
}

// openWritable opens a SQLite file as MemPalace would, so a left-over -wal
// is recovered into what a VACUUM INTO copies.
func openWritable(path string) (*sql.DB, error) { return openSQLite(path, "mode=rw") }

func openSQLite(path, mode string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqlitewal.URI(path)+"?"+mode+"&_pragma=busy_timeout(1000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// sqliteCounts is the row count of every table, read-only.
func sqliteCounts(path string) (map[string]int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return map[string]int64{}, nil
	}
	_, shmErr := os.Stat(path + "-shm")
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 && shmErr != nil {
		// Rows may sit in the -wal that an immutable read would not see.
		return nil, fmt.Errorf("has an un-checkpointed %s-wal (a mempalace process died?); doctor counts it as holding data", filepath.Base(path))
	}
	db, err := openReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, fmt.Errorf("not a readable SQLite database: %w", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, t)
	}
	rows.Close()
	counts := map[string]int64{}
	for _, t := range tables {
		var n int64
		if err := db.QueryRow(`SELECT COUNT(*) FROM "` + strings.ReplaceAll(t, `"`, `""`) + `"`).Scan(&n); err != nil {
			return nil, fmt.Errorf("table %s: %w", t, err)
		}
		counts[t] = n
	}
	return counts, nil
}

// jsonEntries counts a JSON file's values (its scalar leaves), so a
// skeleton such as {"people": [], "projects": []} is empty; blank or null
// is 0.
func jsonEntries(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("not JSON: %w", err)
	}
	return leaves(v), nil
}

func leaves(v any) int64 {
	var n int64
	switch x := v.(type) {
	case nil:
	case map[string]any:
		for _, c := range x {
			n += leaves(c)
		}
	case []any:
		for _, c := range x {
			n += leaves(c)
		}
	default:
		n = 1
	}
	return n
}

// FixResult is what FixSplit did for one store.
type FixResult struct {
	ID      string
	Done    bool
	Message string
	// Backup is the directory holding both sides as they were.
	Backup string
}

// ErrBothHoldData is returned (wrapped) when a split cannot be converged
// without merging.
var ErrBothHoldData = errors.New("both sides hold data")

// FixSplit converges every split store onto one inode, the RFC's way: the
// side with data ends up as <palace>/<name> and ~/.mempalace/<name> becomes
// a symlink to it. Both sides are first copied to
// ~/.mempalace/doctor-backup-<time>/. A store whose sides both hold data is
// refused (never merged, never deleted). Every mempalace process should be
// stopped first: a writer holding the old file open would keep writing to
// it.
func FixSplit(opts Options) ([]FixResult, error) {
	opts = opts.withDefaults()
	st, fs := resolve(opts)
	if len(fs) > 0 {
		return nil, fmt.Errorf("%s", fs[0].Message)
	}
	var out []FixResult
	var errs []error
	backup := filepath.Join(opts.mempalaceDir(), "doctor-backup-"+opts.Now().UTC().Format("20060102T150405.000000Z"))
	for _, sp := range findSplits(opts, st) {
		if sp.bothHoldData() {
			msg := fmt.Sprintf("%s: refused, %s and %s both hold data (%s, %s); merge by hand, nothing was changed",
				sp.store.id, sp.home, sp.pal, describe(sp.store, sp.homeN, sp.homeErr), describe(sp.store, sp.palN, sp.palErr))
			out = append(out, FixResult{ID: sp.store.id, Message: msg})
			errs = append(errs, fmt.Errorf("%s: %w", sp.store.id, ErrBothHoldData))
			continue
		}
		r, err := converge(sp, backup)
		out = append(out, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sp.store.id, err))
		}
	}
	return out, errors.Join(errs...)
}

func converge(sp split, backup string) (FixResult, error) {
	r := FixResult{ID: sp.store.id, Backup: backup}
	if err := os.MkdirAll(backup, 0o700); err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	homeCopy := filepath.Join(backup, "home-"+sp.store.name)
	palCopy := filepath.Join(backup, "palace-"+sp.store.name)
	if err := copyStore(sp.store, sp.home, homeCopy); err != nil {
		return r, fmt.Errorf("backup of %s: %w", sp.home, err)
	}
	if sp.palMissing {
		// MemPalace creates the palace's parent when it saves hallways.
		if err := os.MkdirAll(filepath.Dir(sp.pal), 0o700); err != nil {
			return r, err
		}
	} else if err := copyStore(sp.store, sp.pal, palCopy); err != nil {
		return r, fmt.Errorf("backup of %s: %w", sp.pal, err)
	}
	if sp.homeHasData() {
		// The data is on the HOME side: it replaces the empty palace file.
		before, err := entries(sp.store, sp.home)
		if err != nil {
			return r, err
		}
		if err := removeStore(sp.pal); err != nil {
			return r, err
		}
		if err := copyStore(sp.store, sp.home, sp.pal); err != nil {
			// Put the (empty) palace side back from the backup.
			if !sp.palMissing {
				copyStore(sp.store, palCopy, sp.pal)
			}
			return r, fmt.Errorf("copy %s to %s: %w (nothing removed; backup in %s)", sp.home, sp.pal, err, backup)
		}
		after, err := entries(sp.store, sp.pal)
		if err != nil || !maps.Equal(before, after) {
			return r, fmt.Errorf("copy of %s to %s does not hold the same rows (%v, %v); %s left in place, backup in %s", sp.home, sp.pal, before, after, sp.home, backup)
		}
	}
	if err := removeStore(sp.home); err != nil {
		return r, err
	}
	link := linkTarget(sp.home, sp.pal)
	if err := os.Symlink(link, sp.home); err != nil {
		return r, fmt.Errorf("ln -s %s %s: %w (backup in %s)", link, sp.home, err, backup)
	}
	kept := sp.pal
	if sp.homeHasData() {
		kept = sp.pal + " (moved from " + sp.home + ")"
	}
	r.Done = true
	r.Message = fmt.Sprintf("%s: %s now links to %s; data kept in %s; both old files backed up in %s", sp.store.id, sp.home, link, kept, backup)
	return r, nil
}

// entries is a comparable count: per table for SQLite, one number for JSON.
func entries(s splitStore, path string) (map[string]int64, error) {
	if s.sqlite {
		return sqliteCounts(path)
	}
	n, err := jsonEntries(path)
	return map[string]int64{"": n}, err
}

// copyStore copies a store to a path that must not exist. A SQLite file is
// copied with VACUUM INTO, a consistent snapshot that includes whatever is
// still in its -wal; an empty (0-byte) one and JSON files byte for byte.
func copyStore(s splitStore, from, to string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	if s.sqlite && fi.Size() > 0 {
		db, err := openWritable(from)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Exec(`VACUUM INTO ?`, to); err != nil {
			return fmt.Errorf("VACUUM INTO %s: %w", to, err)
		}
		return os.Chmod(to, fi.Mode().Perm())
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return writeNew(to, b, fi.Mode().Perm())
}

// writeNew writes a file that must not exist yet, and syncs it.
func writeNew(path string, b []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// removeStore removes a file and its SQLite companions.
func removeStore(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}
