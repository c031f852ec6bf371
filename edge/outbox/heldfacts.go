package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"

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
// the same subject and predicate followed that the gateway did not hold
// (the primary's value is this device's since). A local KG read names
// them: the local palace holds their value as written.
func (s *Store) HeldFacts(ctx context.Context, entity string) ([]HeldFact, error) {
	type row struct {
		seq            int64
		id, tool, args string
		held           bool
		res            string
	}
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (row, error) {
		var x row
		return x, r.Scan(&x.seq, &x.id, &x.tool, &x.args, &x.held, &x.res)
	}, `SELECT local_seq, op_id, tool_name, payload_json, `+closedOps+`, COALESCE(result_json, '') FROM ops
		WHERE state='done' AND tool_name IN ('mempalace_kg_add','mempalace_kg_supersede','mempalace_kg_invalidate')
		AND local_seq >= COALESCE((SELECT min(local_seq) FROM ops WHERE `+closedOps+`), 1e18) ORDER BY local_seq`)
	if err != nil {
		return nil, fmt.Errorf("outbox: the held KG writes: %w", err)
	}
	key := func(args string) string {
		a := gjson.Parse(args)
		return catalogue.EntityID(a.Get("subject").Str) + "/" + catalogue.PredicateID(a.Get("predicate").Str)
	}
	id := catalogue.EntityID(entity)
	var held []HeldFact
	for i, x := range rows {
		res := gjson.Parse(x.res)
		if !x.held || !res.Get("held_by").Exists() || x.tool == catalogue.Prefix+"kg_invalidate" {
			continue
		}
		if slices.ContainsFunc(rows[i+1:], func(l row) bool { return !l.held && key(l.args) == key(x.args) }) {
			continue // followed by a write the primary took
		}
		a := gjson.Parse(x.args)
		if id != "" && !slices.ContainsFunc(a.Get("[subject,object,old_object,new_object]").Array(), func(v gjson.Result) bool { return v.Type == gjson.String && catalogue.EntityID(v.Str) == id }) {
			continue
		}
		held = append(held, HeldFact{ID: x.id, Tool: x.tool, Subject: a.Get("subject").Str, Predicate: a.Get("predicate").Str,
			Object: cmp.Or(a.Get("new_object").Str, a.Get("object").Str), HeldBy: res.Get("held_by").Str, ValidFromKept: res.Get("valid_from_kept").Str, Note: res.Get("note").Str})
	}
	return held, nil
}
