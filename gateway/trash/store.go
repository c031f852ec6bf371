package trash

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// DefaultRetention is how long a delete is kept when the config names no
// retention.
const DefaultRetention = 30 * 24 * time.Hour

// FileName is the trash's file name, in the audit log's directory.
const FileName = "trash.sqlite"

// Beside is the trash's default path for a gateway whose audit log is
// auditLog.
func Beside(auditLog string) string { return filepath.Join(filepath.Dir(auditLog), FileName) }

// State is where a kept delete stands.
type State string

const (
	// StatePending: kept, the delete not yet answered; for good when
	// the gateway stopped before recording the answer (the drawers may
	// or may not be gone, as unconfirmed).
	StatePending State = "pending"
	// StateDeleted: the primary answered that it deleted the drawers.
	StateDeleted State = "deleted"
	// StateUnconfirmed: the delete was sent and no answer came: the
	// drawers may or may not be gone (a restore of one still there finds
	// it there).
	StateUnconfirmed State = "unconfirmed"
)

func (s State) String() string { return string(s) }

// Delete is one request that removed (or replaced) drawers on the primary.
type Delete struct {
	ID     int64
	Time   time.Time
	Device string // the device id
	Label  string // its label when it deleted
	Tool   string // delete_drawer, delete_drawers, delete_by_source, update_drawer
	Source string // delete_by_source's source_file
	// Audit is the hash of the request's audit line written before the
	// delete was forwarded (grep the audit log for it).
	Audit string
	// OpID is the op id an edge's outbox sent the delete under ("" for
	// none): a restore settles that op in the op-id ledger as applied.
	OpID    string
	State   State
	Note    string // what the gateway noticed when the answer came
	Drawers []Drawer
}

// Drawer is one kept drawer: what MemPalace reported of it just before
// the delete.
type Drawer struct {
	ID, Wing, Room, Content string
	Metadata                json.RawMessage // MemPalace's metadata, as reported
	// SourceFile is the source_file a restore files it with: the path a
	// delete_by_source named, else the metadata's (a file name only).
	SourceFile string
	Kind       Kind
	// Origin is who wrote it as the gateway's provenance index knew when
	// it was kept (nil: unknown), so that a restore puts that back with
	// the text.
	Origin *provenance.Stamp
	// RestoredAt and RestoredAs, once restored: when, and the id it came
	// back under.
	RestoredAt *time.Time
	RestoredAs string
	// PurgedAt: when the operator purged it (`trash purge`); its content
	// and metadata are gone, its id, wing and room stay.
	PurgedAt *time.Time
	// RestoringAt: when a restore took it (Claim) and has not yet
	// recorded how it went (or stopped before it could).
	RestoringAt *time.Time
	// DeletedAgain, once restored: the later delete that took the drawer
	// it came back as out of the palace again, or the update_drawer that
	// replaced its text (the text restored is in that entry; nil: none).
	DeletedAgain *Again
}

// Again is a later delete of a restored drawer: its number, when, and
// its tool (update_drawer: the drawer stays, its text replaced).
type Again struct {
	Delete int64
	At     time.Time
	Tool   string
}

// againJoin joins a kept drawer (k) to the first delete, gone through,
// made after a restore put it back, of the id it came back as (again;
// NULL: none). After the restore, by time: a newer delete of the same id
// made before the restore of an older one did not take the restored copy
// (attack87 F1); one in the restore's millisecond counts as after.
const againJoin = ` LEFT JOIN deletes again ON k.restored_as != '' AND again.id = (SELECT r.delete_id FROM drawers r JOIN deletes d ON d.id = r.delete_id
  WHERE r.drawer_id = k.restored_as AND r.delete_id > k.delete_id AND d.at >= k.restored_at AND d.state = 'deleted' ORDER BY r.delete_id LIMIT 1)`

// again reads againJoin's columns (again.id, again.at, again.tool).
func again(id, at sql.NullInt64, tool sql.NullString) *Again {
	if !id.Valid {
		return nil
	}
	return &Again{Delete: id.Int64, At: time.UnixMilli(at.Int64).UTC(), Tool: tool.String}
}

// Live says where a purged drawer's content still is when a restore put
// it back in the palace or holds it ("": neither, or a later delete took
// it out again or an update replaced it, keeping it in that entry), with
// the fix.
func (d Drawer) Live() string {
	switch {
	case d.DeletedAgain != nil:
	case d.RestoredAt != nil:
		return fmt.Sprintf("it was restored %s as %s and is in the palace: delete it first (the delete keeps it here again: purge that)", d.RestoredAt.Format(time.RFC3339), d.RestoredAs)
	case d.RestoringAt != nil:
		return fmt.Sprintf("a restore took it at %s, before the purge, and may have put it in the palace ('trash list' names the id once it is back): delete it first (the delete keeps it here again: purge that)", d.RestoringAt.Format(time.RFC3339))
	}
	return ""
}

