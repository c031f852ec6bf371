package gateway

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// authorStep is who a write is attributed to: the device whose token made
// it, or, for an admin device's join, the device the request's
// params._meta[origin.MetaKey] names (a device of the config). A claim
// the gateway does not honour is refused (ok false: answered), so that a
// join never believes it attributed what it did not.
func (s *Server) authorStep(x *exchange, d *Device, req *rpcRequest) (author *Device, ok bool) {
	meta := req.meta()
	raw, present := meta[origin.MetaKey]
	if !present {
		return d, true
	}
	claim, isStr := raw.(string)
	refuse := func(msg string) (*Device, bool) {
		s.refuse(x, d, req, CodeDenied, "devbox-config gateway: "+msg+"; nothing was written", ruleOriginClaim, "")
		return nil, false
	}
	switch a := s.cfg.Load().Device(claim); {
	case !isStr:
		return refuse(fmt.Sprintf("params._meta[%q] must be a device id (a string)", origin.MetaKey))
	case claim == d.ID:
		return d, true
	case !d.Admin:
		return refuse(fmt.Sprintf("only an admin device may attribute writes to another device (params._meta[%q] is %q, this device is %s): join with --origin-device %s, or without it (the gateway attributes this device's writes to it), or from an admin device", origin.MetaKey, claim, d.ID, d.ID))
	case a == nil && slices.Contains(s.cfg.Load().RemovedDevices, claim):
		return refuse(fmt.Sprintf("params._meta[%q] names %q, a device removed from this gateway (what it wrote is trusted by no device): attribute the records to a live device (join --origin-device ID), or, if the id was removed by mistake, add it back with gateway device add %s --reuse-removed-id --label ...", origin.MetaKey, claim, claim))
	case a == nil:
		return refuse(fmt.Sprintf("params._meta[%q] names %q, no device of the gateway's config: add it first (gateway device add %s --label ...; it needs no token) to attribute records to it", origin.MetaKey, claim, claim))
	default:
		x.entry.Origin = a.ID
		return a, true
	}
}

// recordStep is the provenance step of a write the upstream answered:
// what the answer says it wrote goes into the index, stamped with the
// author (via, the admin whose join attributed it), before the writer
// gets the answer, so every read after it sees the origin. A failure is
// logged, not answered: the write is made, and its records read as of
// unknown origin (trusted by no device that names a trusted set). filed:
// a checkpoint's items its send was seen to file when its answer did not
// say (settled, or lost: sendWrite), stamped whatever the answer.
func (s *Server) recordStep(ctx context.Context, d, author *Device, t catalogue.Tool, req *rpcRequest, resp []byte) {
	res := resultOf(resp)
	if (res == nil || !written(http.StatusOK, resp)) && len(req.filed) == 0 || marked(resp, heldKey) && req.moved == nil && req.respeltOwn == nil {
		return // nothing made (refused: success false, an error), or a record the upstream held with this text before (sendWrite): its stamp, or none, stays
	}
	st := provenance.Stamp{Device: author.ID, Label: author.Label, At: s.Now()}
	if author != d {
		st.Via = d.ID
	}
	ctx = context.WithoutCancel(ctx) // the write is made: it is recorded even if its caller left
	if t.Name == "delete_tunnel" {
		// Gone: made again around the gateway, it is of unknown origin,
		// not this tunnel's writer's.
		if err := s.prov.Forget(ctx, provenance.Tunnel(str(res["deleted"]))); err != nil {
			s.Log.Error("provenance index not writable: a deleted tunnel keeps its origin", "tunnel", res["deleted"], "err", err)
		}
		return
	}
	entries := s.stamps(ctx, t, req, res, st)
	if marked(resp, ledger.ReplayedKey) {
		// The op-id ledger's record of a write made before: its records
		// were stamped then, and may have been deleted and filed again or
		// rewritten by another device since.
		for i := range entries {
			entries[i].Replace = false
		}
	}
	if err := s.prov.Record(ctx, entries...); err != nil {
		s.Log.Error("provenance index not writable: this write's records read as of unknown origin", "tool", t.Name, "device", d.ID, "err", err)
	}
}

