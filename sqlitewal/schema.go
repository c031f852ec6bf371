package sqlitewal

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
)

// UpgradeDoc is the operator's guide's section on upgrading, which says
// why a store migrated by one release is not for an older one.
const UpgradeDoc = "docs/operator.md#upgrading-and-rolling-back"

// ErrNewerSchema is a store whose PRAGMA user_version is above the newest
// this build knows: a newer release wrote it.
var ErrNewerSchema = errors.New("made by a newer devbox-config")

// Newer is ErrNewerSchema, naming both versions and the fix, when have is
// above known (nil otherwise).
func Newer(have, known int) error {
	if have <= known {
		return nil
	}
	return fmt.Errorf("schema version %d, %w (this build knows up to %d): run that release or newer; rolling back is not supported: %s", have, ErrNewerSchema, known, UpgradeDoc)
}

// LogMigrated is the one line a store migrated in place logs.
func LogMigrated(log *slog.Logger, what, path string, from, to int) {
	log.Warn(what+" migrated in place: an older devbox-config cannot use it as it was (rolling back is not supported: "+UpgradeDoc+")", "file", path, "from_version", from, "to_version", to)
}

// Versioned brings the store in db (opened by Open), at path, to schema
// version: a file of a newer version is refused (Newer) and nothing is
// written to it; otherwise migrate runs in tx (it creates the schema in a
// fresh file and brings an older file's up to it), PRAGMA user_version is
// set, and a file that held tables at a lower version is logged as
// migrated (LogMigrated; what names the store). The version is read in
// the same write transaction, taken first (BEGIN IMMEDIATE: Open's
// _txlock, waiting out its busy timeout), so a second process migrating
// the same file at the same moment (a new gateway's first start and a
// trash command) waits for the first and finds it done, instead of adding
// the same column again (attack85 F4). Run it in RetryBusy.
func Versioned(db *sql.DB, what, path string, version int, log *slog.Logger, migrate func(tx *sql.Tx) error) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	var have, tables int
	if err := tx.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master WHERE type='table')`).Scan(&have, &tables); err != nil {
		return err
	}
	if err := Newer(have, version); err != nil || have == version {
		return err
	}
	if err := migrate(tx); err != nil {
		return err
	}
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, version)); err != nil {
		return fmt.Errorf("recording schema version %d: %w", version, err)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if tables > 0 {
		LogMigrated(log, what, path, have, version)
	}
	return nil
}