// Store is the gateway's trash, a SQLite file several processes (the
// gateway, an operator's `gateway trash` command) may open at once.
type Store struct {
	path      string
	db        *sql.DB
	retention time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// OwnQuota bounds, in bytes of content and metadata, what the trash
	// keeps of a device's own text (OwnQuota: DefaultOwnQuota).
	OwnQuota int64
	// log: the quota's drops (Keep).
	log *slog.Logger
	// Key keys the digest a purge keeps of a diary entry's agent, wing
	// and text (entryDigest), by which a replay of it is still refused;
	// the gateway and `gateway trash purge` set the server secret's.
	Key []byte
}

const schema = `
CREATE TABLE IF NOT EXISTS deletes(
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  at     INTEGER NOT NULL,
  device TEXT NOT NULL,
  label  TEXT NOT NULL,
  tool   TEXT NOT NULL,
  source TEXT NOT NULL,
  audit  TEXT NOT NULL,
  state  TEXT NOT NULL CHECK (state IN ('pending','deleted','unconfirmed')),
  note   TEXT NOT NULL DEFAULT '',
  op_id  TEXT NOT NULL DEFAULT '',
  own_bytes INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS drawers(
  delete_id   INTEGER NOT NULL,
  drawer_id   TEXT NOT NULL,
  wing        TEXT NOT NULL,
  room        TEXT NOT NULL,
  content     TEXT NOT NULL,
  metadata    TEXT NOT NULL,
  source_file TEXT NOT NULL,
  kind        TEXT NOT NULL,
  restored_at INTEGER,
  restored_as TEXT NOT NULL DEFAULT '',
  origin      TEXT NOT NULL DEFAULT '',
  purged_at   TEXT NOT NULL DEFAULT '',
  restoring_at TEXT NOT NULL DEFAULT '',
  purged_digest TEXT NOT NULL DEFAULT '',
  restoring_fence TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (delete_id, drawer_id)
);
CREATE INDEX IF NOT EXISTS drawers_by_id ON drawers(drawer_id);
CREATE INDEX IF NOT EXISTS diary_by_text ON drawers(wing, content) WHERE kind='diary';
`

// indexes are the indexes on columns a trash made before them lacks: made
// after those are added.
const indexes = `
CREATE INDEX IF NOT EXISTS deletes_own ON deletes(device, id) WHERE own_bytes > 0;
CREATE INDEX IF NOT EXISTS drawers_held ON drawers(delete_id, purged_at, restoring_at) WHERE ` + heldDrawer + `;
`

// SchemaVersion is the trash's PRAGMA user_version (0: a trash made
// before it was recorded): raise it with every change to schema or added.
const SchemaVersion = 2

// added are the columns a trash made before them lacks, each with its
// type and what fills it for the deletes kept before (""; its default):
// a drawer's origin (its drawers read as of unknown origin), a delete's op
// id (none), a drawer's purge (none), a restore holding it (none), a
// purged diary entry's digest (none), a restore's fence (none), what a
// delete keeps of its device's own text (ownBytesOfOld).
var added = [][4]string{{"drawers", "origin", textColumn, ""}, {"deletes", "op_id", textColumn, ""}, {"drawers", "purged_at", textColumn, ""},
	{"drawers", "restoring_at", textColumn, ""}, {"drawers", "purged_digest", textColumn, ""}, {"drawers", "restoring_fence", textColumn, ""},
	{"deletes", "own_bytes", "INTEGER NOT NULL DEFAULT 0", ownBytesOfOld}}

const textColumn = "TEXT NOT NULL DEFAULT ''"

// ownBytesOfOld is ownBytes of the deletes a trash kept before it
// recorded it, read once from their drawers.
const ownBytesOfOld = `UPDATE deletes SET own_bytes = (SELECT coalesce(sum(length(CAST(k.content AS BLOB)) + length(CAST(k.metadata AS BLOB))), 0) FROM drawers k WHERE k.delete_id = deletes.id)
  WHERE NOT EXISTS (SELECT 1 FROM drawers k WHERE k.delete_id = deletes.id AND CASE WHEN json_valid(k.origin) THEN json_extract(k.origin, '$.Device') END IS NOT deletes.device)`

