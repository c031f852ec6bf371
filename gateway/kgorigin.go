package gateway

import (
	"context"
	"slices"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// retireFactStamps moves the stamp of an open fact (the args' subject,
// predicate and the object named by objKey) that the upstream now holds
// closed to the closed fact's key, so the fact filed again after it
// (another fact, of another writer: MemPalace opens a new one) does not
// read as the closed one's writer's (attack22 F8). It runs under the
// write slot, after a kg_invalidate or kg_supersede (its answer given or
// lost: the upstream says what happened), and before a kg_add of a fact
// the index holds open (stamped): closed around the gateway since, the
// add files a new fact, stamped with its own writer. A closed fact the
// index holds a stamp for keeps its own; an open fact with the same
// valid_from as a closed one keeps the open stamp (it cannot be told
// which of the two it was). The cost: one kg_query of the subject after
// each kg_invalidate and kg_supersede, and before a kg_add of a fact the
// index holds open.
func (s *Server) retireFactStamps(ctx context.Context, args map[string]any, objKey string, ifStamped bool) {
	subj, pred, obj := str(args["subject"]), str(args["predicate"]), str(args[objKey])
	if ifStamped {
		if _, ok := s.prov.Lookup(provenance.Fact(subj, pred, obj, str(args["valid_from"]), "")); !ok {
			return
		}
	}
	facts, ok := s.upstreamResult(ctx, "mempalace_kg_query", map[string]any{"entity": subj, "direction": "outgoing"})["facts"].([]any)
	if !ok {
		s.Log.Warn("provenance: the facts of a KG write were not read; a fact it closed keeps its stamp on the open fact's key", "subject", subj, "predicate", pred)
		return
	}
	want := provenance.Fact(subj, pred, obj, "", "")
	open, closed := map[string]bool{}, map[string]string{} // by valid_from; closed: the latest valid_to
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if !slices.Equal(provenance.Fact(str(f["subject"]), str(f["predicate"]), str(f["object"]), "", "").Parts, want.Parts) {
			continue
		}
		vf := str(f["valid_from"])
		if vt := str(f["valid_to"]); vt == "" {
			open[vf] = true
		} else {
			closed[vf] = max(closed[vf], vt)
		}
	}
	var moved []provenance.Entry
	var gone []provenance.Key
	for vf, vt := range closed {
		from := provenance.Fact(subj, pred, obj, vf, "")
		if st, stamped := s.prov.Lookup(from); stamped && !open[vf] {
			moved = append(moved, provenance.Entry{Key: provenance.Fact(subj, pred, obj, vf, vt), Stamp: st})
			gone = append(gone, from)
		}
	}
	if err := s.prov.Record(ctx, moved...); err != nil {
		s.Log.Error("provenance index not writable: a closed fact's stamp stays on its open key", "subject", subj, "err", err)
		return
	}
	if err := s.prov.Forget(ctx, gone...); err != nil {
		s.Log.Error("provenance index not writable: a closed fact's stamp stays on its open key", "subject", subj, "err", err)
	}
}
