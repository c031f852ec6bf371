package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// A write bound for the local palace is in the outbox before it is sent
// there, as an intent (Write.Intent): a kill (docker stop's SIGKILL)
// while the local palace is at it cannot lose it to the fleet, even if
// the orphaned local palace then applies it. The local answer settles
// it: taken, it is promoted (queued, or held); refused, it is abandoned
// (gone, as if never written). An intent nobody settled, because its edge
// was killed, is resolved by the next edge (or `edge flush`), or by an
// edge on this palace still running (Flusher.Adopt): held, then released
// by the policy like any held op, so it is sent. Whether the
// local palace applied it cannot be known then (the orphan may still be at
// it), and the payload is all a send needs: sent, the primary may hold a
// write this palace lacks (merged reads show it), as a write given up
// after the write grace does; not sent, the fleet would lose it. An
// intent whose edge still runs (another agent session's edge on this
// palace, its local palace slow) is not resolved: it names its owner,
// whose lock says it is alive (live.go), and its own answer settles it.
//
// A delete is in the outbox before it is sent to the local palace too
// (IntendDelete): the tombstones it leaves, a note of what it deletes,
// and, when it goes to the primary, its op as an intent. The local answer
// settles it: taken, the edge keeps it as before and drops the note
// (DeleteSettled); refused, the tombstones it added go (DeleteRefused)
// and its intent is abandoned. A note a killed edge left is resolved like
// an intent: the delete is kept (its tombstones stay, the unsent writes of
// what it deletes are cancelled, its intent is held and released; a
// delete_by_source's note goes on holding the updates of its source's
// drawers: heldByDelete). The user asked for it and the orphaned local
// palace may have applied it; taken back, the primary's copy would show
// again in this device's merged reads and its unsent writes would go out,
// undoing the delete. Whether
// the local palace applied it is not known then, nor for a delete given
// up at the stop grace: either is kept with its note marked unapplied
// (DeleteUnapplied), holding the local call, which the next edge sends to
// its local palace once it is up, ahead of any other call, so no local
// read shows the local copy; an answer that it is applied ("not found"
// too) settles it (DropUnapplied), a failure leaves it for the next (the
// local copy shows in local reads meanwhile). A
// tombstone alone would not hide it for good: an admin's goes when the
// delete lands on the primary. A delete's note names its owner too, and one
// whose edge runs is left to it, as an intent is.
//
// A write whose local call the local palace server's death cut (the edge
// queues it for the primary all the same) is noted too when sending it
// there again cannot double it (KeepCut): the next local palace started,
// this edge's restart of it or the next edge's, gets it before any other
// call, as a kept delete, and its answer drops the note.