// Open opens (creating if needed) the trash at path, keeping deletes for
// retention (0: DefaultRetention); it prunes nothing (the gateway's
// start and each new delete do, and Prune, which counts). A trash an
// older build made is migrated (logged on log; nil: none), and one a
// newer release made is refused (sqlitewal.ErrNewerSchema).
func Open(path string, retention time.Duration, log *slog.Logger) (*Store, error) {
	if retention < 0 {
		return nil, fmt.Errorf("trash %s: the retention must not be negative", path)
	}
	if retention == 0 {
		retention = DefaultRetention
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// It holds deleted drawers' content: owner only.
	if err := sqlitewal.CreatePrivate(path); err != nil {
		return nil, fmt.Errorf("trash %s: %w", path, err)
	}
	// synchronous=FULL: a kept drawer is on disk before its delete is
	// forwarded, power cut included (deletes are rare; the fsync is cheap
	// beside the delete itself).
	// secure_delete: what a purge or a prune removes is overwritten with
	// zeros, not left in free space.
	db, err := sqlitewal.Open(path, "FULL", "secure_delete(ON)")
	if err != nil {
		return nil, fmt.Errorf("trash %s: %w", path, err)
	}
	s := &Store{path: path, db: db, retention: retention, Now: time.Now, OwnQuota: DefaultOwnQuota, log: log}
	err = sqlitewal.RetryBusy(func() error { return sqlitewal.Versioned(db, "trash", path, SchemaVersion, log, migrate) })
	switch {
	case errors.Is(err, sqlitewal.ErrNewerSchema):
		db.Close() // the version's error is the one to report
		return nil, fmt.Errorf("trash %s: %w", path, err)
	case err != nil:
		db.Close() // the schema's error is the one to report
		return nil, fmt.Errorf("trash %s is not a usable SQLite database: %w", path, err)
	}
	return s, nil
}

// migrate creates the schema, and adds the columns a trash made before
// them lacks (in sqlitewal.Versioned's transaction).
func migrate(tx *sql.Tx) error {
	if _, err := tx.Exec(schema); err != nil {
		return err
	}
	for _, c := range added {
		var has int
		err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name=?`, c[0], c[1]).Scan(&has)
		if err == nil && has == 0 {
			_, err = tx.Exec(`ALTER TABLE ` + c[0] + ` ADD COLUMN ` + c[1] + ` ` + c[2])
		}
		if err == nil && has == 0 && c[3] != "" {
			_, err = tx.Exec(c[3])
		}
		if err != nil {
			return fmt.Errorf("adding the %s column: %w", c[1], err)
		}
	}
	_, err := tx.Exec(indexes)
	return err
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Retention is how long a delete is kept.
func (s *Store) Retention() time.Duration { return s.retention }

// Keep records a delete and its drawers (state pending), durably, before
// the delete is forwarded; it prunes the expired deletes, and makes room
// under the device's own-text quota (keepOwnUnder), in the same
// transaction. It returns the delete's id.
func (s *Store) Keep(ctx context.Context, d Delete) (id int64, err error) {
	own := ownBytes(d)
	var dropped []int64
	var freed int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := prune(ctx, tx, s.Now().Add(-s.retention)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO deletes(at, device, label, tool, source, audit, state, op_id, own_bytes) VALUES(?,?,?,?,?,?,?,?,?)`,
			s.Now().UnixMilli(), d.Device, d.Label, d.Tool, d.Source, d.Audit, StatePending, d.OpID, own)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		if own > 0 {
			if dropped, freed, err = s.keepOwnUnder(ctx, tx, d.Device, own); err != nil {
				return err
			}
		}
		for _, dr := range d.Drawers {
			origin := ""
			if dr.Origin != nil {
				b, err := json.Marshal(dr.Origin)
				if err != nil {
					return err
				}
				origin = string(b)
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO drawers(delete_id, drawer_id, wing, room, content, metadata, source_file, kind, origin) VALUES(?,?,?,?,?,?,?,?,?)`,
				id, dr.ID, dr.Wing, dr.Room, dr.Content, string(dr.Metadata), dr.SourceFile, dr.Kind, origin); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && len(dropped) > 0 {
		s.log.Warn("trash: the own-text quota dropped a device's oldest deletes of its own text", "device", d.Device, "deletes", len(dropped), "bytes", freed, "ids", dropped, "quota", s.OwnQuota)
	}
	return id, err
}

// DefaultOwnQuota is how much of a device's own text (its drawers it
// replaced or deleted itself) the trash keeps: 64 MiB, about 340
// rewrites of a 99,000-character drawer.
const DefaultOwnQuota = 64 << 20

// OwnQuotaFloor is the age under which a delete is never dropped for the
// own-text quota: one large delete does not take at once the device's
// deletes of the last hour with it.
const OwnQuotaFloor = time.Hour

// ownBytes is what d keeps of its device's own text, in bytes of content
// and metadata; 0 when it keeps any drawer whose origin names another
// device or none (unknown origin), or keeps none.
func ownBytes(d Delete) int64 {
	n := int64(0)
	for _, dr := range d.Drawers {
		if dr.Origin == nil || dr.Origin.Device != d.Device {
			return 0
		}
		n += int64(len(dr.Content) + len(dr.Metadata))
	}
	return n
}

// heldDrawer picks the drawers the quota never drops: purged (their mark
// refuses a replay) or taken by a restore; drawers_held indexes them, so
// that telling them reads no content.
const heldDrawer = `(purged_at != '' OR restoring_at != '')`

// keepOwnUnder makes room for size bytes of device's own text: it drops
// that device's settled deletes of its own text older than OwnQuotaFloor
// whose newer ones, with size, keep more than OwnQuota (attack69 F4: a
// device rewriting its own drawers filled the trash for 30 days). It
// reads the sizes recorded at Keep (own_bytes), no content. A delete
// that keeps any other device's text, or text of unknown origin
// (own_bytes 0), or a drawer heldDrawer picks, is neither counted nor
// dropped. It returns the deletes dropped and their bytes.
func (s *Store) keepOwnUnder(ctx context.Context, tx *sql.Tx, device string, size int64) (dropped []int64, freed int64, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, own_bytes FROM (SELECT id, at, own_bytes, sum(own_bytes) OVER (ORDER BY id DESC) AS newer FROM deletes d
		WHERE device = ? AND own_bytes > 0 AND state != 'pending' AND NOT EXISTS (SELECT 1 FROM drawers k WHERE k.delete_id = d.id AND `+heldDrawer+`))
		WHERE newer + ? > ? AND at < ?`, device, size, s.OwnQuota, s.Now().Add(-OwnQuotaFloor).UnixMilli())
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close() // the scan's error is the one to report
			return nil, 0, err
		}
		dropped, freed = append(dropped, id), freed+n
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, 0, err
	}
	for _, id := range dropped {
		if err := dropDelete(ctx, tx, id); err != nil {
			return nil, 0, err
		}
	}
	return dropped, freed, nil
}

