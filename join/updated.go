package join

import (
	"context"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// updated reports a drawer the local palace holds under another id than
// the one its wing, room and content give: updated after it was filed
// (MemPalace keeps a drawer's first id), or mined (its id is its source
// file's chunk's). Its add_drawer files it under the content's id.
func updated(r Record) bool {
	return r.Kind == Drawers && r.LocalID != "" && r.LocalID != catalogue.DrawerID(r.Wing, str(r.Args, "room"), r.Content)
}

// drawerMetaKey is the join outbox's meta key under which queue notes the
// local id of an op's updated drawer.
func drawerMetaKey(opID string) string { return "join-drawer:" + opID }

// getBatch is how many ids one get_drawers call carries (MemPalace's cap).
const getBatch = catalogue.MaxBulkIDs

// present looks up on the primary, by its local id, each updated drawer
// this run is to queue (get_drawers, 500 at a time, as reader reads). One the primary holds
// there with the same content (filed, updated, both replicated) is there:
// it is skipped, not filed again under its content's id (a second copy).
// One it holds with other content (an update that did not reach it, or an
// edit there) is named a mismatch and not filed again either. One it does
// not hold is queued, its add naming the local id: a gateway's trash may
// hold it deleted by that id. A drawer an earlier run found deleted on the
// primary is asked for too: there, the operator restored it (skipped,
// verified); not there, it is still deleted (nothing is sent: a trash
// purged since must not let it be filed again).
func (j *joining) present(ctx context.Context) {
	ask := j.toAsk(j.o.DryRun)
	if len(ask) == 0 {
		return
	}
	j.connect()
	j.o.Progress.Phase("looking up drawers on the primary", len(ask))
	defer j.o.Progress.Done()
	r := j.reader(j.sent, "primary")
	for start := 0; start < len(ask); start += r.size() {
		batch := ask[start:min(start+r.size(), len(ask))]
		ids := make([]string, len(batch))
		for i, p := range batch {
			ids[i] = p.rec.LocalID
		}
		got := r.read(ctx, ids)
		for n, p := range batch {
			if ctx.Err() != nil {
				p.held = true // not asked (Ctrl-C): not queued, the next join asks
				continue
			}
			j.o.Progress.Set(start + n)
			d, ok := got[p.rec.LocalID]
			if !ok { // left out of the answer, as a gateway withholds one: asked alone
				d.res, d.err = j.sent.Call(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": p.rec.LocalID})
			}
			j.found(ctx, p, d.res, d.err)
		}
	}
}

// toAsk are the drawers present asks the primary about: the updated ones
// to queue, those an earlier run's op failed to send (the primary
// refused it, or an operator dropped it: it may be there by another way
// since, as an edge's flush), and those an earlier run found deleted
// there (restored from a gateway's trash since, they are there again:
// skipped, not deleted).
//
// With all (a dry run), every drawer this run is to queue is asked about
// too: a real run learns only as it sends that the primary holds one (an
// edge replicated it: "already on the primary"), and a dry run, which
// sends nothing, would count it as to send.
func (j *joining) toAsk(all bool) []*planned {
	var ask []*planned
	for i := range j.planned {
		p := &j.planned[i]
		if p.rec.Kind == Drawers && (p.requeue() && (updated(p.rec) || all && p.rec.LocalID != "") || p.failedBefore() || p.deleted()) {
			ask = append(ask, p)
		}
	}
	return ask
}

// failedBefore: an earlier run's op for the record failed to send (the
// primary refused it, or an operator dropped it).
func (p *planned) failedBefore() bool {
	return p.had && (p.op.State == outbox.Dead || p.requeue())
}

// found settles one updated drawer by the primary's answer for its local
// id: not there (queued), there (skipped), there with other content
// (edited), or unknown (failed, not sent). A drawer only a dry run asks
// about (never updated, never failed or found deleted) is settled as the
// real run's add settles it: unknown is sent, and there with other
// content is skipped (its add names the id the primary holds).
func (j *joining) found(ctx context.Context, p *planned, res map[string]any, err error) {
	plain := !updated(p.rec) && !p.failedBefore() && !p.deleted()
	switch {
	case notVisible(err), err == nil && errorOf(res) != nil:
		return // not there
	case err != nil && plain:
		return // the real run sends it
	case err != nil && p.deleted():
		return // not known to be back: still counted deleted, as the run before counted it
	case err != nil && !j.o.DryRun && j.primary.State() != "up":
		p.unasked = j.runReason() // counted with the run's others (settle)
		if p.had {
			j.unasked[p.op.ID] = true
		}
	case err != nil:
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: Drawers, Record: p.rec.LocalID, Wing: p.rec.Wing, Error: "whether the primary holds it by its id is unknown (not sent: the next join looks again): " + err.Error()})
	case str(res, "content") != p.rec.Content && !plain:
		j.rep.Mismatches = append(j.rep.Mismatches, Mismatch{Kind: Drawers, LocalID: p.rec.LocalID, PrimaryID: p.rec.LocalID, Wing: p.rec.Wing, Verdict: "edited",
			Detail: "the primary holds this drawer by its id with other content (an update that has not reached it, or an edit there): not filed again under its new content's id"})
	default:
		j.rep.Skipped[Drawers]++
		j.targets = append(j.targets, verifyTarget{rec: p.rec, primaryID: p.rec.LocalID})
		if p.had && p.op.State == outbox.Dead { // never sent again: it is there
			if _, err := j.store.FoundOnPrimary(ctx, p.op.ID); err != nil {
				j.rep.Failed = append(j.rep.Failed, Failure{Kind: Drawers, Record: p.rec.LocalID, Wing: p.rec.Wing, Error: "on the primary, but its refused op in the join outbox is not settled: " + err.Error()})
			}
		}
	}
	p.held = true
	if !p.deleted() { // never pending
		j.rep.Pending[Drawers]--
	}
}

// noteLocalID notes the local id of an updated drawer's op in the join
// outbox, for drain (a resumed run sends it too).
func (j *joining) noteLocalID(ctx context.Context, p planned) error {
	if !updated(p.rec) {
		return nil
	}
	return j.store.SetMeta(ctx, drawerMetaKey(p.op.ID), p.rec.LocalID)
}

// localIDs are the local ids queue noted of the ops still to send, by op
// id.
func (j *joining) localIDs(ctx context.Context) (map[string]string, error) {
	ops, err := j.store.List(ctx, 1<<30, outbox.Queued, outbox.Inflight)
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, op := range ops {
		if op.Tool != "mempalace_add_drawer" {
			continue
		}
		id, err := j.store.Meta(ctx, drawerMetaKey(op.ID))
		if err != nil {
			return nil, err
		}
		if id != "" {
			ids[op.ID] = id
		}
	}
	return ids, nil
}