// Promote settles an intent the local palace took: queued (held when the
// policy did not parse as it was written), with o's Ordinal (the local
// answer's: Write.Ordinal), entry noted as Enqueue does. An
// identical add_drawer or checkpoint already queued takes its place (this
// one is done, unsent), as Enqueue would have. An intent another process
// already resolved (a killed edge's successor started meanwhile) is
// returned as it is.
func (s *Store) Promote(ctx context.Context, o Op, held bool, entry string) (Op, error) {
	rec, _ := catalogue.Lookup(o.Tool)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	state, dedupe := Queued, "op:"+o.ID
	if held {
		state = Held
	} else if rec.Replay == catalogue.ServerDeduped {
		canon, err := canonical(o.Payload)
		if err != nil {
			return Op{}, fmt.Errorf("outbox: payload of %s: %w", o.Tool, err)
		}
		dedupe = "content:" + hash(o.Tool, string(canon))
		var existing int64
		if err := tx.QueryRowContext(ctx, `SELECT local_seq FROM ops WHERE dedupe_key=? AND state IN ('queued','inflight')`, dedupe).Scan(&existing); err == nil {
			if err := settleDone(ctx, tx, o.LocalSeq, s.now(), "", `{"kind":"cancelled","message":"an identical write was already queued: never sent"}`); err != nil {
				return Op{}, fmt.Errorf("outbox: %w", err)
			}
			o.LocalSeq = existing // its op is this write's
		} else if !errors.Is(err, sql.ErrNoRows) {
			return Op{}, fmt.Errorf("outbox: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ops SET state=?, dedupe_key=?, ordinal=? WHERE local_seq=? AND state='intent'`, state.String(), dedupe, o.Ordinal, o.LocalSeq); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if err := forgetTook(ctx, tx, o.Tool, o.Payload); err != nil {
		return Op{}, err
	}
	if entry != "" { // under the op id it has now (a release may have made it anew)
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) SELECT ?, op_id FROM ops WHERE local_seq=?
			ON CONFLICT(key) DO UPDATE SET value=excluded.value`, entryKey(entry), o.LocalSeq); err != nil {
			return Op{}, fmt.Errorf("outbox: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Op{}, fmt.Errorf("outbox: %w", err)
	}
	if !held {
		// Others too, though the intent rang them: the flusher that ring
		// woke may still hold the lease, and this process's would wait
		// Lease/4 for it (2.5 s, about 1 write in 160 when the local
		// palace answers in 1-2 ms, review28 S3).
		s.ringAll()
	}
	return s.Get(ctx, o.LocalSeq)
}

// Abandon settles an intent the local palace refused (or never got): it
// is gone, never sent. One another process already resolved is taken back
// if still unsent (done, unsent); one already sent stays sent. It says
// whether the write never went out: false when it was sent already, also
// when, refused by the primary and queued again, it is taken back now.
func (s *Store) Abandon(ctx context.Context, o Op) (bool, error) {
	sent := false
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	res, err := tx.ExecContext(ctx, `DELETE FROM ops WHERE local_seq=? AND state='intent'`, o.LocalSeq)
	if err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 { // SQLite always knows it
		var attempts int
		if err := tx.QueryRowContext(ctx, `SELECT attempts FROM ops WHERE local_seq=? AND `+unsent, o.LocalSeq).Scan(&attempts); errors.Is(err, sql.ErrNoRows) {
			return false, tx.Commit() // sent already, or gone
		} else if err != nil {
			return false, fmt.Errorf("outbox: %w", err)
		}
		msg := `{"kind":"cancelled","message":"the local palace refused it: never sent"}`
		if attempts > 0 {
			msg = `{"kind":"cancelled","message":"the local palace refused it after another edge process had sent it (not applied there: queued again): never sent again"}`
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ops SET state='done', flushed_at=? , error_json=? WHERE local_seq=?`, s.now().UnixMilli(), msg, o.LocalSeq); err != nil {
			return false, fmt.Errorf("outbox: %w", err)
		}
		sent = attempts > 0
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM op_keys WHERE local_seq=?`, o.LocalSeq); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	s.ringAll() // the ops behind it may go
	return !sent, nil
}

// ResolveIntents holds the intents a killed edge left unsettled: the
// policy then releases them (ReleaseHeld), as any held op; and keeps the
// deletes it left noted (resolveDeletes: the unsent writes they cover,
// the killed edge's intents among them, are cancelled). It says how many.
// The edge runs it at start, and from its flusher when an owner is gone
// (Flusher.Adopt); `edge flush` before it flushes. An intent or
// note whose owner still runs (another edge on this palace, its local
// palace slow) is left to it: its local answer settles it (live.go).
func (s *Store) ResolveIntents(ctx context.Context) (int, error) {
	owners, err := s.goneIntents(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: resolving the writes a stopped edge left unsettled: %w", err)
	}
	n := int64(0)
	for o := range owners {
		res, err := s.db.ExecContext(ctx, `UPDATE ops SET state='held' WHERE state='intent' AND owner=?`, o)
		if err != nil {
			return int(n), fmt.Errorf("outbox: resolving the writes a stopped edge left unsettled: %w", err)
		}
		k, _ := res.RowsAffected() // SQLite always knows it
		n += k
	}
	d, err := s.resolveDeletes(ctx)
	if err != nil {
		return int(n) + d, fmt.Errorf("outbox: resolving the deletes a stopped edge left unsettled: %w", err)
	}
	return int(n) + d, nil
}

// goneIntents counts the intents of each owner that is gone (live.go):
// those ResolveIntents holds.
func (s *Store) goneIntents(ctx context.Context) (map[string]int, error) {
	counts, err := s.intentOwners(ctx)
	if err != nil {
		return nil, err
	}
	gone := map[string]int{}
	for owner, n := range counts {
		if s.gone(owner) {
			gone[owner] = n
		}
	}
	return gone, nil
}

// intentOwners counts the intents of each owner. It reads the pending
// ops' index only (state<>'done' names it), not the done ops the outbox
// keeps: a running flusher asks at each wake (othersLeft).
func (s *Store) intentOwners(ctx context.Context) (map[string]int, error) {
	type count struct {
		owner string
		n     int
	}
	counts, err := queryAll(ctx, s.db, func(r rowScanner) (c count, err error) { err = r.Scan(&c.owner, &c.n); return },
		`SELECT owner, COUNT(*) FROM ops WHERE state='intent' AND state<>'done' GROUP BY owner`)
	if err != nil {
		return nil, err
	}
	by := make(map[string]int, len(counts))
	for _, c := range counts {
		by[c.owner] = c.n
	}
	return by, nil
}

// othersLeft says whether another edge process's intents or delete notes
// are in the outbox: some whose owner is gone (ResolveIntents resolves
// them), some whose owner still runs (its local answer settles them).
// The owners' locks are looked at only when there are some. Those naming
// no owner (an older build, a volume without file locks) are left to an
// edge's start, as before, and so is everything while this Store names no
// owner itself: its own would name none too.
func (s *Store) othersLeft(ctx context.Context) (gone, running bool, err error) {
	if s.owner == "" {
		return false, false, nil
	}
	owners, err := s.intentOwners(ctx)
	if err != nil {
		return false, false, fmt.Errorf("outbox: %w", err)
	}
	notes, err := s.deleteNotesUnder(ctx, deleteNotes)
	if err != nil {
		return false, false, err
	}
	for _, x := range notes {
		owners[x.note.Owner]++
	}
	for owner := range owners {
		switch {
		case owner == "" || owner == s.owner:
		case s.gone(owner):
			gone = true
		default:
			running = true
		}
	}
	return gone, running, nil
}

// PendingDelete is a delete in the outbox before its local answer.
type PendingDelete struct {
	key   string      // its note in meta
	added []Tombstone // the tombstones it added (one already there is left as it was)
}

// deleteNote is what a pending delete's note holds: what it deletes, for
// ResolveIntents to cancel the unsent writes of.
type deleteNote struct {
	Marks   []Tombstone    `json:"marks"`
	Entries []DeletedEntry `json:"entries,omitempty"`
	// Updated are a delete_by_source's drawers of its source (by base
	// name) with an update_drawer not landed: their updates are held while
	// the note is (heldByDelete), until the local answer says which of
	// them it removed (those are cancelled).
	Updated []string `json:"updated,omitempty"`
	// Call is the local palace's call (its tools/call params), sent again
	// when the delete was kept unapplied.
	Call json.RawMessage `json:"call,omitempty"`
	// Owner is the Store that waits for the local answer (live.go; "":
	// none known, an older build's note).
	Owner string `json:"owner,omitempty"`
	// Op is the delete's op for the primary ("": none queued).
	Op string `json:"op,omitempty"`
}

const (
	deleteNotes    = "deleting:"
	unappliedNotes = "unapplied:" // kept, not known applied by the local palace
	cutNotes       = "cut:"       // a write the local palace server's death cut (KeepCut)
)

// IntendDelete puts a delete in the outbox before it is sent to the local
// palace: the tombstones marks not already there (carried by the queued
// delete opID, "" for none), and a note of marks, entries, the drawers
// with an unsent update a delete_by_source may remove (updated), and the
// local call (nil: none to send again).
func (s *Store) IntendDelete(ctx context.Context, marks []Tombstone, entries []DeletedEntry, updated []string, opID string, call json.RawMessage) (PendingDelete, error) {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	p := PendingDelete{key: deleteNotes + hex.EncodeToString(b[:])}
	note, err := json.Marshal(deleteNote{Marks: marks, Entries: entries, Updated: updated, Call: call, Owner: s.owner, Op: opID})
	if err != nil {
		return p, fmt.Errorf("outbox: a delete's note: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return p, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, t := range marks {
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO tombstones(kind, key, agent, stamp, text, op_id, created_at, lifted_at, copies, write_op) VALUES(?,?,?,?,?,?,?,0,?,?)`,
			string(t.Kind), t.Key, t.Agent, t.Stamp, t.text(), opID, s.now().UnixMilli(), strings.Join(t.Copies, "\n"), t.WriteOp)
		if err != nil {
			return p, fmt.Errorf("outbox tombstones: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 { // SQLite always knows it
			p.added = append(p.added, t)
		}
	}
	if err := setMeta(ctx, tx, p.key, string(note)); err != nil {
		return p, fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return PendingDelete{}, fmt.Errorf("outbox: %w", err)
	}
	s.ringOthers() // as an intent's Enqueue: other edges' flushers look at its owner's lock from now on
	return p, nil
}