// stamps lists the records a write's answer says it made, each with its
// stamp (st, with the agent the write named).
func (s *Server) stamps(ctx context.Context, t catalogue.Tool, req *rpcRequest, res map[string]any, st provenance.Stamp) []provenance.Entry {
	args := req.Args
	with := func(agent string) provenance.Stamp { st.Agent = agent; return st }
	filedBy := with(addedByAgent(args))
	switch t.Name {
	case "add_drawer":
		return filed(res, filedBy)
	case "checkpoint":
		var out []provenance.Entry
		added, _ := res["added"].([]any)
		for _, a := range added {
			m, _ := a.(map[string]any)
			out = append(out, filed(m, filedBy)...)
		}
		for _, id := range req.filed {
			out = append(out, provenance.Entry{Key: provenance.Drawer(id), Stamp: filedBy, Replace: true})
		}
		if dres, ok := res["diary"].(map[string]any); ok {
			dargs, _ := args["diary"].(map[string]any)
			out = append(out, diaryStamps(dargs, dres, st)...)
		}
		return out
	case "update_drawer":
		return updateEntries(req, with(""))
	case "diary_write":
		return diaryStamps(args, res, st)
	case "create_tunnel":
		// Made or rewritten (the same two rooms again: a new label): its
		// label is this writer's.
		if id := str(res["id"]); id != "" {
			return []provenance.Entry{{Key: provenance.Tunnel(id), Stamp: with(""), Replace: true}}
		}
	case "kg_add":
		return []provenance.Entry{{Key: provenance.Fact(str(args["subject"]), str(args["predicate"]), str(args["object"]), str(args["valid_from"]), str(args["valid_to"])), Stamp: with("")}}
	case "kg_supersede":
		from, ok := s.supersededAt(ctx, args, req.facts)
		if !ok {
			return nil
		}
		return []provenance.Entry{{Key: provenance.Fact(str(args["subject"]), str(args["predicate"]), str(args["new_object"]), from, ""), Stamp: with("")}}
	case "event_append", "event_ack", "patch_submit", "task_create", "artifact_put":
		var out []provenance.Entry
		for _, k := range []string{"event", "task", "artifact"} {
			if m, _ := res[k].(map[string]any); str(m["id"]) != "" {
				agent := str(args["from_agent"])
				if k == "artifact" && agent == "" {
					agent = str(args["created_by"])
				}
				out = append(out, provenance.Entry{Key: provenance.Event(str(m["id"])), Stamp: with(agent)})
			}
		}
		return out
	}
	return nil
}

// filed is the drawer an add_drawer answer says it filed; none when the
// drawer was there already (its first filer's). One it filed was not
// there, so it replaces a stamp the index still holds for the id: of a
// drawer deleted where the gateway did not see it go (around it, or by a
// delete whose answer was lost).
func filed(res map[string]any, st provenance.Stamp) []provenance.Entry {
	id := str(res["drawer_id"])
	if res["success"] != true || res["reason"] == "already_exists" || id == "" {
		return nil
	}
	return []provenance.Entry{{Key: provenance.Drawer(id), Stamp: st, Replace: true}}
}

// diaryChunk is the chunk size of MemPalace's diary entries (config
// chunk_size, default 800 characters): diary_read returns a long entry
// chunk by chunk, each found by its own text.
const diaryChunk = 800

// diaryStamps are a diary_write's entry: by its id (search and
// get_drawer return it as a drawer) and by agent, timestamp and text (what
// diary_read returns: diaryPlace.keys).
func diaryStamps(args, res map[string]any, st provenance.Stamp) []provenance.Entry {
	id, agent, ts := str(res["entry_id"]), str(res["agent"]), str(res["timestamp"])
	if res["success"] != true || id == "" {
		return nil
	}
	st.Agent = agent
	out := []provenance.Entry{{Key: provenance.Drawer(id), Stamp: st}}
	for _, k := range (diaryPlace{agent, ts}).keys(catalogue.DiaryEntry(args)) {
		out = append(out, provenance.Entry{Key: k, Stamp: st})
	}
	return out
}

