package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// asAdd queues again, as the kg_add MemPalace makes of it, a kg_supersede
// whose old object neither palace holds (endsNothing): the local palace
// opened its new object from its boundary, and the primary, which refused
// it (-32035), gets that add, in the op's place in its lane, under a new
// op id (a gateway's ledger holds the old one for the supersede). A
// date-only "at" is the boundary MemPalace makes of it, its midnight UTC.
// Not a refusal: nothing counts toward dead. It reports false: not landed.
func (f *Flusher) asAdd(ctx context.Context, op Op, msg string, now time.Time) bool {
	a, err := args(op)
	if err != nil {
		f.Log.Error("outbox: a supersede of an object no palace holds could not be read to send as an add; it stays in flight", "op", op.Short(), "err", err)
		return false
	}
	at := str(a, "at")
	if len(at) == len(time.DateOnly) {
		at += "T00:00:00Z"
	}
	payload, err := json.Marshal(map[string]any{"subject": a["subject"], "predicate": a["predicate"], "object": a["new_object"], "valid_from": at})
	if err != nil {
		return false // plain values: they encode
	}
	id := NewOpID()
	note := noteOf(Refused, "neither the primary nor this devbox's palace held the old object, open or closed: sent as the add of the new one MemPalace makes of it, op "+id[:12]+" in place of "+op.Short()+" ("+msg+")", now)
	recorded := false
	err = f.fenced(ctx, func(tx *sql.Tx) (err error) {
		recorded, err = asLeft(tx.ExecContext(ctx, `UPDATE ops SET op_id=?, tool_name=?, payload_json=?, state=?, next_attempt_at=?, error_json=? WHERE `+leftAs,
			id, catalogue.Prefix+"kg_add", string(payload), Queued.String(), now.UnixMilli(), note, op.LocalSeq, op.State.String(), op.Attempts))
		return err
	})
	switch {
	case err != nil:
		f.Log.Error("outbox: a supersede of an object no palace holds not queued again as an add; it stays in flight", "op", op.Short(), "err", err)
	case !recorded:
		f.operatorFirst(ctx, op, "its attempt's outcome (a supersede of nothing, to send as an add) not recorded, nothing sent again")
	default:
		f.Log.Info("a queued supersede of an object no palace holds: sent again as the add of its new object", "op", op.Short(), "as_op", id[:12])
	}
	f.S.notify(op.ID)
	return false
}
