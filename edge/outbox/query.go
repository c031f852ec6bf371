package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/mailbox"
)

// opCols are the columns scanOp reads, in its order.
const opCols = `local_seq, op_id, origin_device, origin_label, tool_name, payload_json, wing, lane, ordinal, state, attempts, refusals, next_attempt_at, created_at, flushed_at, error_json, result_json, maybe_applied, resend, token_device`

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(...any) error }

// queryAll runs query and scans every row of its answer.
func queryAll[T any](ctx context.Context, db querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close() // read only: its error says nothing
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanOp(row rowScanner) (Op, error) {
	var o Op
	var payload, tokenDevice string
	var next, created int64
	var flushed sql.NullInt64
	var errJSON, resJSON sql.NullString
	if err := row.Scan(&o.LocalSeq, &o.ID, &o.OriginDevice, &o.OriginLabel, &o.Tool, &payload, &o.Wing, &o.Lane, &o.Ordinal, &o.State, &o.Attempts, &o.Refusals,
		&next, &created, &flushed, &errJSON, &resJSON, &o.MaybeApplied, &o.Resend, &tokenDevice); err != nil {
		return Op{}, err
	}
	o.setTokenColumn(tokenDevice)
	o.Payload = json.RawMessage(payload)
	o.NextAttemptAt, o.CreatedAt = time.UnixMilli(next), time.UnixMilli(created)
	if flushed.Valid {
		t := time.UnixMilli(flushed.Int64)
		o.FlushedAt = &t
	}
	if errJSON.Valid {
		o.Error = json.RawMessage(errJSON.String)
	}
	if resJSON.Valid {
		o.Result = json.RawMessage(resJSON.String)
	}
	return o, nil
}

// next is a lane's next op to send: the oldest queued (or in flight after
// a crash) op that no earlier pending op shares a causal key with, no
// delete holds back (heldByDelete), and whose backoff is over. With none
// due, it returns how long until the first is (idle: none waits).
func (s *Store) next(ctx context.Context, lane catalogue.Lane) (*Op, time.Duration, error) {
	rows, err := s.flushDB.QueryContext(ctx, `SELECT `+opCols+` FROM ops o
		WHERE o.lane=? AND o.state <> 'done' AND o.state IN ('queued','inflight')
		AND NOT EXISTS (SELECT 1 FROM op_keys k JOIN op_keys e ON e.key=k.key AND e.local_seq<k.local_seq WHERE k.local_seq=o.local_seq)
		AND NOT (`+heldByDelete+`)
		ORDER BY o.local_seq`, lane.String(), catalogue.Prefix+"update_drawer")
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close() // read only: its error says nothing
	now := s.now()
	wait := idle
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, 0, err
		}
		if !o.NextAttemptAt.After(now) {
			return &o, 0, nil
		}
		wait = min(wait, o.NextAttemptAt.Sub(now))
	}
	return nil, wait, rows.Err()
}

// heldByDelete is the ops a delete's note holds back (its Updated): the
// update_drawer of a drawer its delete_by_source may remove, not sent
// until the local palace's answer says whether it did (intent.go). The
// ops behind one wait with it, as behind any pending op.
const heldByDelete = `o.tool_name=? AND COALESCE(CASE WHEN json_valid(o.payload_json) THEN json_extract(o.payload_json, '$.drawer_id') END, '') IN (
	SELECT u.value FROM meta m, json_each(CASE WHEN json_valid(m.value) THEN m.value ELSE '{}' END, '$.updated') u
	WHERE m.key GLOB '` + deleteNotes + `*' OR m.key GLOB '` + unappliedNotes + `*')`

// BehindDelete lists (up to limit of) the pending ops a delete's note
// holds back (heldByDelete), oldest first.
func (s *Store) BehindDelete(ctx context.Context, limit int) ([]Op, error) {
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops o
		WHERE o.state IN ('queued','inflight') AND (`+heldByDelete+`)
		ORDER BY o.local_seq LIMIT ?`, catalogue.Prefix+"update_drawer", limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return ops, nil
}

// Get returns one op by local_seq.
func (s *Store) Get(ctx context.Context, seq int64) (Op, error) {
	return scanOp(s.db.QueryRowContext(ctx, `SELECT `+opCols+` FROM ops WHERE local_seq=?`, seq))
}

// minIDPrefix is the shortest op id prefix a command accepts.
const minIDPrefix = 6

// GetByID returns one op by its op id or a unique prefix of it (the short
// form tables print, or any other of at least 6 hex digits).
func (s *Store) GetByID(ctx context.Context, id string) (Op, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	if len(id) < minIDPrefix || strings.Trim(id, "0123456789abcdef") != "" {
		return Op{}, fmt.Errorf("op id %q: give the op id from `devbox-config edge outbox list` (its %d-digit short form, or all 64 hex digits)", id, shortID)
	}
	found, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE op_id >= ? AND op_id < ? LIMIT 2`, id, id+"g")
	if err != nil {
		return Op{}, err
	}
	switch len(found) {
	case 0:
		return Op{}, fmt.Errorf("no op %s in the outbox %s", id, s.path)
	case 1:
		return found[0], nil
	}
	return Op{}, fmt.Errorf("op id %s is ambiguous; give more digits", id)
}

// List returns ops in local_seq order; states filters (none: every
// pending state).
func (s *Store) List(ctx context.Context, limit int, states ...State) ([]Op, error) {
	return s.list(ctx, "", limit, states...)
}

// PendingOn lists a lane's pending ops (not done), oldest first, all of
// them: the mailbox counts the replies among them as sent, but for those
// dead or in doubt.
func (s *Store) PendingOn(ctx context.Context, lane catalogue.Lane) ([]Op, error) {
	return s.list(ctx, lane, -1, Queued, Inflight, Dead, InDoubt, Held)
}

func (s *Store) list(ctx context.Context, lane catalogue.Lane, limit int, states ...State) ([]Op, error) {
	if len(states) == 0 {
		states = []State{Queued, Inflight, Dead, InDoubt, Held, Intent}
	}
	q := `SELECT ` + opCols + ` FROM ops WHERE state IN (` + marks(len(states)) + `)`
	args := []any{}
	for _, st := range states {
		args = append(args, string(st))
	}
	if lane != "" {
		q += ` AND lane=? AND state <> 'done'`
		args = append(args, lane.String())
	}
	return queryAll(ctx, s.db, scanOp, q+` ORDER BY local_seq LIMIT ?`, append(args, limit)...)
}

// errFinal refuses an operator command on an op already done.
func errFinal(o Op) error {
	return fmt.Errorf("op %s already reached the primary (or was dropped): nothing to do", o.Short())
}