// inTx runs fn in one transaction, committed if fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Settle records the primary's answer to a kept delete: state, a note,
// and the kept drawers it did not remove (dropped from the trash: they
// are still on the primary).
func (s *Store) Settle(ctx context.Context, id int64, state State, note string, notRemoved []string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE deletes SET state=?, note=? WHERE id=?`, state, note, id); err != nil {
			return err
		}
		for _, d := range notRemoved {
			if _, err := tx.ExecContext(ctx, `DELETE FROM drawers WHERE delete_id=? AND drawer_id=?`, id, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// Drop removes a kept delete the primary refused: nothing was removed.
func (s *Store) Drop(ctx context.Context, id int64) error {
	return s.inTx(ctx, func(tx *sql.Tx) error { return dropDelete(ctx, tx, id) })
}

func dropDelete(ctx context.Context, tx *sql.Tx, id int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM drawers WHERE delete_id=?`, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM deletes WHERE id=?`, id)
	return err
}

// Prune removes the deletes older than the retention, restored or not,
// and returns how many.
func (s *Store) Prune(ctx context.Context) (n int, err error) {
	before := s.Now().Add(-s.retention)
	return n, s.inTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deletes WHERE at < ?`, before.UnixMilli()).Scan(&n); err != nil {
			return err
		}
		return prune(ctx, tx, before)
	})
}

