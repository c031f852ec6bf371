package sqlitewal

import (
	"database/sql"
	"errors"
	"io/fs"
	"net/url"
	"os"

	_ "modernc.org/sqlite" // the pure-Go driver: the binary stays static
)

// Open opens the SQLite database at path in WAL mode, with the given
// synchronous level (FULL or NORMAL) and one connection (so that a
// transaction and PRAGMA data_version see one connection's view). pragmas
// are further _pragma values (e.g. "wal_autocheckpoint(0)"), set after
// busy_timeout and before journal_mode. The file is not created here:
// CreatePrivate first, for a private one.
//
// busy_timeout comes first, so that switching a new file to WAL waits for
// another process doing the same; _txlock=immediate, so that creating a
// schema takes the write lock at BEGIN (waiting), not on upgrading a read,
// which SQLite refuses at once when another process wrote first (both
// found by the ledger's TestTwoOSProcessesOneFile). A set-up can still
// meet SQLITE_BUSY at once: run it in RetryBusy.
func Open(path, synchronous string, pragmas ...string) (*sql.DB, error) {
	dsn := URI(path) + "?_pragma=busy_timeout(10000)"
	for _, p := range pragmas {
		dsn += "&_pragma=" + p
	}
	db, err := sql.Open("sqlite", dsn+"&_pragma=journal_mode(WAL)&_pragma=synchronous("+synchronous+")&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// OpenReadOnly opens the SQLite database at path read only (mode=ro,
// query_only), with one connection: it writes nothing to the file or its
// -wal, and closing it does not checkpoint the -wal into the file (a
// writing connection's close does). SQLite may make the -shm, its shared
// index of the -wal. With no -wal beside it, no connection has the file
// open (opening it makes one) and the file holds everything: it is read as
// immutable, since a mode=ro open would leave an empty -wal and a -shm.
// The journal mode is the file's own.
func OpenReadOnly(path string) (*sql.DB, error) {
	dsn := URI(path) + "?mode=ro&_pragma=busy_timeout(10000)&_pragma=query_only(1)"
	if _, err := os.Lstat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		dsn += "&immutable=1"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// Tables counts the tables of the SQLite database at path, read only
// (it writes nothing, not even a journal): a store of its own holds some,
// and one with none is empty however many bytes it has.
func Tables(path string) (int, error) {
	n, _, err := Schema(path)
	return n, err
}

// Schema is the SQLite database at path's table count and schema version
// (PRAGMA user_version), read as Tables reads.
func Schema(path string) (tables, version int, err error) {
	db, err := sql.Open("sqlite", URI(path)+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close() // read only
	err = db.QueryRow(`SELECT (SELECT count(*) FROM sqlite_master WHERE type='table'), (SELECT user_version FROM pragma_user_version)`).Scan(&tables, &version)
	return tables, version, err
}

// URI is path as the file: URI the driver takes, for a query to follow:
// its '?', '#', '%' (and what else a URL path escapes) percent-encoded,
// which SQLite decodes, so a directory named with them is the one opened.
func URI(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath()
}
