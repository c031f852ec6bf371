// Package sqlitewal holds what the outbox and the gateway's stores (op-id
// ledger, trash, provenance index) share about opening a SQLite file in
// WAL mode that several processes may open at the same moment: one
// connection string (Open: busy_timeout first, immediate transactions);
// SQLite can answer SQLITE_BUSY without waiting for its busy timeout
// (switching a fresh file to WAL), so set-up is tried again for a few
// seconds (RetryBusy); and a new file is created private before SQLite
// opens it (CreatePrivate). Each store records its schema version (PRAGMA
// user_version): a file a newer release wrote is refused, not misread
// (Newer, Versioned), and a file migrated in place is logged (LogMigrated).
package sqlitewal
