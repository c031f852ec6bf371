package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

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
	o := ops[0]
	switch {
	case o.State == Dead && !o.MaybeApplied:
		return "", true, nil
	case o.State != Done:
		return "", false, nil
	}
	if _, copyID = entryOf(o, resultMap(o.Result)); copyID != "" {
		return copyID, true, nil
	}
	return "", gjson.GetBytes(o.Error, "kind").String() == string(Cancelled), nil
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