// Retry puts a dead, in-doubt or waiting op back in the queue with its
// attempts and backoff reset. For an op in doubt it means "send it
// again": it is sent marked as the operator's resend, which the gateway
// forwards without its look-up (the edge's own look-up on the primary,
// for a diary entry, a fact or an event, still finds one that landed;
// other writes are a second copy if the first landed). That is one act:
// once that resend may have reached the gateway (answered, held in doubt,
// its answer lost), a later attempt is the edge's own again (resendTaken). An op held as queued
// under another device (OtherDevice) is refused: RetryAs says which
// device sends it. Operator command.
func (s *Store) Retry(ctx context.Context, id string) (Op, error) {
	return s.RetryAs(ctx, id, nil, false)
}

// ErrQueuedBeforeCopy: RetryAs refused, unforced, an op held as queued
// under another device that was queued before this outbox was copied.
var ErrQueuedBeforeCopy = errors.New("it was queued before this outbox was copied, so the original machine holds it too and sends it under its own device id: `devbox-config edge outbox drop` it (sent from here too, the gateway's ledger answers the second sender from the first's record, but an older gateway, or one whose ledger pruned the op id, files it twice). If the original will never send it (it was lost before it could), `devbox-config edge outbox retry --force` sends it from here")

// RetryAs is Retry, except that an op held as queued under another
// device (OtherDevice) is recorded as, and so sent as, the device
// tokenDevice says the gateway names the token now: the one it will be
// sent with, not the one a flush heard when it held the op (.env may
// have had another token since). tokenDevice is asked only for such an
// op; nil, or its error, leaves the op held. Such an op queued before
// this outbox was copied (Copied.QueuedBefore) is the original's to send:
// unless force, it is refused (ErrQueuedBeforeCopy). Forced, a queued op
// that names a device is recorded as tokenDevice's too, before any flush
// holds it.
func (s *Store) RetryAs(ctx context.Context, id string, tokenDevice func(context.Context) (string, error), force bool) (Op, error) {
	o, err := s.GetByID(ctx, id)
	if err != nil {
		return Op{}, err
	}
	switch o.State {
	case Done:
		return o, errFinal(o)
	case Held:
		return o, fmt.Errorf("op %s is held until the replication policy parses (%s): fix the policy and the edge sends it", o.Short(), PolicyHint)
	case Intent:
		return o, fmt.Errorf("op %s is at the local palace, whose answer queues it (or, if its edge was stopped, an edge running on this palace within its lease, the next edge start or `edge flush` does)", o.Short())
	case Inflight:
		return o, fmt.Errorf("op %s is in flight: an edge is sending it, or one stopped mid-send (the next edge or `devbox-config edge flush` sends it again, after a look-up); its answer settles it: retry it if it ends dead or in doubt", o.Short())
	}
	resend := o.State == InDoubt || o.Resend
	device, err := s.retryDevice(ctx, o, tokenDevice, force)
	if err != nil {
		return o, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Op{}, err
	}
	defer tx.Rollback() // after Commit, a no-op
	// The op as read, or nothing: a drop or delivered from another shell
	// while tokenDevice asked the gateway stays (not turned back to queued).
	res, err := tx.ExecContext(ctx, `UPDATE ops SET state='queued', attempts=0, refusals=0, next_attempt_at=0, resend=?, token_device=? WHERE local_seq=? AND state=?`, resend, device, o.LocalSeq, o.State.String())
	if err != nil {
		return Op{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return Op{}, err
	} else if n == 0 {
		return o, fmt.Errorf("op %s changed while it was being retried (dropped, delivered or sent meanwhile): see `devbox-config edge status`", o.Short())
	}
	if err := rekey(ctx, tx, o); err != nil {
		return Op{}, fmt.Errorf("op %s: %w", o.Short(), err)
	}
	if device != o.tokenColumn() {
		// Sent as another device, it names the one it was first queued as
		// (QueuedAsFrom), so a gateway's ledger files it once whichever
		// machine sends it (a copy of this outbox, under that device).
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO NOTHING`, queuedAsKey(o.ID), queuedAs(o)); err != nil {
			return Op{}, err
		}
	}
	if FailureOf(o.Error).Kind == ChangedOnPrimary || o.State == InDoubt {
		// "Overwrite anyway" (an update in doubt: "send it again"): sent
		// without its base, the gateway does not check the primary's text.
		if err := dropMeta(ctx, tx, baseKey(o.ID)); err != nil {
			return Op{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Op{}, err
	}
	s.ringAll()
	return s.Get(ctx, o.LocalSeq)
}

// retryDevice is the device RetryAs sends o as, as ops' token_device: the
// one it was queued as (under the token it was: tokenColumn), or, for an
// op held as queued under another device (or, forced, one still queued as
// the device it was: a copy's op no flush has held yet, attack80 F3: it
// said "queued to be sent again", and the next flush held it again; or
// one queued under another token than .env's now, review30 F3), the
// token's now.
func (s *Store) retryDevice(ctx context.Context, o Op, tokenDevice func(context.Context) (string, error), force bool) (string, error) {
	otherToken := o.TokenDevice == "" && o.queuedUnder != "" && o.queuedUnder != s.tokenPrint()
	if !(o.State == Dead && FailureOf(o.Error).Kind == OtherDevice || force && o.State == Queued && (o.TokenDevice != "" || otherToken)) {
		return o.tokenColumn(), nil
	}
	if err := s.refuseBeforeCopy(ctx, o, force); err != nil {
		return "", err
	}
	if tokenDevice == nil {
		return "", fmt.Errorf("op %s is held as queued under another device: which device the token is now is not known here", o.Short())
	}
	device, err := tokenDevice(ctx)
	if err != nil {
		return "", fmt.Errorf("op %s stays held (queued as device %s): %w", o.Short(), queuedAs(o), err)
	}
	return device, nil
}

// refuseBeforeCopy is RetryAs's refusal of o, held as queued under
// another device, when it was queued before this outbox was copied.
func (s *Store) refuseBeforeCopy(ctx context.Context, o Op, force bool) error {
	if force {
		return nil
	}
	c, err := s.CopyRecord(ctx)
	if err != nil {
		return err
	}
	if before, _ := c.QueuedBefore(o); before {
		return fmt.Errorf("op %s (queued as device %s) not retried: %w", o.Short(), o.TokenDevice, ErrQueuedBeforeCopy)
	}
	return nil
}

// rekey gives a retried op its causal keys again: one refused as written
// gave them up when it died (deadAtOnce), and sent again it takes its
// place before the later ops on its objects; any other op keeps them.
func rekey(ctx context.Context, tx *sql.Tx, o Op) error {
	var args map[string]any
	if err := json.Unmarshal(o.Payload, &args); err != nil {
		return err
	}
	rec, _ := catalogue.Lookup(o.Tool)
	return insertKeys(ctx, tx, o.LocalSeq, rec.CausalKeys(args))
}

// PolicyHint names the file held ops wait for.
const PolicyHint = "<palace>/edge/policy.json"

// Drop gives up on an op that will never be sent (a dead one, or a queued
// one the operator gives up on): the only way an op leaves the queue
// unsent. It is marked done with a "dropped" error; the ops that waited
// behind it move on. A dead update_drawer refused as changed on the
// primary leaves a note (theirs.go): the edge replaces its local palace's
// copy of the drawer with the primary's text: theirs says so (its
// message then ends with TakesTheirs); a dead delete_drawer so refused
// takes its tombstones with it, so the primary's text is read.
func (s *Store) Drop(ctx context.Context, id string) (o Op, theirs bool, err error) {
	return s.operatorDone(ctx, id, Dropped, "dropped by the operator: never sent")
}

// Replace gives up on a dead op that a later write of the same record
// replaces (a join run again with other flags): marked done, never sent,
// like Drop, naming the op that replaces it.
func (s *Store) Replace(ctx context.Context, id, by string) (Op, error) {
	o, _, err := s.operatorDone(ctx, id, Dropped, "refused, and replaced by op "+by+" of a later join: never sent")
	return o, err
}

// unsent is the ops a delete may take back: queued or held, never maybe
// applied (an op that may have landed is followed by its delete instead).
// One in flight at the delete is taken back if its send fails without
// landing, when it is queued again (takeBackRequeued).
const unsent = `state IN ('queued','held') AND maybe_applied=0`

// UnsentBase is the base of the earliest unsent update_drawer of drawer
// (found: there is one; "" it carries none): the text the primary held
// as this device last saw it. A delete_drawer takes it back (cancelled,
// CancelUnsentWrites), so the delete's own base is that text, not the
// local palace's, which is the update's, never sent.
func (s *Store) UnsentBase(ctx context.Context, drawer string) (base string, found bool, err error) {
	var id string
	err = s.db.QueryRowContext(ctx, `SELECT op_id FROM ops WHERE `+unsent+` AND tool_name=? AND local_seq IN (
		SELECT local_seq FROM op_keys WHERE key=?) ORDER BY local_seq LIMIT 1`, catalogue.Prefix+"update_drawer", "drawer:"+drawer).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("outbox: %w", err)
	}
	base, err = querierMeta(ctx, s.db, baseKey(id))
	return base, true, err
}

// CancelUnsentWrites takes back what the unsent ops would write on the
// primary of drawers (by id) and sources (by source_file) deleted on this
// device: an add_drawer or update_drawer of one is marked done, unsent; a
// checkpoint loses those items (marked done, unsent, when nothing is left
// of it). What the device deleted before it went out then never reaches
// the primary, where a device that may not delete there could not take it
// back. It says how many ops it cancelled or cut.
func (s *Store) CancelUnsentWrites(ctx context.Context, drawers, sources []string) (int, error) {
	return s.cancelUnsent(ctx, "writes", func(tx *sql.Tx) ([]int64, int, error) {
		return takeBackWrites(ctx, tx, drawers, sources, 0)
	})
}

// takeBackWrites is CancelUnsentWrites's rule, in tx: the unsent ops (only
// local_seq seq, when not 0) writing drawers or sources, to cancel, and
// how many checkpoints it cut.
func takeBackWrites(ctx context.Context, tx *sql.Tx, drawers, sources []string, seq int64) (cancel []int64, cut int, err error) {
	keys := []any{seq, seq}
	for _, d := range drawers {
		keys = append(keys, "drawer:"+d)
	}
	for _, src := range sources {
		keys = append(keys, "source:"+src)
	}
	if len(keys) == 2 {
		return nil, 0, nil
	}
	deleted := func(item map[string]any) bool {
		str := func(k string) string { v, _ := item[k].(string); return v }
		src := str("source_file")
		return slices.Contains(drawers, catalogue.DrawerID(str("wing"), str("room"), str("content"))) || src != "" && slices.Contains(sources, src)
	}
	ops, err := queryAll(ctx, tx, scanOp, `SELECT `+opCols+` FROM ops WHERE `+unsent+` AND (?=0 OR local_seq=?) AND local_seq IN (
		 SELECT local_seq FROM op_keys WHERE key IN (`+marks(len(keys)-2)+`)) ORDER BY local_seq`, keys...)
	if err != nil {
		return nil, 0, err
	}
	for _, o := range ops {
		switch rec, _ := catalogue.Lookup(o.Tool); rec.Name {
		case "add_drawer", "update_drawer":
			cancel = append(cancel, o.LocalSeq)
		case "checkpoint":
			whole, n, err := cutCheckpoint(ctx, tx, o, deleted, false)
			if err != nil {
				return nil, 0, err
			}
			if whole {
				cancel = append(cancel, o.LocalSeq)
			}
			cut += n
		}
	}
	return cancel, cut, nil
}

// takeBackRequeued applies, in the transaction that queues op again after
// a send that did not land, the deletes made while it was in flight: the
// drawer and source tombstones on its keys recorded since it was queued
// (takeBackWrites), as if it had been queued at the delete. A
// delete_by_source's hold of its source's updates needs nothing here: it
// named the update in flight too (UnsentUpdates), and holds it queued.
// It says whether op was cancelled.
func takeBackRequeued(ctx context.Context, tx *sql.Tx, op Op, now time.Time) (bool, error) {
	type mark struct{ kind, key string }
	ts, err := queryAll(ctx, tx, func(r rowScanner) (m mark, err error) { err = r.Scan(&m.kind, &m.key); return m, err },
		`SELECT t.kind, t.key FROM tombstones t JOIN op_keys k ON t.kind=substr(k.key, 1, instr(k.key, ':')-1) AND t.key=substr(k.key, instr(k.key, ':')+1)
		 WHERE k.local_seq=? AND t.kind IN ('drawer','source') AND t.created_at>=?`, op.LocalSeq, op.CreatedAt.UnixMilli())
	if err != nil || len(ts) == 0 {
		return false, err
	}
	var drawers, sources []string
	for _, m := range ts {
		if m.kind == string(TombDrawer) {
			drawers = append(drawers, m.key)
		} else {
			sources = append(sources, m.key)
		}
	}
	cancel, _, err := takeBackWrites(ctx, tx, drawers, sources, op.LocalSeq)
	if err != nil || len(cancel) == 0 {
		return false, err
	}
	return true, settleDone(ctx, tx, op.LocalSeq, now, "", cancelledNote(now))
}

// UnsentUpdates is the drawer ids of the update_drawer ops not landed:
// unsent, or in flight and not maybe applied (a send that fails queues it
// again, under the delete's hold). A delete_by_source finds which of them
// it removed (an update names its drawer, not the drawer's source), to
// cancel them (CancelUnsentWrites, takeBackRequeued).
func (s *Store) UnsentUpdates(ctx context.Context) ([]string, error) {
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE (`+unsent+` OR state='inflight' AND maybe_applied=0) ORDER BY local_seq`)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var ids []string
	for _, o := range ops {
		if rec, _ := catalogue.Lookup(o.Tool); rec.Name == "update_drawer" {
			if id := gjson.GetBytes(o.Payload, "drawer_id").String(); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// WrittenHere is the drawers (by id) a write of this device's names that
// is not on the primary as written: queued, in flight, in doubt or held
// (their causal keys), or an update dead there. The local palace's text
// of them is this device's; the primary's may be the one it replaced.
// It reads the pending ops' keys and the dead updates only.
func (s *Store) WrittenHere(ctx context.Context) (map[string]bool, error) {
	ids, err := queryAll(ctx, s.db, func(r rowScanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT substr(key, 8) FROM op_keys WHERE key GLOB 'drawer:*'
		UNION SELECT IFNULL(json_extract(payload_json, '$.drawer_id'), '') FROM ops WHERE state='dead' AND tool_name=? AND json_valid(payload_json)`,
		catalogue.Prefix+"update_drawer")
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	here := make(map[string]bool, len(ids))
	for _, id := range ids {
		here[id] = id != ""
	}
	return here, nil
}

// cutCheckpoint takes the items drop names (and its diary, with diary)
// out of an unsent checkpoint's payload, every other byte as it was, and
// gives it the causal keys of what is left. whole: nothing would be left
// (the caller cancels it, payload untouched); n: 1 when it was cut.
func cutCheckpoint(ctx context.Context, tx *sql.Tx, o Op, drop func(map[string]any) bool, diary bool) (whole bool, n int, err error) {
	var a map[string]any
	if json.Unmarshal(o.Payload, &a) != nil {
		return false, 0, nil // not an object: the primary refuses it
	}
	out := []byte(o.Payload)
	items, _ := a["items"].([]any)
	kept, cut := 0, false
	for i := len(items) - 1; i >= 0 && err == nil; i-- {
		if m, ok := items[i].(map[string]any); ok && drop(m) {
			out, err = sjson.DeleteBytes(out, "items."+strconv.Itoa(i))
			cut = true
			continue
		}
		kept++
	}
	_, hasDiary := a["diary"].(map[string]any)
	if hasDiary && diary && err == nil {
		out, err = sjson.DeleteBytes(out, "diary")
		hasDiary, cut = false, true
	}
	switch {
	case err != nil:
		return false, 0, fmt.Errorf("cutting checkpoint %d: %w", o.LocalSeq, err)
	case !cut:
		return false, 0, nil
	case kept == 0 && !hasDiary:
		return true, 0, nil
	}
	if err := json.Unmarshal(out, &a); err != nil {
		return false, 0, fmt.Errorf("cutting checkpoint %d: %w", o.LocalSeq, err)
	}
	// Its content changed: no longer one op with an identical checkpoint.
	if _, err := tx.ExecContext(ctx, `UPDATE ops SET payload_json=?, dedupe_key='op:'||op_id WHERE local_seq=?`, string(out), o.LocalSeq); err != nil {
		return false, 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM op_keys WHERE local_seq=?`, o.LocalSeq); err != nil {
		return false, 0, err
	}
	rec, _ := catalogue.Lookup(o.Tool)
	return false, 1, insertKeys(ctx, tx, o.LocalSeq, rec.CausalKeys(a))
}

// DeletedEntry is a diary entry deleted on this device, as
// CancelUnsentDiaries looks for its write: its id in the local palace,
// agent (lower-cased), text, wing, topic, and when the local palace wrote
// it (zero: not known).
type DeletedEntry struct {
	ID, Agent, Text, Wing, Topic string
	Written                      time.Time
}

// entryKey is the meta row naming the op that carries a diary entry the
// local palace wrote (by its local id) to the primary.
func entryKey(id string) string { return "entry:" + id }

// entryWindow: an entry's op is queued just after the local palace wrote
// it; an older op (whose entry the outbox did not note) is taken for the
// entry only if queued this soon after it.
const entryWindow = 2 * time.Second

// entryLead: a write is in the outbox as an intent before the local
// palace writes its entry; one given up before the answer (the write
// grace after a cancel, the stop's grace, a killed edge) has no entry
// noted, and is taken for an entry written this long after it at most
// (a slow local palace's write; the write grace is 30 s).
const entryLead = 10 * time.Minute

// CancelUnsentDiaries is CancelUnsentWrites for deleted diary entries:
// each entry's own op, if it is unsent, is cancelled (a diary_write) or
// loses its diary (a checkpoint). The op is the one the outbox noted for
// the entry's local id when it was queued; an entry it noted no op for
// (queued by an older edge) is matched by agent, text, wing and topic, on
// a diary_write queued within entryWindow after the entry was written.
// An entry already sent cancels nothing: not another entry's write.
func (s *Store) CancelUnsentDiaries(ctx context.Context, entries []DeletedEntry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	return s.cancelUnsent(ctx, "diary entries", func(tx *sql.Tx) ([]int64, int, error) {
		var cancel []int64
		cut := 0
		for _, en := range entries {
			o, ok, err := entryOp(ctx, tx, en)
			if err != nil || !ok || !isUnsent(o) || slices.Contains(cancel, o.LocalSeq) {
				if err != nil {
					return nil, 0, err
				}
				continue
			}
			if rec, _ := catalogue.Lookup(o.Tool); rec.Name == "checkpoint" {
				whole, n, err := cutCheckpoint(ctx, tx, o, func(map[string]any) bool { return false }, true)
				if err != nil {
					return nil, 0, err
				}
				cut += n
				if !whole {
					continue
				}
			}
			cancel = append(cancel, o.LocalSeq)
		}
		return cancel, cut, nil
	})
}

// entryOp is the op that writes en on the primary, if any, in whatever
// state: the one the outbox noted for en's local id when it was queued
// (none when that op is gone), else the diary_write (or checkpoint) of
// en's agent, text, wing and topic, with no entry noted, queued nearest
// to en's writing, from entryLead before it (an intent given up before
// the local palace answered: in the outbox before the entry was written,
// its id never known) to entryWindow after (an op an older edge queued
// once the local palace answered). CancelUnsentDiaries cancels it if it
// is unsent; DiaryCopy names its copy on the primary once it landed: the
// same op, so an entry already sent cancels nothing, and an entry whose
// write is cancelled names no copy.
func entryOp(ctx context.Context, tx querier, en DeletedEntry) (Op, bool, error) {
	var opID string
	if en.ID != "" {
		v, err := querierMeta(ctx, tx, entryKey(en.ID))
		if err != nil {
			return Op{}, false, err
		}
		opID = v
	}
	if opID != "" {
		ops, err := queryAll(ctx, tx, scanOp, `SELECT `+opCols+` FROM ops WHERE op_id=?`, opID)
		return first(ops), len(ops) > 0, err
	}
	if en.Written.IsZero() {
		return Op{}, false, nil
	}
	at := en.Written.UnixMilli()
	ops, err := queryAll(ctx, tx, scanOp, `SELECT `+opCols+` FROM ops
		WHERE created_at >= ? AND created_at < ? AND op_id NOT IN (SELECT value FROM meta WHERE key LIKE 'entry:%')
		ORDER BY local_seq`, at-entryLead.Milliseconds(), at+entryWindow.Milliseconds())
	if err != nil {
		return Op{}, false, err
	}
	ops = slices.DeleteFunc(ops, func(o Op) bool { return !writesEntry(o, en) })
	if len(ops) == 0 {
		return Op{}, false, nil
	}
	off := func(o Op) int64 { d := o.CreatedAt.UnixMilli() - at; return max(d, -d) }
	return slices.MinFunc(ops, func(a, b Op) int { return cmp.Compare(off(a), off(b)) }), true, nil
}

// writesEntry reports an op whose diary entry (a diary_write's, a
// checkpoint's diary) is en's: its agent, text, wing and topic.
func writesEntry(o Op, en DeletedEntry) bool {
	a, _ := diaryOf(o)
	if a == nil {
		return false
	}
	agent, _ := a["agent_name"].(string)
	topic, _ := a["topic"].(string)
	return catalogue.PythonLower(catalogue.SanitizedName(agent)) == en.Agent && catalogue.DiaryEntry(a) == en.Text &&
		catalogue.DiaryWingFor(a) == en.Wing && cmp.Or(topic, "general") == cmp.Or(en.Topic, "general")
}

// isUnsent: o is one a delete may take back (unsent, as unsent says).
func isUnsent(o Op) bool { return (o.State == Queued || o.State == Held) && !o.MaybeApplied }

func first(ops []Op) Op {
	if len(ops) == 0 {
		return Op{}
	}
	return ops[0]
}

func querierMeta(ctx context.Context, q querier, key string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key=?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// cancelUnsent marks done, unsent, the ops find picks in one transaction
// (what names them in an error), and says how many it cancelled or cut
// (find's count of ops it cut, in the same transaction).
func (s *Store) cancelUnsent(ctx context.Context, what string, find func(*sql.Tx) ([]int64, int, error)) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: cancelling %s: %w", what, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	seqs, cut, err := find(tx)
	if err != nil {
		return 0, fmt.Errorf("outbox: cancelling %s: %w", what, err)
	}
	for _, seq := range seqs {
		if err := settleDone(ctx, tx, seq, s.now(), "", cancelledNote(s.now())); err != nil {
			return 0, fmt.Errorf("outbox: cancelling %s: %w", what, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: cancelling %s: %w", what, err)
	}
	s.ringAll()
	return len(seqs) + cut, nil
}

// cancelledNote is the error_json of an op a delete on this device took
// back.
func cancelledNote(now time.Time) string {
	return noteOf(Cancelled, "deleted on this device before it was sent: never sent", now)
}

// Delivered records an op in doubt (or any pending op) as landed on the
// primary, on the operator's word that it is there. It is never sent.
func (s *Store) Delivered(ctx context.Context, id string) (Op, error) {
	o, _, err := s.operatorDone(ctx, id, Delivered, "recorded as delivered by the operator: never sent again")
	return o, err
}

// FoundOnPrimary settles a dead op whose write a later look-up found on
// the primary (a join run again): done, never sent again.
func (s *Store) FoundOnPrimary(ctx context.Context, id string) (Op, error) {
	o, _, err := s.operatorDone(ctx, id, Delivered, "found on the primary by a later look-up: never sent again")
	return o, err
}

// operatorDone records op id done unsent (kind, msg); theirs: it left a
// note that the local palace takes the primary's text of the drawer.
func (s *Store) operatorDone(ctx context.Context, id string, kind Kind, msg string) (o Op, theirs bool, err error) {
	o, err = s.GetByID(ctx, id)
	if err != nil {
		return Op{}, false, err
	}
	if o.State == Done {
		return o, false, errFinal(o)
	}
	also, says := theirsOnDrop(ctx, o, kind)
	if also != nil {
		msg += "; " + says
	}
	if o.State == Inflight {
		msg += InFlightAtSettle
	}
	if err := s.doneUnsent(ctx, o, kind, msg, also); err != nil {
		return Op{}, false, err
	}
	s.notify(o.ID)
	s.ringAll()
	o, err = s.Get(ctx, o.LocalSeq)
	return o, also != nil, err
}

// InFlightAtSettle ends the message of an op an operator dropped or
// recorded as delivered while it was in flight (a running edge sending
// it, or one stopped mid-send): the flusher's record of that send does
// not undo it (settleSent), but the send may land.
const InFlightAtSettle = "; it was in flight at the time: that send may have landed on the primary"

// errChanged: an op changed between an operator command's read and its
// write.
var errChanged = errors.New("changed meanwhile")

// doneUnsent records o done without a send, on an operator's word or
// the policy's (kind, msg: its error_json), and whatever also records
// with it (nil: nothing), if o is still as read: else it says what
// changed it meanwhile (a flusher's record, another command).
func (s *Store) doneUnsent(ctx context.Context, o Op, kind Kind, msg string, also func(*sql.Tx) error) error {
	now := s.now()
	e, _ := json.Marshal(map[string]any{"kind": kind, "message": msg, "at": now.UTC()}) // plain values: they encode
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	ok, err := asLeft(tx.ExecContext(ctx, `UPDATE ops SET state='done', flushed_at=?, error_json=? WHERE `+leftAs, now.UnixMilli(), string(e), o.LocalSeq, o.State.String(), o.Attempts))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("op %s %w (an edge sent it, or it was settled): see `devbox-config edge outbox list --all`, and try again", o.Short(), errChanged)
	}
	if err := freeDone(ctx, tx, o.LocalSeq, now, ""); err != nil {
		return err
	}
	if also != nil {
		if err := also(tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// LastErrorFrom is LastError, made printable (it holds the primary's
// words), when it came from a send to url, the primary URL .env names
// now, or from one not known ("": it came from another URL, no word on
// this primary's state).
func (st Stats) LastErrorFrom(url string) string {
	if st.LastErrorURL != "" && st.LastErrorURL != url {
		return ""
	}
	return mailbox.Printable(st.LastError)
}

// Stats summarises the queue for `edge status`.
type Stats struct {
	ByState      map[State]int `json:"by_state"`
	OldestQueued *time.Time    `json:"oldest_queued,omitempty"`
	LastFlush    *time.Time    `json:"last_flush,omitempty"`
	LastError    string        `json:"last_error,omitempty"`
	// LastErrorURL is the primary URL LastError came from ("": not
	// known: recorded before the URL was, or the primary names none).
	LastErrorURL string `json:"last_error_url,omitempty"`
	// LastErrorPast: a send got through after LastError (LastFlush is
	// later), so it is no word on the primary's state now.
	LastErrorPast bool `json:"last_error_past,omitempty"`
	// QueuedFor is the primary URL (no credentials) the ops were queued
	// for, the last one if several ("": not known, queued before it was
	// recorded).
	QueuedFor string `json:"queued_for,omitempty"`
	// Dead, InDoubt and Held list (up to 100 of) the ops that wait for
	// an operator or the policy.
	Dead    []Op `json:"dead,omitempty"`
	InDoubt []Op `json:"in_doubt,omitempty"`
	Held    []Op `json:"held,omitempty"`
	// Intents lists (up to 100 of) the writes in the outbox before the
	// local palace answered (intent.go): its answer settles each, or, left
	// by a killed edge, an edge running on, the next edge start or `edge
	// flush` holds it and the policy releases it.
	Intents []Op `json:"intents,omitempty"`
	// BehindDelete lists (up to 100 of) the queued update_drawer ops a
	// pending delete_by_source holds (heldByDelete): sent, or cancelled
	// with the drawers it removed, once the local palace answers it.
	BehindDelete []Op `json:"behind_delete,omitempty"`
	// LeftOut lists (up to 100 of) the checkpoints done without items an
	// admin deleted on the primary, as long as the outbox keeps them.
	LeftOut []Op `json:"left_out,omitempty"`
	// Closed lists (up to 100 of) the kg_invalidates done with their fact
	// closed on the primary already (DeadOp.Closed): their end not kept.
	Closed []Op `json:"already_closed,omitempty"`
	// OrphanedIntents counts the intents whose edge is gone (live.go):
	// an edge running on this palace sends them within its Lease
	// (Flusher.Adopt), else an edge's start or `edge flush`.
	OrphanedIntents int `json:"orphaned_intents,omitempty"`
	// StayedLocal counts the writes the local palace took that an edge
	// could not put here (stayedlocal.go, its own file), one record for
	// each primary they were meant for.
	StayedLocal []StayedLocal `json:"stayed_local,omitempty"`
	// StayedLocalErr says why that file could not be read ("": it was,
	// or there is none): the rest is read all the same (attack42 M2).
	StayedLocalErr string `json:"stayed_local_error,omitempty"`
	FlushOwner     string `json:"flush_owner,omitempty"`
	Identity       string `json:"identity"`
	// Copied: this outbox is a copy of another's file (copy.go).
	Copied *Copied `json:"copied,omitempty"`
	// QueuedAs counts the ops not done yet (intents aside) by the device
	// the gateway named the token when each was queued (Op.TokenDevice;
	// none counted for ""): doctor compares it with the device the
	// gateway names the token now (failure.go's OtherDevice).
	QueuedAs map[string]int `json:"queued_as,omitempty"`
	// QueuedBeforeCopy is QueuedAs of the ops queued before this outbox
	// was copied (Copied.QueuedBefore; nil: no copy recorded, or one that
	// does not say): the original machine holds them too, and sends them.
	QueuedBeforeCopy map[string]int `json:"queued_before_copy,omitempty"`
}

// lastFlushAndError reads the last flush that got through and the last
// failed send into st, and whether that failure came before the flush.
func (s *Store) lastFlushAndError(ctx context.Context, st *Stats) error {
	lastFlush, err := s.Meta(ctx, "last_flush")
	if err != nil {
		return err
	}
	if lastFlush != "" {
		t, err := time.Parse(time.RFC3339Nano, lastFlush)
		if err != nil {
			return fmt.Errorf("outbox: last_flush %q: %w", lastFlush, err)
		}
		st.LastFlush = &t
	}
	if st.LastError, err = s.Meta(ctx, "last_error"); err != nil {
		return err
	}
	if st.LastErrorURL, err = s.Meta(ctx, metaLastErrorURL); err != nil {
		return err
	}
	if st.QueuedFor, err = s.Meta(ctx, metaQueuedFor); err != nil {
		return err
	}
	at, err := s.Meta(ctx, metaLastErrorAt)
	if err != nil {
		return err
	}
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil && st.LastFlush != nil {
		st.LastErrorPast = st.LastFlush.After(t) // none recorded (an older edge's error): shown as current, as it was
	}
	return nil
}

// Waiting is how many ops are not done.
func (st Stats) Waiting() int {
	n := 0
	for k, v := range st.ByState {
		if k.Pending() {
			n += v
		}
	}
	return n
}

// Stats reads the queue's state; any read that fails is the error, but
// for the record of writes that stayed local (StayedLocalErr).
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByState: map[State]int{Queued: 0, Inflight: 0, Done: 0, Dead: 0, InDoubt: 0, Held: 0, Intent: 0}, Identity: s.identity}
	type count struct {
		state State
		n     int
	}
	counts, err := queryAll(ctx, s.db, func(r rowScanner) (c count, err error) { err = r.Scan(&c.state, &c.n); return }, `SELECT state, COUNT(*) FROM ops GROUP BY state`)
	if err != nil {
		return st, fmt.Errorf("outbox: %w", err)
	}
	for _, c := range counts {
		st.ByState[c.state] = c.n
	}
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(created_at) FROM ops WHERE state IN ('queued','inflight')`).Scan(&oldest); err != nil {
		return st, fmt.Errorf("outbox: %w", err)
	}
	if oldest.Valid {
		t := time.UnixMilli(oldest.Int64)
		st.OldestQueued = &t
	}
	if err := s.lastFlushAndError(ctx, &st); err != nil {
		return st, err
	}
	l, err := readLease(ctx, s.db)
	if err != nil {
		return st, fmt.Errorf("outbox: %w", err)
	}
	if l.Owner != "" && time.UnixMilli(l.Expires).After(s.now()) && (l.Live == "" || !s.gone(l.Live)) { // a dead holder flushes nothing
		st.FlushOwner = l.Owner
	}
	if st.OrphanedIntents, err = s.orphanedIntents(ctx); err != nil {
		return st, err
	}
	if st.QueuedAs, err = s.queuedAs(ctx, math.MaxInt64); err != nil {
		return st, err
	}
	if st.Copied, err = s.CopyRecord(ctx); err != nil {
		return st, err
	}
	if st.Copied != nil && st.Copied.Next > 0 {
		if st.QueuedBeforeCopy, err = s.queuedAs(ctx, st.Copied.Next); err != nil {
			return st, err
		}
	}
	if st.StayedLocal, err = ReadStayedLocal(s.path); err != nil {
		st.StayedLocalErr = err.Error() // its own finding: the outbox is fine
	}
	return st, s.lists(ctx, &st)
}

// queuedAs is Stats.QueuedAs, of the ops below local_seq below.
func (s *Store) queuedAs(ctx context.Context, below int64) (map[string]int, error) {
	type count struct {
		device string
		n      int
	}
	counts, err := queryAll(ctx, s.db, func(r rowScanner) (c count, err error) { err = r.Scan(&c.device, &c.n); return },
		`SELECT token_device, COUNT(*) FROM ops WHERE state NOT IN ('done','intent') AND token_device<>'' AND token_device NOT GLOB '[?]*' AND local_seq<? GROUP BY token_device`, below)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	by := map[string]int{}
	for _, c := range counts {
		by[c.device] = c.n
	}
	return by, nil
}

// lists reads (up to 100 of) each of Stats' lists of ops.
func (s *Store) lists(ctx context.Context, st *Stats) (err error) {
	if st.Dead, err = s.List(ctx, 100, Dead); err == nil {
		if st.InDoubt, err = s.List(ctx, 100, InDoubt); err == nil {
			if st.Held, err = s.List(ctx, 100, Held); err == nil {
				if st.Intents, err = s.List(ctx, 100, Intent); err == nil {
					if st.BehindDelete, err = s.BehindDelete(ctx, 100); err == nil {
						if st.LeftOut, err = s.LeftOut(ctx, 100); err == nil {
							st.Closed, err = s.Closed(ctx, 100)
						}
					}
				}
			}
		}
	}
	return err
}

// orphanedIntents counts the intents whose owner is gone (ResolveIntents
// holds them).
func (s *Store) orphanedIntents(ctx context.Context) (int, error) {
	owners, err := s.goneIntents(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	n := 0
	for _, k := range owners {
		n += k
	}
	return n, nil
}

// Pending counts the ops not done and gives the oldest one's local_seq
// (0 with none). It reads only the pending ops' index, so it stays cheap
// however many done ops the outbox keeps: a progress display polls it.
func (s *Store) Pending(ctx context.Context) (n int, oldest int64, err error) {
	var first sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(local_seq) FROM ops WHERE state <> 'done'`).Scan(&n, &first); err != nil {
		return 0, 0, fmt.Errorf("outbox: %w", err)
	}
	return n, first.Int64, nil
}

// ToSend counts the ops queued or in flight: what a drain still sends
// (a refused or in-doubt op waits for an operator instead). Like Pending
// it reads the pending ops only: join's progress polls it.
func (s *Store) ToSend(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM ops WHERE state IN ('queued','inflight')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	return n, nil
}

// UnsentFacts counts the knowledge-graph writes (the ops with a fact:
// causal key: kg_add, kg_invalidate, kg_supersede) not on the primary yet
// and still meant to be: queued, in flight, in doubt or held, never dead;
// with an entity (one with an id), only those whose subject or object
// (old or new) is that entity, as MemPalace ids entities
// (catalogue.EntityID). The edge's KG reads ask it at every call: it
// reads the pending ops' rows only.
func (s *Store) UnsentFacts(ctx context.Context, entity string) (int, error) {
	ids, err := s.factOps(ctx, `'queued','inflight','indoubt','held'`, entity)
	return len(ids), err
}

// DeadFacts are the ids of the dead knowledge-graph writes about entity
// (every one for ""), as UnsentFacts counts: the later writes of their
// objects wait behind them.
func (s *Store) DeadFacts(ctx context.Context, entity string) ([]string, error) {
	return s.factOps(ctx, `'dead'`, entity)
}

// factOps are the ids of the ops in states (an SQL list) with a fact:
// causal key whose subject or object is entity (any for one with no id).
func (s *Store) factOps(ctx context.Context, states, entity string) ([]string, error) {
	type row struct{ id, names string }
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.names)
	}, `SELECT o.op_id, json_extract(payload_json,'$.subject','$.object','$.old_object','$.new_object') FROM ops o
		WHERE o.state IN (`+states+`)
		AND EXISTS (SELECT 1 FROM op_keys k WHERE k.local_seq=o.local_seq AND k.key GLOB 'fact:*') ORDER BY o.local_seq`)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	id := catalogue.EntityID(entity)
	var ids []string
	for _, x := range rows {
		if id == "" || namesEntity(gjson.Parse(x.names), id) {
			ids = append(ids, x.id)
		}
	}
	return ids, nil
}

// namesEntity: one of names (a JSON array of a KG write's subject and
// objects) is the entity of id.
func namesEntity(names gjson.Result, id string) bool {
	return slices.ContainsFunc(names.Array(), func(v gjson.Result) bool { return v.Type == gjson.String && catalogue.EntityID(v.Str) == id })
}

// DeadOp is a dead op as its agent is told of it (the edge's note), or a
// checkpoint done without some of its items (LeftOut).
type DeadOp struct {
	ID, Tool string
	// Wing and Room are what its arguments name, and Object the drawer,
	// the knowledge graph's subject or the source ("": not named).
	Wing, Room, Object string
	// Reason is the primary's refusal, as its last attempt recorded it;
	// for LeftOut, which items were left out and why.
	Reason string
	// LeftOut: a checkpoint the primary took without the items an admin
	// deleted there (settle.go's leftOut), done, not dead.
	LeftOut bool
	// Closed: a kg_invalidate of a fact the primary held closed already
	// (AlreadyClosed), or a kg_add of one it held current already or a
	// kg_supersede held by another current value (AlreadyCurrent); Reason
	// is the gateway's note; done, nothing changed.
	Closed bool
	// Warned: a coordination write the gateway took with a warning (its
	// to_agent is no device's agent; Reason is the warning), done.
	Warned bool
	// Kind is its last failure's kind (OtherDevice: held, never sent).
	Kind Kind
}

// Short is the op id's short form, as Op.Short.
func (d DeadOp) Short() string { return Op{ID: d.ID}.Short() }

// leftOutOps is the WHERE of the done checkpoints the gateway left items
// out of (settle.go's leftOut), on their own index (ops_left_out): the
// outbox keeps them until its retention prunes them.
const leftOutOps = `state='done' AND tool_name='mempalace_checkpoint' AND error_json IS NOT NULL
	AND CASE WHEN json_valid(error_json) THEN json_extract(error_json,'$.kind') END='deleted-on-primary'`

// closedNotes prefixes the meta key of each done kg_invalidate the gateway
// answered already_closed (AlreadyClosed; the value: the end kept), and
// of each done kg_add or kg_supersede it answered held_by (AlreadyCurrent;
// "held"): the agent is told of them as of a dead op, and scanning the done ops for
// them would read every one (28 ms in 20,000), where the notes' keys are
// an index of their own. Prune drops a note with its op.
const closedNotes = "closed:"

// closedKey is the meta key of op id's already_closed note.
func closedKey(id string) string { return closedNotes + id }

// closedOps is the WHERE of the done kg_invalidates a gateway answered
// already_closed, found by their notes (closedNotes) on the ops' op_id index.
const closedOps = `op_id IN (SELECT substr(key, length('` + closedNotes + `')+1) FROM meta WHERE key GLOB '` + closedNotes + `*')`

// warnedNotes prefixes the meta key of each done coordination write the
// gateway answered with a warning (Warned: its agent was told "queued"
// when it wrote it, and is told the warning as of a dead op), as
// closedNotes.
const warnedNotes = "warned:"

// Warned is a done op's note's kind: the gateway took it with a warning.
const Warned Kind = "warned"

// WarningTold forgets the warned note of op id: its agent had the warning
// in the write's own answer (sent at once), so it is not told again.
func (s *Store) WarningTold(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM meta WHERE key=?`, warnedNotes+id); err != nil {
		return fmt.Errorf("outbox: forget the warning told of %s: %w", id, err)
	}
	return nil
}

// warnedOps is the WHERE of the done writes noted warnedNotes.
const warnedOps = `op_id IN (SELECT substr(key, length('` + warnedNotes + `')+1) FROM meta WHERE key GLOB '` + warnedNotes + `*')`

// DeadOps lists the dead ops, the checkpoints done with items left out
// (LeftOut) and the kg_invalidates done with their fact closed already
// (Closed), oldest first, reading only their own indexes and rows (the
// payload's room and drawer id, the error's message), so the edge asks at
// any tool answer whose News changed.
func (s *Store) DeadOps(ctx context.Context) ([]DeadOp, error) {
	const cols = `op_id, tool_name, wing,
		CAST(COALESCE(CASE WHEN json_valid(payload_json) THEN json_extract(payload_json,'$.room') END, '') AS TEXT),
		CAST(COALESCE(CASE WHEN json_valid(payload_json) THEN COALESCE(json_extract(payload_json,'$.drawer_id'), json_extract(payload_json,'$.subject'), json_extract(payload_json,'$.source_file')) END, '') AS TEXT),
		CAST(COALESCE(CASE WHEN json_valid(error_json) THEN json_extract(error_json,'$.message') END, '') AS TEXT),
		CAST(COALESCE(CASE WHEN json_valid(error_json) THEN json_extract(error_json,'$.kind') END, '') AS TEXT), local_seq`
	ops, err := queryAll(ctx, s.db, func(r rowScanner) (DeadOp, error) {
		var d DeadOp
		var seq int64
		err := r.Scan(&d.ID, &d.Tool, &d.Wing, &d.Room, &d.Object, &d.Reason, &d.Kind, &seq, &d.LeftOut, &d.Closed, &d.Warned)
		return d, err
	}, `SELECT `+cols+`, 0, 0, 0 FROM ops WHERE state='dead'
		UNION ALL SELECT `+cols+`, 1, 0, 0 FROM ops WHERE `+leftOutOps+`
		UNION ALL SELECT `+cols+`, 0, 1, 0 FROM ops WHERE state='done' AND `+closedOps+`
		UNION ALL SELECT `+cols+`, 0, 0, 1 FROM ops WHERE state='done' AND `+warnedOps+` ORDER BY local_seq`)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return ops, nil
}

// LeftOut lists (up to limit of) the checkpoints done with items left
// out (DeadOp.LeftOut), oldest first.
func (s *Store) LeftOut(ctx context.Context, limit int) ([]Op, error) {
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE `+leftOutOps+` ORDER BY local_seq LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return ops, nil
}

// Closed lists (up to limit of) the kg_invalidates done with their fact
// closed already (DeadOp.Closed), oldest first.
func (s *Store) Closed(ctx context.Context, limit int) ([]Op, error) {
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE state='done' AND `+closedOps+` ORDER BY local_seq LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return ops, nil
}

// metaNews is the meta key counting the ops any process's flusher made
// dead, or settled done with a note for the agent (DeadOps), bumped in
// the transaction that settles each (addNews).
const metaNews = "news"

// addNews counts one more op DeadOps lists, in tx.
func addNews(ctx context.Context, tx querier) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, '1') ON CONFLICT(key) DO UPDATE SET value=CAST(value AS INTEGER)+1`, metaNews)
	return err
}

// News counts the ops any process's flusher (this edge's, `edge flush`,
// another session's edge) made dead, or settled done with a note for the
// agent: a cheap "is there news?" (one row read by its key) before
// DeadOps, which reads their indexes.
func (s *Store) News(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT CAST(value AS INTEGER) FROM meta WHERE key=?`, metaNews).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("outbox: read its news: %w", err)
	}
	return n, nil
}

// Wait blocks until the op reached the primary (done), died or went in
// doubt, an attempt to send it failed (it is queued with the error: the
// flusher sends it again after its backoff or the primary's recovery), or
// ctx ends; it returns the op as it then is. The flusher may be another
// process, so the row is re-read on every wake and at least every 50 ms.
func (s *Store) Wait(ctx context.Context, opID string) (Op, error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[opID] = append(s.waiters[opID], ch)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiters[opID] = slices.DeleteFunc(s.waiters[opID], func(w chan struct{}) bool { return w == ch })
		if len(s.waiters[opID]) == 0 {
			delete(s.waiters, opID)
		}
		s.mu.Unlock()
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		o, err := s.GetByID(ctx, opID)
		if err != nil {
			return o, err
		}
		if o.State == Done || o.State == Dead || o.State == InDoubt || o.State == Queued && len(o.Error) > 0 {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-ch:
		case <-t.C:
		}
	}
}

func (s *Store) notify(opID string) {
	s.mu.Lock()
	for _, ch := range s.waiters[opID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// Blocker is the earliest pending op sharing a causal key with op: what op
// waits for ("" when nothing holds it back).
func (s *Store) Blocker(ctx context.Context, op Op) (Op, bool, error) {
	o, err := scanOp(s.db.QueryRowContext(ctx, `SELECT `+opCols+` FROM ops WHERE local_seq = (
		SELECT MIN(e.local_seq) FROM op_keys k JOIN op_keys e ON e.key=k.key AND e.local_seq<k.local_seq WHERE k.local_seq=?)`, op.LocalSeq))
	if errors.Is(err, sql.ErrNoRows) {
		return Op{}, false, nil
	}
	return o, err == nil, err
}

// Behind is how many pending ops wait behind op: later ops sharing a
// causal key with it, which are not sent while it is pending.
func (s *Store) Behind(ctx context.Context, op Op) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT e.local_seq) FROM op_keys k JOIN op_keys e ON e.key=k.key AND e.local_seq>k.local_seq WHERE k.local_seq=?`, op.LocalSeq).Scan(&n)
	return n, err
}

// Release settles a held op once the policy parses: queued with payload
// (under a new op id: the payload may have changed, and no send has used
// the old one) if replicate, else done as kept local.
func (s *Store) Release(ctx context.Context, o Op, payload json.RawMessage, replicate bool) error {
	if !replicate || payload == nil {
		err := s.doneUnsent(ctx, o, Local, "kept local by the replication policy, once it parsed", nil)
		if errors.Is(err, errChanged) {
			return nil // released meanwhile by another process (the edge, `edge flush`)
		}
		return err
	}
	rec, _ := catalogue.Lookup(o.Tool)
	var args map[string]any
	if err := json.Unmarshal(payload, &args); err != nil {
		return fmt.Errorf("op %s: %w", o.Short(), err)
	}
	id := NewOpID()
	if rec.OpStamp {
		var err error
		if payload, err = stampOpID(payload, id); err != nil {
			return err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	res, err := tx.ExecContext(ctx, `UPDATE ops SET state='queued', op_id=?, dedupe_key=?, payload_json=? WHERE local_seq=? AND state='held'`, id, "op:"+id, string(payload), o.LocalSeq)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		// Released meanwhile by another process (an edge adopting a killed
		// one's intents, `edge flush`), and maybe sent and done since: its
		// keys are not put back (review28 D1).
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM op_keys WHERE local_seq=?`, o.LocalSeq); err != nil {
		return err
	}
	if err := insertKeys(ctx, tx, o.LocalSeq, rec.CausalKeys(args)); err != nil {
		return err
	}
	// A held delete's tombstones go when it lands (settleDone), and an
	// update's base is sent with it (sendWrite): by its new id.
	if _, err := tx.ExecContext(ctx, `UPDATE tombstones SET op_id=? WHERE op_id<>'' AND op_id=?`, id, o.ID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET key=? WHERE key=?`, baseKey(id), baseKey(o.ID)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.ringAll()
	return nil
}
