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
// the same subject and predicate settled (kgRow.settles). A later write
// of another value leaves it named: the local palace still holds the
// held value as written, the primary does not.
func (s *Store) HeldFacts(ctx context.Context, entity string) ([]HeldFact, error) {
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
	settled := map[string]int{} // the last write settling each subject/predicate/value, by row
	for i, x := range rows {
		for _, o := range x.settles().Array() {
			if o.Type == gjson.String {
				settled[x.sp+"/"+catalogue.EntityID(o.Str)] = i
			}
		}
	}
	id := catalogue.EntityID(entity)
	var held []HeldFact
	for i, x := range rows {
		a, res := x.args, x.res
		object := cmp.Or(a.Get("new_object").Str, a.Get("object").Str)
		if !x.held || !res.Get("held_by").Exists() || x.tool == catalogue.Prefix+"kg_invalidate" || settled[x.sp+"/"+catalogue.EntityID(object)] > i {
			continue
		}
		if id != "" && !namesEntity(a.Get("[subject,object,old_object,new_object]"), id) {
			continue
		}
		held = append(held, HeldFact{ID: x.id, Tool: x.tool, Subject: a.Get("subject").Str, Predicate: a.Get("predicate").Str,
			Object: object, HeldBy: res.Get("held_by").Str, ValidFromKept: res.Get("valid_from_kept").Str, Note: res.Get("note").Str})
	}
	return held, nil
}

// kgRow is a done KG write HeldFacts reads, its payload and answer
// parsed once; sp is its subject and predicate, as ids.
type kgRow struct {
	id, tool, sp string
	args, res    gjson.Result
	held         bool
}

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
