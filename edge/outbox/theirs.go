package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// An update_drawer refused as changed on the primary (ChangedOnPrimary)
// and dropped by the operator keeps the primary's text ("drop keeps
// theirs"). So that this device takes it too, and its later edits of the
// drawer carry the primary's text as their base rather than being refused
// alike, Drop leaves a note in the same transaction, meta
// theirs:<drawer id>, naming the op and the base of the text it wrote
// locally. The edge reads the notes (Theirs) when it starts and whenever
// the store is kicked (an enqueue, or the doorbell another process's drop
// rings), reads the drawer on the primary, writes that text to its local
// palace where the local copy is still the dropped edit's, and drops the
// note (TookTheirs), as it sends the kept deletes again (intent.go). A
// primary's text from a writer the device does not trust is not taken:
// the note goes with the dropped op's message saying so (KeptOwn).

// TakesTheirs ends the error_json message of a dropped op that left a
// note: edge outbox drop and list say it.
const TakesTheirs = "this device's palace takes the primary's text of the drawer"

// theirsNotes prefixes the notes of dropped edits whose drawer the local
// palace is to take from the primary.
const theirsNotes = "theirs:"

// Theirs is a drawer whose dropped edit (Op) was refused as changed on
// the primary: the local palace takes the primary's text for it while
// its copy is still the edit's own (Base, as origin.Base hashes it).
type Theirs struct {
	Drawer string `json:"-"`
	Op     string `json:"op"`
	Base   string `json:"base"`
}

// ReadsTheirs ends the error_json message of a dropped delete_drawer
// refused as changed on the primary: its tombstones go with it.
const ReadsTheirs = "this device reads the primary's text of the drawer again (the local delete's tombstone goes)"