// DeleteSettled drops the note of a delete the local palace took, once
// the edge kept it (tombstones, cancelled writes, its op).
func (s *Store) DeleteSettled(ctx context.Context, p PendingDelete) error {
	defer s.ringAll() // the updates it held may go
	return dropMeta(ctx, s.db, p.key)
}

// dropMeta removes one meta row.
func dropMeta(ctx context.Context, db querier, key string) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM meta WHERE key=?`, key); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// keyedNote is a delete's note under its meta key.
type keyedNote struct {
	key  string
	note deleteNote
}

// deleteNotesUnder reads the delete notes whose keys begin with prefix.
func (s *Store) deleteNotesUnder(ctx context.Context, prefix string) ([]keyedNote, error) {
	type row struct{ key, note string }
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (x row, err error) { err = r.Scan(&x.key, &x.note); return x, err },
		`SELECT key, value FROM meta WHERE key GLOB ? ORDER BY key`, prefix+"*") // GLOB, not LIKE: it reads the key's index
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	out := make([]keyedNote, 0, len(rows))
	for _, x := range rows {
		k := keyedNote{key: x.key}
		if err := json.Unmarshal([]byte(x.note), &k.note); err != nil {
			return out, fmt.Errorf("outbox: a delete's note %s: %w", x.key, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// DeleteUnapplied keeps the note of a delete kept without the local
// palace's answer, as unapplied: the next edge sends it there again.
func (s *Store) DeleteUnapplied(ctx context.Context, p PendingDelete) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE meta SET key=? WHERE key=?`, unappliedNotes+strings.TrimPrefix(p.key, deleteNotes), p.key); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Unapplied is a kept delete the local palace may not have applied: its
// note's key, the local call to send again, and the drawers whose unsent
// updates it holds (a delete_by_source's: those it removed are cancelled
// once it is applied, the others go).
type Unapplied struct {
	Key     string
	Call    json.RawMessage
	Updated []string
	Op      string // its op for the primary ("": none queued)
}