func prune(ctx context.Context, tx *sql.Tx, before time.Time) error {
	ms := before.UnixMilli()
	if _, err := tx.ExecContext(ctx, `DELETE FROM drawers WHERE delete_id IN (SELECT id FROM deletes WHERE at < ?)`, ms); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM deletes WHERE at < ?`, ms)
	return err
}

// Purge removes for good the content and metadata of what ref names: a
// delete's number (all its drawers) or a drawer id (every kept copy of
// it). Each drawer keeps its id, wing and room, marked purged (a join's
// replay of it is still refused, and no restore files it), a diary entry
// the keyed digest of its agent, wing and text in their place (a replay
// of it is still refused: DeletedEntry), and its delete
// a note saying the operator purged it; a restore's record stays. The
// write-ahead log is then checkpointed and truncated, so the content
// leaves the trash's files. It returns the numbers of the deletes purged
// from, and the purged drawers a restore put back or holds (Live says
// so): their content is in the palace still. A restore takes a drawer
// (Claim) in a transaction, so a purge is before it or sees it.
func (s *Store) Purge(ctx context.Context, ref string) (ids []int64, live []Drawer, err error) {
	where, arg := "drawer_id=?", any(ref)
	if n, err := strconv.ParseInt(ref, 10, 64); err == nil {
		where, arg = "delete_id=?", n
	}
	at := s.Now().UTC().Format(time.RFC3339)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if ids, live, err = purging(ctx, tx, where, arg); err != nil {
			return err
		}
		if len(ids) == 0 {
			return fmt.Errorf("%w: nothing to purge for %s (no such delete or drawer, or purged already: 'trash list' shows it)", ErrNotFound, ref)
		}
		if err := s.digestEntries(ctx, tx, where, arg); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE drawers SET content='', metadata='{}', purged_at=? WHERE purged_at='' AND `+where, at, arg); err != nil {
			return err
		}
		note := "purged by the operator " + at
		if where == "drawer_id=?" {
			note = "drawer " + ref + " " + note
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE deletes SET note = CASE note WHEN '' THEN ? ELSE note || '; ' || ? END WHERE id=?`, note, note, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return ids, live, s.truncateWAL(ctx)
}

// digestEntries keeps, for each diary entry a purge's clause picks, the
// keyed digest of its agent, wing and text, before they go.
func (s *Store) digestEntries(ctx context.Context, tx *sql.Tx, where string, arg any) error {
	rows, err := tx.QueryContext(ctx, `SELECT delete_id, drawer_id, wing, content, coalesce(json_extract(metadata,'$.agent'),'') FROM drawers WHERE purged_at='' AND kind='diary' AND `+where, arg)
	if err != nil {
		return err
	}
	type entry struct {
		del                      int64
		id, wing, content, agent string
	}
	var es []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.del, &e.id, &e.wing, &e.content, &e.agent); err != nil {
			rows.Close() // the scan's error is the one to report
			return err
		}
		es = append(es, e)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, e := range es {
		if _, err := tx.ExecContext(ctx, `UPDATE drawers SET purged_digest=? WHERE delete_id=? AND drawer_id=?`, entryDigest(s.Key, e.agent, e.wing, e.content), e.del, e.id); err != nil {
			return err
		}
	}
	return nil
}

// entryDigest is the keyed digest (HMAC-SHA256 under key) of a diary
// entry's agent, wing and text, NUL between them (none holds one).
func entryDigest(key []byte, agent, wing, text string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(agent + "\x00" + wing + "\x00" + text)) // a hash never fails a write
	return hex.EncodeToString(m.Sum(nil))
}

// purging reads what a purge's clause picks: the deletes' numbers, and
// the drawers a restore put back or holds, among them and among any
// delete's copies of the ids they hold (a purge of a newer delete of a
// drawer whose older delete a restore put back says so: attack87 F1).
func purging(ctx context.Context, tx *sql.Tx, where string, arg any) (ids []int64, live []Drawer, err error) {
	rows, err := tx.QueryContext(ctx, `WITH p AS (SELECT delete_id, drawer_id FROM drawers WHERE purged_at='' AND `+where+`)
  SELECT k.delete_id, k.drawer_id, k.restored_at, k.restored_as, k.restoring_at, again.id, again.at, again.tool,
    EXISTS (SELECT 1 FROM p WHERE p.delete_id=k.delete_id AND p.drawer_id=k.drawer_id) AS picked FROM drawers k`+againJoin+`
  WHERE picked OR (k.restored_at IS NOT NULL OR k.restoring_at != '') AND EXISTS (SELECT 1 FROM p WHERE p.drawer_id IN (k.drawer_id, k.restored_as))
  ORDER BY k.delete_id, k.drawer_id`, arg)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close() // read to the end: Err reports
	for rows.Next() {
		var id int64
		var d Drawer
		var restored, againID, againAt sql.NullInt64
		var againTool sql.NullString
		var restoring string
		var picked bool
		if err := rows.Scan(&id, &d.ID, &restored, &d.RestoredAs, &restoring, &againID, &againAt, &againTool, &picked); err != nil {
			return nil, nil, err
		}
		d.DeletedAgain = again(againID, againAt, againTool)
		if picked && (len(ids) == 0 || ids[len(ids)-1] != id) {
			ids = append(ids, id)
		}
		if d.RestoredAt, d.RestoringAt, err = restoreTimes(d.ID, restored, restoring); err != nil {
			return nil, nil, err
		}
		if d.Live() != "" {
			live = append(live, d)
		}
	}
	return ids, live, rows.Err()
}

// restoreTimes reads a drawer's restored_at and restoring_at columns.
func restoreTimes(id string, restored sql.NullInt64, restoring string) (at, taken *time.Time, err error) {
	if restored.Valid {
		t := time.UnixMilli(restored.Int64).UTC()
		at = &t
	}
	if restoring != "" {
		t, err := time.Parse(time.RFC3339Nano, restoring)
		if err != nil {
			return nil, nil, fmt.Errorf("drawer %s: restoring_at: %w", id, err)
		}
		taken = &t
	}
	return at, taken, nil
}

// Claim takes a kept drawer for a restore, before its content goes to
// the primary, in one transaction with a purge's: a drawer purged (or
// restored) before is refused, with why; a purge after it names it.
// fence is what the restore saw on the primary before it writes (a diary
// entry's: the newest entry stamp of its wing's diary; "": none). A
// drawer an earlier restore claimed and never recorded the end of (it
// stopped, or kept its claim for an answer it lost) is claimed again,
// keeping that restore's fence, which prior returns ("": none): what that
// restore wrote is newer than it. MarkRestored or Release ends the claim.
func (s *Store) Claim(ctx context.Context, deleteID int64, drawerID, fence string) (prior string, err error) {
	return prior, s.inTx(ctx, func(tx *sql.Tx) error {
		var purged, held string
		var restored sql.NullInt64
		var as string
		err := tx.QueryRowContext(ctx, `SELECT purged_at, restored_at, restored_as, restoring_fence FROM drawers WHERE delete_id=? AND drawer_id=?`, deleteID, drawerID).Scan(&purged, &restored, &as, &held)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: drawer %s of delete %d (pruned since)", ErrNotFound, drawerID, deleteID)
		case err != nil:
			return err
		case purged != "":
			return fmt.Errorf("purged by the operator on %s: its content is gone for good", purged)
		case restored.Valid:
			return fmt.Errorf("restored already, on %s, as %s", time.UnixMilli(restored.Int64).UTC().Format(time.RFC3339), as)
		}
		if prior = held; held == "" {
			held = fence
		}
		_, err = tx.ExecContext(ctx, `UPDATE drawers SET restoring_at=?, restoring_fence=? WHERE delete_id=? AND drawer_id=?`, s.Now().UTC().Format(time.RFC3339Nano), held, deleteID, drawerID)
		return err
	})
}

// Release ends a restore's claim that put nothing back.
func (s *Store) Release(ctx context.Context, deleteID int64, drawerID string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE drawers SET restoring_at='', restoring_fence='' WHERE delete_id=? AND drawer_id=?`, deleteID, drawerID)
	return err
}

