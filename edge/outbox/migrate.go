package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// schemaVersion is the outbox's PRAGMA user_version once set-up has run:
// raise it with every change to schema, tombstoneSchema or addColumns.
const schemaVersion = 3

// setUp creates the schema, or brings an outbox made by an older edge up
// to it (logged: sqlitewal.LogMigrated), and turns on incremental vacuum
// (a one-time VACUUM of an older file); an outbox already set up is only
// read, a read-only open of an older one is ErrOlderSchema, and one a
// newer release set up is refused (sqlitewal.ErrNewerSchema). Run again
// while another process opening the same fresh file makes it busy
// (sqlitewal.RetryBusy).
func (s *Store) setUp(o Options) error {
	ctx := context.Background()
	var version, vacuum, tables int
	if err := s.db.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version), (SELECT auto_vacuum FROM pragma_auto_vacuum),
		(SELECT count(*) FROM sqlite_master WHERE type='table')`).Scan(&version, &vacuum, &tables); err != nil {
		return err
	}
	if err := sqlitewal.Newer(version, schemaVersion); err != nil {
		return err
	}
	if version == schemaVersion && (vacuum == 2 || o.ReadOnly) {
		return nil
	}
	if o.ReadOnly {
		return ErrOlderSchema
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	old, err := columnMissing(tx, "ops", "lane")
	if err != nil {
		return err
	}
	unstamped, err := columnMissing(tx, "ops", "token_device")
	if err != nil {
		return err
	}
	if old {
		if err := migrateV1(ctx, tx); err != nil {
			return fmt.Errorf("migrating an older outbox: %w", err)
		}
	} else if _, err := tx.ExecContext(ctx, schema); err != nil {
		return err
	}
	if err := addColumns(ctx, tx); err != nil {
		return err
	}
	if unstamped { // an edge before ops recorded the device they were queued as
		if _, err := tx.ExecContext(ctx, queuedAsSeen); err != nil {
			return fmt.Errorf("migrating an older outbox's ops: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if tables > 0 && version < schemaVersion {
		sqlitewal.LogMigrated(o.Log, "outbox", s.path, version, schemaVersion)
	}
	return s.incrementalVacuum()
}

// addColumns adds the columns an outbox made by an older edge lacks.
func addColumns(ctx context.Context, tx *sql.Tx) error {
	if unowned, err := columnMissing(tx, "ops", "owner"); err != nil {
		return err
	} else if unowned { // an edge before liveness: its intents name no owner (live.go)
		if _, err := tx.ExecContext(ctx, `ALTER TABLE ops ADD COLUMN owner TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("migrating an older outbox's ops: %w", err)
		}
	}
	if unstamped, err := columnMissing(tx, "ops", "token_device"); err != nil {
		return err
	} else if unstamped { // an edge before ops recorded the gateway's device: queuedAsSeen fills it
		if _, err := tx.ExecContext(ctx, `ALTER TABLE ops ADD COLUMN token_device TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("migrating an older outbox's ops: %w", err)
		}
	}
	if unbounded, err := columnMissing(tx, "tombstones", "lifted_at"); err != nil {
		return err
	} else if unbounded { // an edge before diary tombstones were bounded at a rewrite: none is
		if _, err := tx.ExecContext(ctx, `ALTER TABLE tombstones ADD COLUMN lifted_at INTEGER NOT NULL DEFAULT 0`); err != nil {
			return fmt.Errorf("migrating an older outbox's tombstones: %w", err)
		}
	}
	for _, col := range []string{"copies", "write_op", "shown"} {
		// an edge before diary tombstones named the primary's copies: an
		// older diary tombstone hides nothing more (its stamp was the
		// device's, not comparable with the primary's); before a source
		// filed again kept its tombstone: none shows a drawer
		if missing, err := columnMissing(tx, "tombstones", col); err != nil {
			return err
		} else if missing {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE tombstones ADD COLUMN `+col+` TEXT NOT NULL DEFAULT ''`); err != nil {
				return fmt.Errorf("migrating an older outbox's tombstones: %w", err)
			}
		}
	}
	return nil
}