// Unapplied lists the kept deletes to send to the local palace again.
func (s *Store) Unapplied(ctx context.Context) ([]Unapplied, error) {
	notes, err := s.deleteNotesUnder(ctx, unappliedNotes)
	var out []Unapplied
	for _, x := range notes {
		out = append(out, Unapplied{Key: x.key, Call: x.note.Call, Updated: x.note.Updated, Op: x.note.Op})
	}
	return out, err
}

// KeepCut notes the local call of a write the local palace server's death
// cut (it may or may not have applied it) and that is safe to send there
// again: the next local palace started gets it before any other call, as
// a kept delete, and its answer drops the note (DropUnapplied). Notes are
// listed in the order kept (Cut). It returns the note's key.
func (s *Store) KeepCut(ctx context.Context, call json.RawMessage) (string, error) {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	key := fmt.Sprintf("%s%016x-%s", cutNotes, s.now().UnixNano(), hex.EncodeToString(b[:]))
	note, err := json.Marshal(deleteNote{Call: call, Owner: s.owner})
	if err != nil {
		return "", fmt.Errorf("outbox: a cut write's note: %w", err)
	}
	if err := setMeta(ctx, s.db, key, string(note)); err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	return key, nil
}

// Cut lists the cut writes to send to the local palace again (KeepCut),
// in the order kept.
func (s *Store) Cut(ctx context.Context) ([]Unapplied, error) {
	notes, err := s.deleteNotesUnder(ctx, cutNotes)
	var out []Unapplied
	for _, x := range notes {
		out = append(out, Unapplied{Key: x.key, Call: x.note.Call})
	}
	return out, err
}

