package fakepalace

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the 3.12 hallways store
)

// Behaviour the release notes give for releases not served yet, kept
// behind Options.Version (--release) so fast tests can play them before
// the real server can be tested: 3.12 writes timestamps with a UTC offset
// and keeps hallways in the palace's hallways.sqlite3. The contract runs
// the default release against real MemPalace; what is here is a reading of
// release notes, to be checked when the release is served.

// offsetRelease is the first release that writes timestamps with a UTC
// offset and keeps hallways in SQLite.
const offsetRelease = "3.12.0"

// timestamp is how the double's release writes t: from 3.12 in UTC with
// its offset ("+00:00", Python's isoformat of an aware datetime); before,
// the local time without one (datetime.now().isoformat()).
func (pl *Palace) timestamp(t time.Time) string {
	if atLeast(pl.opts.Version, offsetRelease) {
		return t.UTC().Format("2006-01-02T15:04:05.000000") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000")
}

// HallwaysFile is where release keeps the hallways of the palace in
// directory palace: from 3.12 palace/hallways.sqlite3; before,
// hallways.json beside the palace directory (3.11 derives it from
// palace_path's parent). "" is the double's default release.
func HallwaysFile(palace, release string) string {
	if release != "" && atLeast(release, offsetRelease) {
		return filepath.Join(palace, "hallways.sqlite3")
	}
	return filepath.Join(filepath.Dir(palace), "hallways.json")
}

// openHallways creates a 3.12 palace's hallways store (a hallways table,
// empty: the double files no hallways of its own). Before 3.12 there is
// nothing to create: MemPalace writes hallways.json only when it has a
// hallway to keep.
func openHallways(dir, release string) error {
	if dir == "" || !atLeast(release, offsetRelease) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	file := HallwaysFile(dir, release)
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	defer db.Close() // the table is made; nothing else is kept open
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS hallways (id TEXT PRIMARY KEY, wing TEXT NOT NULL, room_a TEXT NOT NULL, room_b TEXT NOT NULL, created_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