// queuedAsSeen records each op of an edge from before ops recorded the
// device they were queued as (Op.TokenDevice) as queued as the device
// that edge last heard the gateway name its token (MetaDeviceSeen), where
// it kept one: only the gateway's word counts, never .env's
// MEMPALACE_ORIGIN_DEVICE, which need not be the token's id (a uuid; doctor
// only warns). An op of an edge that kept none records unrecorded (read
// back as none, Op.premigration): it is sent as the device the gateway
// names the token, unless the gateway lists the device it was stamped
// with as removed (otherDevice: a removed device's writes in a devbox
// upgraded and given another device's token, attack83 F6).
const queuedAsSeen = `UPDATE ops SET token_device=COALESCE((SELECT CAST(json_extract(value,'$.id') AS TEXT) FROM meta
	WHERE key='device_seen' AND json_valid(value)), '` + unrecorded + `') WHERE token_device=''`

// unrecorded is the token_device of an op queuedAsSeen found no device
// for: no device id (the gateway's start with a letter or digit), and
// never sent to the gateway (scanOp reads it as none).
const unrecorded = "?premigration"

// incrementalVacuum turns on incremental vacuum in a file made before it,
// rewriting the file once.
func (s *Store) incrementalVacuum() error {
	var mode int
	if err := s.db.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return err
	}
	if mode != 2 { // a file made before incremental vacuum: once, rewritten whole
		if _, err := s.db.Exec(`PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
			return err
		}
		if _, err := s.db.Exec(`VACUUM`); err != nil {
			return fmt.Errorf("turning on incremental vacuum: %w", err)
		}
	}
	return nil
}

// columnMissing reports a table that exists without column (false when
// the table does not exist: a fresh file).
func columnMissing(tx *sql.Tx, table, column string) (bool, error) {
	var tables, cols int
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?`, table).Scan(&tables); err != nil {
		return false, err
	}
	if tables == 0 {
		return false, nil
	}
	if err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name=?`, table, column).Scan(&cols); err != nil {
		return false, err
	}
	return cols == 0, nil
}

// migrateV1 rebuilds an outbox of the first schema (one global order, a
// CHECK on four states) as the current one: every op kept with its op id,
// sequence and state; the lane and causal keys of those not done derived
// from their tool and payload.
func migrateV1(ctx context.Context, tx *sql.Tx) error {
	if noMaybe, err := columnMissing(tx, "ops", "maybe_applied"); err != nil {
		return err
	} else if noMaybe {
		// An op an older edge left in flight, or whose last error was
		// ambiguous, may have landed.
		if _, err := tx.ExecContext(ctx, `ALTER TABLE ops ADD COLUMN maybe_applied INTEGER NOT NULL DEFAULT 0;
			UPDATE ops SET maybe_applied=1 WHERE state='inflight' OR json_extract(error_json,'$.kind')='ambiguous'`); err != nil {
			return err
		}
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name='ops'), 0)`).Scan(&seq); err != nil {
		return err
	}
	steps := []string{
		`DROP INDEX IF EXISTS ops_dedupe_active`,
		`DROP INDEX IF EXISTS ops_active`,
		`ALTER TABLE ops RENAME TO ops_v1`,
		schema,
		`INSERT INTO ops(local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, state, attempts, next_attempt_at, created_at, flushed_at, error_json, result_json, maybe_applied)
			SELECT local_seq, op_id, dedupe_key, origin_device, origin_label, tool_name, payload_json, wing, state, attempts, next_attempt_at, created_at,
				CASE WHEN state='done' THEN COALESCE(flushed_at, created_at) END, error_json, result_json, maybe_applied FROM ops_v1`,
		`DROP TABLE ops_v1`,
		`DELETE FROM sqlite_sequence WHERE name='ops'`,
	}
	for _, q := range steps {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%.40s…: %w", q, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sqlite_sequence(name, seq) VALUES('ops', ?)`, seq); err != nil {
		return err
	}
	return keyPending(ctx, tx)
}

