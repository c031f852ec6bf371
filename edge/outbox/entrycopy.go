package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// A diary entry's id embeds the time it was written, so its copy on the
// primary, written when this device's diary_write of it was sent, has
// another id (the primary's own timestamp). An edit or delete of the
// entry by the id the agent was given (the local one) is sent naming the
// primary's copy: the id the primary answered the entry's write with,
// found at send time (its write goes first: both carry the diary wing's
// causal key), by the local id the outbox noted for that write (meta
// entry:<id>). An id whose copy is not known (no write of this outbox's
// noted for it, or one whose answer names none) is sent as it is; a delete
// the primary then answers "Drawer not found" is done, saying the primary
// may hold the entry under another id.

// primaryIDs is op's payload with each diary entry id it names (an
// update_drawer's or delete_drawer's drawer_id, a delete_drawers' ids)
// replaced by its copy's id on the primary when it is known; unnamed are
// the diary entry ids whose copy is not known (the primary may hold the
// entry under another id).
func (s *Store) primaryIDs(ctx context.Context, op Op) (json.RawMessage, []string, error) {
	var paths []string
	switch rec, _ := catalogue.Lookup(op.Tool); rec.Name {
	case "update_drawer", "delete_drawer":
		paths = []string{"drawer_id"}
	case "delete_drawers":
		for i := range gjson.GetBytes(op.Payload, "drawer_ids").Array() {
			paths = append(paths, "drawer_ids."+strconv.Itoa(i))
		}
	default:
		return op.Payload, nil, nil
	}
	out := op.Payload
	var unnamed []string
	for _, p := range paths {
		id := gjson.GetBytes(out, p).String()
		if _, _, ok := catalogue.DiaryEntryID(id); !ok {
			continue
		}
		copyID, known, err := s.entryCopy(ctx, id)
		switch {
		case err != nil:
			return nil, nil, err
		case !known:
			unnamed = append(unnamed, id)
		case copyID != "" && copyID != id:
			if out, err = sjson.SetBytes(append([]byte(nil), out...), p, copyID); err != nil {
				return nil, nil, fmt.Errorf("outbox: naming a diary entry's copy on the primary: %w", err)
			}
		}
	}
	return out, unnamed, nil
}

// entryCopy is the id of the copy on the primary of the diary entry this
// device's local palace holds as id: the id the primary answered its write
// with. known is false when the outbox cannot say (no write noted for it,
// one not settled, or one recorded landed without the primary's answer);
// known with "" is an entry whose write never reached the primary
// (cancelled by a delete, or refused for good).
func (s *Store) entryCopy(ctx context.Context, id string) (copyID string, known bool, err error) {
	opID, err := querierMeta(ctx, s.db, entryKey(id))
	if err != nil || opID == "" {
		return "", false, err
	}
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE op_id=?`, opID)
	if err != nil || len(ops) == 0 {
		return "", false, err
	}
	c, known := copyOf(ops[0])
	return c.ID, known, nil
}

// EntryCopy is the copy on the primary of a diary entry this device
// wrote: the id and timestamp the primary answered its write with (both
// "": the write has not reached the primary, or never will).
type EntryCopy struct{ ID, Timestamp string }

// copyOf is the copy the diary entry op wrote has on the primary, as
// entryCopy says (known false: the outbox cannot say).
func copyOf(o Op) (c EntryCopy, known bool) {
	switch {
	case o.State == Dead && !o.MaybeApplied:
		return EntryCopy{}, true
	case o.State != Done:
		return EntryCopy{}, false
	}
	if _, id := entryOf(o, resultMap(o.Result)); id != "" {
		return EntryCopy{ID: id, Timestamp: landedCopy(o.Tool, string(o.Result))}, true
	}
	return EntryCopy{}, gjson.GetBytes(o.Error, "kind").String() == string(Cancelled)
}

// EntryCopies is the copy on the primary (entryCopy) of each diary entry
// of the local palace whose id's stamp is in stamps ("20060102_150405"
// and the microseconds, as MemPalace names an entry: diary_read's entries
// carry no id, only the time the stamp is of), for the stamps the outbox
// knows a copy of, or knows has none yet (its write unsent: queued or
// held, never sent). A merged read pairs each with its own copy by it.
// Two queries, whatever the number of stamps.
func (s *Store) EntryCopies(ctx context.Context, stamps []string) (map[string]EntryCopy, error) {
	if len(stamps) == 0 {
		return nil, nil
	}
	const tail = len("20060102_150405000000_") + 12
	in := strings.Repeat(",?", len(stamps))[1:]
	args := make([]any, len(stamps))
	for i, st := range stamps {
		args[i] = st
	}
	type noted struct{ stamp, op string }
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (noted, error) { var n noted; return n, r.Scan(&n.stamp, &n.op) },
		`SELECT substr(key, -?, ?), value FROM meta WHERE key GLOB 'entry:diary_*' AND substr(key, -?, ?) IN (`+in+`)`,
		append([]any{tail, tail - 13, tail, tail - 13}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("outbox: the diary entries' writes: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	byOp := make(map[string][]string, len(rows)) // a write queued twice is one op (Commit's dedupe)
	opArgs := make([]any, len(rows))
	for i, n := range rows {
		byOp[n.op], opArgs[i] = append(byOp[n.op], n.stamp), n.op
	}
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE op_id IN (`+strings.Repeat(",?", len(rows))[1:]+`)`, opArgs...)
	if err != nil {
		return nil, fmt.Errorf("outbox: the diary entries' writes: %w", err)
	}
	out := make(map[string]EntryCopy, len(ops))
	for _, o := range ops {
		c, known := copyOf(o)
		if isUnsent(o) {
			c, known = EntryCopy{}, true // none yet: never sent
		}
		if known {
			for _, stamp := range byOp[o.ID] {
				out[stamp] = c
			}
		}
	}
	return out, nil
}

// resultMap is an op's recorded answer, parsed (nil for none).
func resultMap(b json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(b, &m) // none, or not an object: no entry named
	return m
}

// NoteEntryWrite finds this device's write of the diary entry en (entryOp:
// by its local id, else the fallback for an older edge's op) and notes it
// for en's local id, so a delete or edit of the entry sent later names its
// copy on the primary (primaryIDs). found is false when there is none: the
// entry's copy on the primary, if any, cannot be named.
func (s *Store) NoteEntryWrite(ctx context.Context, en DeletedEntry) (found bool, err error) {
	o, ok, err := entryOp(ctx, s.db, en)
	if err != nil || !ok || en.ID == "" {
		return false, err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO NOTHING`, entryKey(en.ID), o.ID); err != nil {
		return false, fmt.Errorf("outbox: noting a diary entry's write: %w", err)
	}
	return true, nil
}