// theirsOnDrop is what dropping o (a kind the operator records) does with
// it, and the words that say so: for a dead update_drawer refused as
// changed on the primary that rewrote the drawer's text, a Theirs note;
// for a dead delete_drawer so refused, its tombstones go, so that the
// primary's text, which the drop keeps, is read again; nil for any other
// op.
func theirsOnDrop(ctx context.Context, o Op, kind Kind) (func(*sql.Tx) error, string) {
	if kind != Dropped || o.State != Dead || FailureOf(o.Error).Kind != ChangedOnPrimary {
		return nil, ""
	}
	if o.Tool == catalogue.Prefix+"delete_drawer" {
		return func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE op_id<>'' AND op_id=?`, o.ID); err != nil {
				return fmt.Errorf("outbox: the dropped delete's tombstones: %w", err)
			}
			return nil
		}, ReadsTheirs
	}
	drawer, content := gjson.GetBytes(o.Payload, "drawer_id"), gjson.GetBytes(o.Payload, "content")
	if drawer.Type != gjson.String || content.Type != gjson.String {
		return nil, ""
	}
	note, err := json.Marshal(Theirs{Op: o.ID, Base: origin.Base(content.Str)})
	return func(tx *sql.Tx) error {
		if err != nil {
			return fmt.Errorf("outbox: the note to take the primary's text: %w", err)
		}
		if err := setMeta(ctx, tx, theirsNotes+drawer.Str, string(note)); err != nil {
			return fmt.Errorf("outbox: the note to take the primary's text: %w", err)
		}
		return nil
	}, TakesTheirs
}

// Theirs lists the drawers whose local copy is to take the primary's
// text (Drop), by drawer id.
func (s *Store) Theirs(ctx context.Context) ([]Theirs, error) {
	type row struct{ key, note string }
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (x row, err error) { err = r.Scan(&x.key, &x.note); return x, err },
		`SELECT key, value FROM meta WHERE key GLOB ? ORDER BY key`, theirsNotes+"*")
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	out := make([]Theirs, 0, len(rows))
	for _, x := range rows {
		t := Theirs{Drawer: strings.TrimPrefix(x.key, theirsNotes)}
		if err := json.Unmarshal([]byte(x.note), &t); err != nil {
			return out, fmt.Errorf("outbox: the note %s: %w", x.key, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// TookTheirs drops t's note once the local palace took the primary's text
// (or holds a later edit of its own): a later drop's note for the drawer
// stays. by, when the local palace took the text, is the origin the
// primary gave it: kept (meta took:<drawer id>) so that this device's
// reads of its local copy name that writer, not this device, while the
// primary cannot say it (attack70 F3), until this device's own next edit
// of the drawer (Promote forgets it).
func (s *Store) TookTheirs(ctx context.Context, t Theirs, by *origin.Origin) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if err := dropTheirsNote(ctx, tx, t); err != nil {
		return err
	}
	if by != nil {
		o := *by
		o.Trusted, o.Palace = false, "" // the reader's, judged at each read
		if err := setMeta(ctx, tx, tookNotes+t.Drawer, string(o.AppendJSON(nil))); err != nil {
			return fmt.Errorf("outbox: the writer of a taken text: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// tookNotes prefixes the writer of a drawer's text the local palace took
// from the primary (TookTheirs).
const tookNotes = "took:"

// Took is the writer of each drawer whose local copy holds a text taken
// from the primary after a drop (TookTheirs), by drawer id; Trusted and
// Palace are left for the reader to set.
func (s *Store) Took(ctx context.Context) (map[string]origin.Origin, error) {
	type row struct{ key, by string }
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (x row, err error) { err = r.Scan(&x.key, &x.by); return x, err },
		`SELECT key, value FROM meta WHERE key GLOB ?`, tookNotes+"*")
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make(map[string]origin.Origin, len(rows))
	for _, x := range rows {
		var o origin.Origin
		if err := json.Unmarshal([]byte(x.by), &o); err != nil {
			return out, fmt.Errorf("outbox: the note %s: %w", x.key, err)
		}
		out[strings.TrimPrefix(x.key, tookNotes)] = o
	}
	return out, nil
}

// forgetTook forgets the taken writer of the drawer an update_drawer
// rewrites (payload's drawer_id, with content; the local copy is this
// device's text again) or a delete_drawer removes.
func forgetTook(ctx context.Context, tx *sql.Tx, tool string, payload []byte) error {
	drawer, content := gjson.GetBytes(payload, "drawer_id"), gjson.GetBytes(payload, "content")
	rewrites := tool == catalogue.Prefix+"update_drawer" && content.Type == gjson.String
	if !rewrites && tool != catalogue.Prefix+"delete_drawer" || drawer.Type != gjson.String {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM meta WHERE key=?`, tookNotes+drawer.Str); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// dropTheirsNote deletes t's note (only t's: a later drop's note for
// the drawer stays).
func dropTheirsNote(ctx context.Context, q querier, t Theirs) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM meta WHERE key=? AND json_extract(value,'$.op')=?`, theirsNotes+t.Drawer, t.Op); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// KeptOwn drops t's note with this device's text of the drawer kept, not
// the primary's (why: the reason, which the dropped op's error_json
// message then ends with in place of TakesTheirs, so edge outbox list
// says it).
func (s *Store) KeptOwn(ctx context.Context, t Theirs, why string) error {
	o, err := s.GetByID(ctx, t.Op)
	if err != nil {
		return fmt.Errorf("outbox: the dropped op of drawer %s: %w", t.Drawer, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if msg := FailureOf(o.Error).Message; strings.HasSuffix(msg, TakesTheirs) {
		if _, err := tx.ExecContext(ctx, `UPDATE ops SET error_json=json_set(error_json,'$.message',?) WHERE op_id=?`, strings.TrimSuffix(msg, TakesTheirs)+why, o.ID); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	if err := dropTheirsNote(ctx, tx, t); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Kicked is signalled (at most one pending) whenever the store is kicked:
// an enqueue here, a doorbell rung by another process (its enqueue or an
// operator's command; without a doorbell, another process's commit the
// flusher's poll sees), the primary's recovery. The edge reads the notes
// of dropped edits (Theirs) then.
func (s *Store) Kicked() <-chan struct{} { return s.kicked }
