package outbox

import (
	"cmp"
	"context"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// HeldFact is a kg_add or kg_supersede a gateway answered held_by
// (AlreadyCurrent): it filed nothing on the primary, where another fact
// of its subject and predicate is current.
type HeldFact struct {
	ID, Tool string
	// Subject, Predicate and Object are what it wrote (a supersede's new
	// object).
	Subject, Predicate, Object string
	// HeldBy, ValidFromKept and Note are the gateway's answer's: whose
	// the current fact is ("": unknown origin), its start, and the note
	// naming it and what to do.
	HeldBy, ValidFromKept, Note string
}

// HeldFacts are the held KG writes (HeldFact) the outbox keeps whose
// subject or object is entity (any for one with no id), as UnsentFacts
// matches, oldest first; save those a later KG write of this outbox of
// the same subject and predicate settled (unowed). A later write of
// another value leaves it named: the local palace still holds the held
// value as written, the primary does not.
func (s *Store) HeldFacts(ctx context.Context, entity string) ([]HeldFact, error) {
	rows, err := s.kgRows(ctx)
	if err != nil {
		return nil, err
	}
	done := unowed(rows)
	id := catalogue.EntityID(entity)
	var held []HeldFact
	for i, x := range rows {
		a, res := x.args, x.res
		if !x.heldWrite() || done[i] {
			continue
		}
		if id != "" && !namesEntity(a.Get("[subject,object,old_object,new_object]"), id) {
			continue
		}
		held = append(held, HeldFact{ID: x.id, Tool: x.tool, Subject: a.Get("subject").Str, Predicate: a.Get("predicate").Str,
			Object: x.value(), HeldBy: res.Get("held_by").Str, ValidFromKept: res.Get("valid_from_kept").Str, Note: res.Get("note").Str})
	}
	return held, nil
}

// Unowed is the ids of the done KG writes noted held or closed already
// (DeadOp.Closed) on which nothing is owed any more (unowed): a held
// write a later one settled, and a kg_invalidate answered already_closed
// that settled one, ending its value. The agent is not told of them again.
func (s *Store) Unowed(ctx context.Context) (map[string]bool, error) {
	rows, err := s.kgRows(ctx)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for i := range unowed(rows) {
		ids[rows[i].id] = true
	}
	return ids, nil
}

// kgRows are the done KG writes from the first one noted held or closed
// already on, oldest first.
func (s *Store) kgRows(ctx context.Context) ([]kgRow, error) {
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (kgRow, error) {
		var x kgRow
		var args, res string
		if err := r.Scan(&x.id, &x.tool, &args, &x.held, &res); err != nil {
			return x, err
		}
		x.args, x.res = gjson.Parse(args), gjson.Parse(res)
		x.sp = catalogue.EntityID(x.args.Get("subject").Str) + "/" + catalogue.PredicateID(x.args.Get("predicate").Str)
		return x, nil
	}, `SELECT op_id, tool_name, payload_json, `+closedOps+`, COALESCE(result_json, '') FROM ops
		WHERE state='done' AND tool_name IN ('mempalace_kg_add','mempalace_kg_supersede','mempalace_kg_invalidate')
		AND local_seq >= COALESCE((SELECT min(local_seq) FROM ops WHERE `+closedOps+`), 1e18) ORDER BY local_seq`)
	if err != nil {
		return nil, fmt.Errorf("outbox: the held KG writes: %w", err)
	}
	return rows, nil
}

// unowed is the rows nothing is owed on, by index: each held write
// (heldWrite) a later row settles the value of (kgRow.settles), and each
// kg_invalidate answered already_closed that settles an earlier held
// write, ending its value (the agent ended it on purpose; the primary
// holds it closed).
func unowed(rows []kgRow) map[int]bool {
	last := map[string]int{}  // the last row settling each subject/predicate/value
	held := map[string]bool{} // the values of the held writes not settled so far
	done := map[int]bool{}
	for i, x := range rows {
		for _, o := range x.settles().Array() {
			if o.Type != gjson.String {
				continue
			}
			k := x.sp + "/" + catalogue.EntityID(o.Str)
			last[k] = i
			if x.held && x.tool == catalogue.Prefix+"kg_invalidate" && held[k] {
				done[i] = true
			}
			delete(held, k) // settled from here on
		}
		if x.heldWrite() {
			held[x.key()] = true
		}
	}
	for i, x := range rows {
		if x.heldWrite() && last[x.key()] > i {
			done[i] = true
		}
	}
	return done
}

// kgRow is a done KG write HeldFacts reads, its payload and answer
// parsed once; sp is its subject and predicate, as ids; held: noted
// held or closed already (closedOps).
type kgRow struct {
	id, tool, sp string
	args, res    gjson.Result
	held         bool
}

// heldWrite says x is a kg_add or kg_supersede the gateway answered
// held_by: it filed nothing.
func (x kgRow) heldWrite() bool {
	return x.held && x.res.Get("held_by").Exists() && x.tool != catalogue.Prefix+"kg_invalidate"
}

// value is what x wrote (a supersede's new object); key is its subject,
// predicate and value, as ids.
func (x kgRow) value() string { return cmp.Or(x.args.Get("new_object").Str, x.args.Get("object").Str) }
func (x kgRow) key() string   { return x.sp + "/" + catalogue.EntityID(x.value()) }

// settles is the values x settles an earlier held write of: each it
// names when the gateway did not hold it (an add or supersede that made
// the value current on the primary, or a supersede or invalidate the
// primary took that ended it); the value it ends when the gateway
// answered it already_closed (an invalidate) or held_by (a supersede's
// old object): the agent ended the value and the primary holds it
// closed, so nothing is owed. None for a held add: it ends nothing.
func (x kgRow) settles() gjson.Result {
	switch {
	case !x.held:
		return x.args.Get("[object,old_object,new_object]")
	case x.tool == catalogue.Prefix+"kg_invalidate":
		return x.args.Get("[object]")
	case x.tool == catalogue.Prefix+"kg_supersede":
		return x.args.Get("[old_object]")
	}
	return gjson.Result{}
}
