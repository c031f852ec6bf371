package sqlitewal

import (
	"database/sql"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Outside tester, attack85 F4: two processes opening one store of an
// older schema at once (the new gateway's first start and a `gateway
// trash` command) both read the old version, both found a column missing
// and both added it: one failed with "duplicate column name" (the
// gateway exited). Now the second waits for the first's migration and
// finds nothing to do: both succeed, the store is at the new version with
// its rows. Deterministic: the first migrator waits for the second to
// reach its own migration (which it no longer does before the first
// commits).
func TestVersionedTwoMigratorsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sqlite")
	old, err := Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`CREATE TABLE t(v TEXT); INSERT INTO t VALUES('kept'); PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	arrived := make(chan struct{}, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		db, err := Open(path, "FULL")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		migrate := func(tx *sql.Tx) error {
			var has int
			if err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info('t') WHERE name='w'`).Scan(&has); err != nil || has > 0 {
				return err
			}
			arrived <- struct{}{}
			for deadline := time.Now().Add(200 * time.Millisecond); len(arrived) < 2 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			_, err := tx.Exec(`ALTER TABLE t ADD COLUMN w TEXT NOT NULL DEFAULT ''`)
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = RetryBusy(func() error { return Versioned(db, "x", path, 2, slog.New(slog.DiscardHandler), migrate) })
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	tables, version, err := Schema(path)
	if err != nil || tables != 1 || version != 2 {
		t.Errorf("after both: %d tables, version %d (%v), want 1 and 2", tables, version, err)
	}
	db, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, w string
	if err := db.QueryRow(`SELECT v, w FROM t`).Scan(&v, &w); err != nil || v != "kept" {
		t.Errorf("the row: %q %q (%v), want kept", v, w, err)
	}
}