// SupersedeUnapplied takes out of the kept deletes not yet applied by the
// local palace what a write it took recreates (drawer ids, sources): sent
// again, they would remove the new write. A delete_drawers loses those
// ids; a delete with nothing left, its note (its tombstones stay, but
// for the lift that comes with the write), or, when it holds updates, its
// call: the next edge still finds which drawers it removed.
func (s *Store) SupersedeUnapplied(ctx context.Context, drawers, sources []string) error {
	if len(drawers)+len(sources) == 0 {
		return nil
	}
	notes, err := s.deleteNotesUnder(ctx, unappliedNotes)
	if err != nil {
		return err
	}
	for _, x := range notes {
		call, keep, err := supersede(x.note.Call, drawers, sources)
		switch {
		case err != nil:
			return fmt.Errorf("outbox: a kept delete's call %s: %w", x.key, err)
		case !keep && len(x.note.Updated) == 0:
			err = dropMeta(ctx, s.db, x.key)
		case !keep || call != nil:
			x.note.Call = call
			var b []byte
			if b, err = json.Marshal(x.note); err == nil {
				err = setMeta(ctx, s.db, x.key, string(b))
			}
		}
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	return nil
}

// supersede is a kept delete's local call without the drawers and sources
// written again: keep false when nothing is left, call nil when it is as
// it was.
func supersede(raw json.RawMessage, drawers, sources []string) (call json.RawMessage, keep bool, err error) {
	c := gjson.ParseBytes(raw)
	args := c.Get("arguments")
	switch rec, _ := catalogue.Lookup(c.Get("name").String()); rec.Name {
	case "delete_drawer":
		return nil, !slices.Contains(drawers, args.Get("drawer_id").String()), nil
	case "delete_by_source":
		return nil, !slices.Contains(sources, args.Get("source_file").String()), nil
	case "delete_drawers":
		var left []string
		for _, id := range args.Get("drawer_ids").Array() {
			if !slices.Contains(drawers, id.String()) {
				left = append(left, id.String())
			}
		}
		if len(left) == len(args.Get("drawer_ids").Array()) {
			return nil, true, nil
		}
		if len(left) == 0 {
			return nil, false, nil
		}
		out, err := sjson.SetBytes(raw, "arguments.drawer_ids", left)
		return out, true, err
	}
	return nil, true, nil
}

// KeptRemoved settles what the kept delete u removed from the local
// palace, once it is applied there: the unsent updates of the drawers
// gone are cancelled, and the primary's copies hidden as long as the
// delete has not landed there. Tombstones tied to its op go when it
// lands (settleDone); once it has landed, there is nothing left to hide,
// and none is added: a drawer filed again later with the same text shows.
// With no op (not sent to the primary), they stay, as any such delete's.
func (s *Store) KeptRemoved(ctx context.Context, u Unapplied, gone []string) error {
	if len(gone) == 0 {
		return nil
	}
	marks := make([]Tombstone, 0, len(gone))
	for _, id := range gone {
		marks = append(marks, Tombstone{Kind: TombDrawer, Key: id, OpID: u.Op})
	}
	landed, err := s.landed(ctx, u.Op)
	if err != nil {
		return err
	}
	if !landed {
		if err := s.AddTombstones(ctx, marks); err != nil {
			return err
		}
	}
	_, err = s.CancelDeleted(ctx, marks, nil)
	return err
}

// landed reports an op the primary took (done with its answer; not one
// dropped or recorded as delivered by an operator, nor one pruned).
func (s *Store) landed(ctx context.Context, opID string) (bool, error) {
	if opID == "" {
		return false, nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM ops WHERE op_id=? AND state='done' AND result_json IS NOT NULL`, opID).Scan(&n); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	return n > 0, nil
}

// DropUnapplied drops the note of a kept delete the local palace
// answered, once the updates it removed are cancelled: the others it held
// go; or that of a cut write it answered (KeepCut).
func (s *Store) DropUnapplied(ctx context.Context, key string) error {
	defer s.ringAll()
	return dropMeta(ctx, s.db, key)
}

// DeleteRefused takes back a delete the local palace refused (or never
// got): the tombstones it added, and its note.
func (s *Store) DeleteRefused(ctx context.Context, p PendingDelete) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, t := range p.added {
		if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE kind=? AND key=?`, string(t.Kind), t.Key); err != nil {
			return fmt.Errorf("outbox tombstones: %w", err)
		}
	}
	if err := dropMeta(ctx, tx, p.key); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	s.ringAll() // the updates it held may go
	return nil
}

// CancelDeleted cancels the unsent writes of what a delete removed: the
// drawers and sources marks name (CancelUnsentWrites), and the diary
// entries (CancelUnsentDiaries: an entry's add is its diary_write or
// checkpoint). It says how many.
func (s *Store) CancelDeleted(ctx context.Context, marks []Tombstone, entries []DeletedEntry) (int, error) {
	var drawers, sources []string
	for _, m := range marks {
		switch m.Kind {
		case TombDrawer:
			drawers = append(drawers, m.Key)
		case TombSource:
			sources = append(sources, m.Key)
		}
	}
	n, err := s.CancelUnsentWrites(ctx, drawers, sources)
	if err != nil {
		return n, err
	}
	k, err := s.CancelUnsentDiaries(ctx, entries)
	return n + k, err
}

// resolveDeletes keeps the deletes a killed edge left noted: the unsent
// writes of what each deletes are cancelled, its tombstones stay, and its
// note is left unapplied (DeleteUnapplied): whether the local palace
// applied it is not known. A delete_by_source's note goes on holding the
// updates of its source's drawers until the local palace answers it sent
// again: MemPalace matches the full path, so a drawer of the same base
// name may stay. A note whose owner runs is left to it. It says how many.
func (s *Store) resolveDeletes(ctx context.Context) (int, error) {
	notes, err := s.deleteNotesUnder(ctx, deleteNotes)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, x := range notes {
		if !s.gone(x.note.Owner) {
			continue
		}
		if _, err := s.CancelDeleted(ctx, x.note.Marks, x.note.Entries); err != nil {
			return n, err
		}
		if err := s.DeleteUnapplied(ctx, PendingDelete{key: x.key}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