// keyPending derives the lane and causal keys of every op not done.
func keyPending(ctx context.Context, tx *sql.Tx) error {
	type pending struct {
		seq           int64
		tool, payload string
	}
	ps, err := queryAll(ctx, tx, func(r rowScanner) (p pending, err error) { err = r.Scan(&p.seq, &p.tool, &p.payload); return },
		`SELECT local_seq, tool_name, payload_json FROM ops WHERE state <> 'done'`)
	if err != nil {
		return err
	}
	for _, p := range ps {
		rec, _ := catalogue.Lookup(p.tool)
		var args map[string]any
		if err := json.Unmarshal([]byte(p.payload), &args); err != nil {
			args = nil // a payload that is not an object has no keys; the primary refuses it
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ops SET lane=? WHERE local_seq=?`, rec.Lane().String(), p.seq); err != nil {
			return err
		}
		if err := insertKeys(ctx, tx, p.seq, rec.CausalKeys(args)); err != nil {
			return err
		}
	}
	return nil
}

func insertKeys(ctx context.Context, tx *sql.Tx, seq int64, keys []string) error {
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO op_keys(key, local_seq) VALUES(?, ?)`, k, seq); err != nil {
			return err
		}
	}
	return nil
}

// ErrOlderSchema: a read-only open (doctor) of an outbox an older build
// made, which only a writing open brings to this build's schema.
var ErrOlderSchema = errors.New("made by an older build: the next edge start, or any `devbox-config edge` command, brings it to this build's schema; a read-only look (doctor) does not")

// Identity meta: the outbox's random identity, and the file it was made
// for (its inode: a copy of the file is another inode).
const (
	metaIdentity     = "identity"
	metaIdentityFile = "identity_file"
)

// loadIdentity reads the outbox's identity, making one for a new (or
// migrated) file and a new one for a copy: a file whose inode is not the
// one its identity was made for is a copy (a backup restored, a palace
// copied into a second container or a second HOME). Op ids do not depend
// on it (NewOpID); the identity is how a copy is seen. A copy made at the
// disk level (a VM image) keeps its inodes, and is not seen.
func (s *Store) loadIdentity(o Options) error {
	ctx := context.Background()
	file := fileID(s.path)
	// Read first, without the write lock: an outbox opened again (doctor
	// beside a running edge) has its identity.
	id, boundTo, err := identityOf(ctx, s.db)
	if err != nil || id != "" && boundTo == file {
		s.identity = id
		return err
	}
	if o.ReadOnly { // a copy is seen, and left as it is
		s.identity = id
		if id == "" {
			return nil
		}
		c, err := s.copyOf(ctx, s.db, id, time.Time{})
		s.copy = &c
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	if id, boundTo, err = identityOf(ctx, tx); err != nil {
		return err
	}
	if id != "" && boundTo == file {
		s.identity = id
		return nil
	}
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	fresh := hex.EncodeToString(b)
	if id != "" {
		c, err := s.copyOf(ctx, tx, id, s.now())
		if err != nil {
			return err
		}
		o.Log.Warn("this outbox is a copy of another (its file is not the one its identity was made for): it takes a new identity; if this is a second machine, give it a device id and token of its own (docs/operator.md, A cloned devbox)", "file", s.path, "was", c.Was, "now", fresh[:8], "device", c.Device)
		if err := recordCopy(ctx, tx, c); err != nil {
			return err
		}
	}
	for k, v := range map[string]string{metaIdentity: fresh, metaIdentityFile: file} {
		if err := setMeta(ctx, tx, k, v); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.identity = fresh
	return nil
}

// identityOf reads the outbox's identity and the file it was made for
// ("" where unset).
func identityOf(ctx context.Context, db querier) (id, boundTo string, err error) {
	for k, dst := range map[string]*string{metaIdentity: &id, metaIdentityFile: &boundTo} {
		if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key=?`, k).Scan(dst); err != nil && err != sql.ErrNoRows {
			return "", "", err
		}
	}
	return id, boundTo, nil
}
