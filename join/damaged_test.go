package join

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A join of a palace whose chroma.sqlite3 is damaged (MemPalace refuses
// every call on it) fails with doctor's palace-damaged finding and fix,
// and a dry run's report says it is a dry run. Before, the dry run's
// report was the real run's ("join to URL", no "dry run") and either run
// said only MemPalace's "Palace SQLite integrity check failed", without
// the file or the fix. Found by an outside tester (attack40 L1).
func TestJoinOfADamagedPalaceGivesDoctorsFix(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fill(t, p, "a")
	p.save(t)
	chroma := filepath.Join(p.dir, "chroma.sqlite3")
	damage(t, chroma)
	cfg := config(t, p, pr)
	cfg.ChildEnv = append(cfg.ChildEnv, "FAKEPALACE_DAMAGED=1") // as MemPalace answers on it
	for _, dry := range []bool{true, false} {
		rep := run(t, cfg, Options{DryRun: dry})
		if rep.DryRun != dry {
			t.Errorf("dry run %v: the report says dry run %v", dry, rep.DryRun)
		}
		then := "so nothing was read or sent"
		if dry {
			then = "so the real run would send nothing"
		}
		if len(rep.Failed) != 1 || rep.Failed[0].Kind != "palace" || !strings.Contains(rep.Failed[0].Error, chroma+" is damaged") ||
			!strings.Contains(rep.Failed[0].Error, then+" (devbox-config doctor's palace-damaged). Fix: ") || !strings.Contains(rep.Failed[0].Error, "mempalace repair") {
			t.Errorf("dry run %v: %+v", dry, rep.Failed)
		}
	}
	if writes(pr) != 0 {
		t.Error("a join of a damaged palace wrote to the primary")
	}
}

// damage writes a SQLite file of several pages at file, a collection in
// it, and overwrites 4 KiB of it, as a disk fault would: quick_check
// then fails.
func damage(t *testing.T, file string) {
	t.Helper()
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE collections (id TEXT)", "INSERT INTO collections VALUES ('c')", "CREATE TABLE t (v BLOB)", "CREATE INDEX tv ON t (v)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 64 {
		if _, err := db.Exec("INSERT INTO t VALUES (?)", bytes.Repeat([]byte{byte(i)}, 300)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5, 0x3C, 0x7E, 0x11}, 1024), 8192); err != nil {
		t.Fatal(err)
	}
}