// truncateWAL copies the write-ahead log into the database and empties
// it, so that no old page (a purged drawer's content) stays in it.
func (s *Store) truncateWAL(ctx context.Context) error {
	var busy, frames, copied int
	if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied); err != nil {
		return fmt.Errorf("checkpointing %s-wal: %w", s.path, err)
	}
	if busy != 0 {
		return fmt.Errorf("%s-wal still holds the purged content: another process was reading the trash; run the purge again (it checkpoints again)", s.path)
	}
	return nil
}

// List returns every kept delete with its drawers, newest first.
func (s *Store) List(ctx context.Context) ([]Delete, error) {
	return s.deletes(ctx, `ORDER BY id DESC`)
}

// Get returns one kept delete, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Delete, error) {
	ds, err := s.deletes(ctx, `WHERE id=?`, id)
	if err == nil && len(ds) == 0 {
		err = fmt.Errorf("%w: no delete %d in the trash", ErrNotFound, id)
	}
	if err != nil {
		return Delete{}, err
	}
	return ds[0], nil
}

// ErrNotFound: nothing in the trash answers to the reference.
var ErrNotFound = errors.New("not in the trash")

// Find resolves a reference an operator gives `trash restore`: a delete's
// number (all its drawers), or a drawer id (that drawer, from the newest
// delete that kept it and has not restored it).
func (s *Store) Find(ctx context.Context, ref string) (Delete, error) {
	if n, err := strconv.ParseInt(ref, 10, 64); err == nil {
		return s.Get(ctx, n)
	}
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT delete_id FROM drawers WHERE drawer_id=? ORDER BY restored_at IS NOT NULL, delete_id DESC LIMIT 1`, ref).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Delete{}, fmt.Errorf("%w: no drawer %s (and no delete numbered so)", ErrNotFound, ref)
	}
	if err != nil {
		return Delete{}, err
	}
	d, err := s.Get(ctx, id)
	if err != nil {
		return Delete{}, err
	}
	for _, dr := range d.Drawers {
		if dr.ID == ref {
			d.Drawers = []Drawer{dr}
			break
		}
	}
	return d, nil
}

// DeletedDrawer is the newest delete that removed drawer id from the
// primary, or may have (any state: pending and unconfirmed too, as a
// refused delete leaves no entry; an update's replaced version is no
// delete), and whose drawer no restore brought back, holding that drawer
// alone; ok false when there is none. A caller refusing to file it again
// asks the primary first: a delete that was not made left it there
// (attack87 F2).
func (s *Store) DeletedDrawer(ctx context.Context, id string) (d Delete, ok bool, err error) {
	var deleteID int64
	err = s.db.QueryRowContext(ctx, `SELECT dr.delete_id FROM drawers dr JOIN deletes x ON x.id=dr.delete_id
		WHERE x.tool<>'update_drawer' AND dr.restored_at IS NULL AND dr.drawer_id=? ORDER BY dr.delete_id DESC LIMIT 1`, id).Scan(&deleteID)
	if errors.Is(err, sql.ErrNoRows) {
		return Delete{}, false, nil
	}
	if err != nil {
		return Delete{}, false, err
	}
	return s.one(ctx, deleteID, id)
}

// RestoredElsewhere is the newest delete that removed drawer id from the
// primary and whose drawer a restore brought back under another id
// (Drawer.RestoredAs: an updated drawer comes back under the id its
// content gives), holding that drawer alone; ok false when there is none.
func (s *Store) RestoredElsewhere(ctx context.Context, id string) (d Delete, ok bool, err error) {
	var deleteID int64
	err = s.db.QueryRowContext(ctx, `SELECT dr.delete_id FROM drawers dr JOIN deletes x ON x.id=dr.delete_id
		WHERE x.state=? AND dr.drawer_id=? AND dr.restored_at IS NOT NULL AND dr.restored_as NOT IN ('', dr.drawer_id)
		ORDER BY dr.delete_id DESC LIMIT 1`, StateDeleted, id).Scan(&deleteID)
	if errors.Is(err, sql.ErrNoRows) {
		return Delete{}, false, nil
	}
	if err != nil {
		return Delete{}, false, err
	}
	if d, err = s.Get(ctx, deleteID); err != nil {
		return Delete{}, false, err
	}
	d.Drawers = slices.DeleteFunc(d.Drawers, func(dr Drawer) bool { return dr.ID != id })
	return d, len(d.Drawers) == 1, nil
}

// DeletedEntry is DeletedDrawer for a diary entry, by what a diary_write
// of it names: its agent, wing and text (the primary's id of an entry is
// its own timestamp, which a write again does not give). Equal entries
// are told apart by count alone: ok only when the trash holds at least
// nth of them (nth 1: any), d naming the nth newest. An entry counts once
// however many deletes kept it (a delete made again after one left
// unconfirmed), and not at all if a restore of any of them brought it
// back. A pending or unconfirmed delete counts only if gone(id) says the
// entry it kept is gone from the primary: one not made counts as nothing,
// where it refused an equal entry written since (attack89 F1), and one
// made stays made (attack87 F2). A purged entry is found by its digest
// (entryDigest under s.Key), its text being gone.
func (s *Store) DeletedEntry(ctx context.Context, agent, wing, text string, nth int, gone func(ctx context.Context, id string) (bool, error)) (d Delete, ok bool, err error) {
	kept, err := s.entryDeletes(ctx, agent, wing, text)
	if err != nil {
		return Delete{}, false, err
	}
	nth = max(nth, 1)
	for _, k := range kept {
		if k.restored {
			continue
		}
		if k.state != StateDeleted {
			made, err := gone(ctx, k.drawer)
			if err != nil {
				return Delete{}, false, fmt.Errorf("is diary entry %s on the primary: %w", k.drawer, err)
			}
			if !made {
				continue
			}
		}
		if nth--; nth == 0 {
			return s.one(ctx, k.delete, k.drawer)
		}
	}
	return Delete{}, false, nil
}

// keptEntry is one diary entry the trash holds, by its id: the delete to
// name (one the primary confirmed, if any), and whether any restored it.
type keptEntry struct {
	drawer   string
	delete   int64
	state    State
	restored bool
}

// entryDeletes is each diary entry with agent, wing and text the trash
// holds, newest delete first.
func (s *Store) entryDeletes(ctx context.Context, agent, wing, text string) ([]*keptEntry, error) {
	// kind='diary' literally and content in (text, '' purged): the
	// planner then uses diary_by_text (with the digest's OR alone it
	// scanned every diary entry: 3 ms in BenchmarkDeletedLookUp).
	rows, err := s.db.QueryContext(ctx, `SELECT dr.drawer_id, dr.delete_id, x.state, dr.restored_at IS NOT NULL FROM drawers dr JOIN deletes x ON x.id=dr.delete_id
		WHERE x.tool<>'update_drawer' AND dr.kind='diary' AND dr.wing=? AND dr.content IN (?, '') AND (dr.content<>'' AND json_extract(dr.metadata,'$.agent')=? OR dr.purged_digest=?)
		ORDER BY dr.delete_id DESC`, wing, text, agent, entryDigest(s.Key, agent, wing, text))
	if err != nil {
		return nil, err
	}
	defer rows.Close() // read to the end: Err reports
	var out []*keptEntry
	byID := map[string]*keptEntry{}
	for rows.Next() {
		var r keptEntry
		if err := rows.Scan(&r.drawer, &r.delete, &r.state, &r.restored); err != nil {
			return nil, err
		}
		k := byID[r.drawer]
		switch {
		case k == nil:
			byID[r.drawer] = &r
			out = append(out, &r)
		case k.state != StateDeleted && r.state == StateDeleted:
			k.delete, k.state, k.restored = r.delete, r.state, k.restored || r.restored
		default:
			k.restored = k.restored || r.restored
		}
	}
	return out, rows.Err()
}

// one is delete id holding drawer alone.
func (s *Store) one(ctx context.Context, id int64, drawer string) (Delete, bool, error) {
	d, err := s.Get(ctx, id)
	if err != nil {
		return Delete{}, false, err
	}
	for _, dr := range d.Drawers {
		if dr.ID == drawer {
			d.Drawers = []Drawer{dr}
			break
		}
	}
	return d, true, nil
}

// MarkRestored records that a kept drawer came back, as id as (purged
// since its Claim or not), and ends the claim.
func (s *Store) MarkRestored(ctx context.Context, deleteID int64, drawerID, as string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE drawers SET restored_at=?, restored_as=?, restoring_at='', restoring_fence='' WHERE delete_id=? AND drawer_id=?`, s.Now().UnixMilli(), as, deleteID, drawerID)
	return err
}