// diaryPlace is where a diary entry is in diary_read, which carries no ids:
// its agent and timestamp (MemPalace's metadata agent and filed_at, which
// an update_drawer keeps). The zero diaryPlace: no diary entry.
type diaryPlace struct{ agent, at string }

// diaryEntryOf is drawer p's (a get_drawer payload) diaryPlace: zero for a
// drawer diary_write did not file.
func diaryEntryOf(p map[string]any) diaryPlace {
	meta, _ := p["metadata"].(map[string]any)
	if d := (diaryPlace{str(meta["agent"]), str(meta["filed_at"])}); d.agent != "" && d.at != "" {
		return d
	}
	return diaryPlace{}
}

// keys are the keys of the entry's text in diary_read: the whole text,
// and each chunk of a long one, which diary_read returns chunk by chunk
// (none for the zero diaryPlace).
func (d diaryPlace) keys(text string) []provenance.Key {
	if d.agent == "" {
		return nil
	}
	out := []provenance.Key{provenance.Diary(d.agent, d.at, text)}
	if r := []rune(text); len(r) > diaryChunk {
		for i := 0; i < len(r); i += diaryChunk {
			out = append(out, provenance.Diary(d.agent, d.at, string(r[i:min(i+diaryChunk, len(r))])))
		}
	}
	return out
}

// supersededAt is the valid_from of the fact a kg_supersede opened: its
// "at" (a date means its midnight, UTC), else the open fact's own among
// the subject's facts sendWrite read after it (facts; nil: asked of the
// upstream now, as for an answer the op-id ledger gives again), since
// MemPalace takes its clock's now.
func (s *Server) supersededAt(ctx context.Context, args map[string]any, facts []any) (string, bool) {
	if at := strings.TrimSpace(str(args["at"])); at != "" {
		if len(at) == len("2006-01-02") {
			at += "T00:00:00Z"
		}
		return at, true
	}
	if facts == nil { // an answer the op-id ledger gives again: not read
		facts = s.factsOf(ctx, args)
	}
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if f["valid_to"] == nil && sameTriple(f, str(args["subject"]), str(args["predicate"]), str(args["new_object"])) {
			return str(f["valid_from"]), true
		}
	}
	s.Log.Warn("provenance: the fact kg_supersede opened was not found; it reads as of unknown origin", "subject", args["subject"], "predicate", args["predicate"])
	return "", false
}

// addedByAgent is the agent segment of the added_by StampProvenance set
// ("" when there is none).
func addedByAgent(args map[string]any) string {
	agent, _, _ := strings.Cut(str(args["added_by"]), "/")
	return agent
}

// updateEntries is an update_drawer's stamp: words (the updater's) for a
// rewrite, via the device that placed the drawer where it stays, if
// another; the writer's via the mover for another device's move; the
// writer's, at words.At, for its respelling of its own; none (the stamp
// stays) for a touch or the writer's own move. A diary entry's
// stamp names its agent, and goes on its text's keys in diary_read too
// (attack99 F3: diary_read named no writer of an edited entry).
func updateEntries(req *rpcRequest, words provenance.Stamp) []provenance.Entry {
	var st provenance.Stamp
	switch _, rewritten := req.Args["content"]; {
	case rewritten && !req.held:
		words.Via = cmp.Or(words.Via, req.placedBy)
		st = words // the updater's words, where they were placed
	case req.moved != nil && req.moved.Device != "" && !req.respelt:
		st = *req.moved // its writer's words in the mover's place
	case req.respeltOwn != nil:
		st = *req.respeltOwn // its writer's words, in the spelling it sent now
		st.At = words.At
	default:
		return nil // moved by its writer, or touched: its stamp, or none, stays (a respelling's, or another device's move of one of unknown origin: none)
	}
	st.Agent = cmp.Or(st.Agent, req.diary.agent)
	out := []provenance.Entry{{Key: provenance.Drawer(str(req.Args["drawer_id"])), Stamp: st, Replace: true}}
	for _, k := range req.diary.keys(cmp.Or(str(req.Args["content"]), req.diaryText)) {
		out = append(out, provenance.Entry{Key: k, Stamp: st, Replace: true})
	}
	return out
}