// deletes reads the deletes the clause picks, with their drawers.
func (s *Store) deletes(ctx context.Context, clause string, args ...any) ([]Delete, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, device, label, tool, source, audit, state, note, op_id FROM deletes `+clause, args...)
	if err != nil {
		return nil, err
	}
	var out []Delete
	for rows.Next() {
		var d Delete
		var at int64
		if err := rows.Scan(&d.ID, &at, &d.Device, &d.Label, &d.Tool, &d.Source, &d.Audit, &d.State, &d.Note, &d.OpID); err != nil {
			rows.Close() // the scan's error is the one to report
			return nil, err
		}
		d.Time = time.UnixMilli(at).UTC()
		out = append(out, d)
	}
	rows.Close() // read to the end: Err reports
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Drawers, err = s.drawers(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) drawers(ctx context.Context, deleteID int64) ([]Drawer, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT k.drawer_id, k.wing, k.room, k.content, k.metadata, k.source_file, k.kind, k.restored_at, k.restored_as, k.origin, k.purged_at, k.restoring_at, again.id, again.at, again.tool
  FROM drawers k`+againJoin+` WHERE k.delete_id=? ORDER BY k.drawer_id`, deleteID)
	if err != nil {
		return nil, err
	}
	defer rows.Close() // read to the end: Err reports
	var out []Drawer
	for rows.Next() {
		var d Drawer
		var meta, origin, purged, restoring string
		var restored, againID, againAt sql.NullInt64
		var againTool sql.NullString
		if err := rows.Scan(&d.ID, &d.Wing, &d.Room, &d.Content, &meta, &d.SourceFile, &d.Kind, &restored, &d.RestoredAs, &origin, &purged, &restoring, &againID, &againAt, &againTool); err != nil {
			return nil, err
		}
		d.DeletedAgain = again(againID, againAt, againTool)
		var err error
		if d.RestoredAt, d.RestoringAt, err = restoreTimes(d.ID, restored, restoring); err != nil {
			return nil, err
		}
		if purged != "" {
			t, err := time.Parse(time.RFC3339, purged)
			if err != nil {
				return nil, fmt.Errorf("drawer %s: purged_at: %w", d.ID, err)
			}
			d.PurgedAt = &t
		}
		d.Metadata = json.RawMessage(meta)
		if origin != "" {
			d.Origin = new(provenance.Stamp)
			if err := json.Unmarshal([]byte(origin), d.Origin); err != nil {
				return nil, fmt.Errorf("drawer %s: origin: %w", d.ID, err)
			}
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Summary is a delete in one line, for `trash list` and a restore's
// heading.
func (d Delete) Summary() string {
	what := d.Tool
	if d.Source != "" {
		what += " " + strconvQuote(d.Source)
	}
	who := d.Device
	if d.Label != "" {
		who += " (" + d.Label + ")"
	}
	state := d.State.String()
	if d.Tool == "update_drawer" && d.State == StateDeleted {
		state = "replaced" // the drawer is there, with other content
	}
	s := fmt.Sprintf("%d  %s  %s by %s: %d drawer(s), %s", d.ID, d.Time.Format(time.RFC3339), what, who, len(d.Drawers), state)
	if d.Note != "" {
		s += "; " + d.Note
	}
	return s
}

func strconvQuote(s string) string {
	if strings.ContainsAny(s, " \t\"'") {
		return strconv.Quote(s)
	}
	return s
}
