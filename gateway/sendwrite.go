package gateway

import (
	"context"
	"net/http"
	"slices"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// sendWrite sends one write to the upstream under the write slot (no
// other write through the gateway runs between its look-ups and the
// write): a write whose answer is lost is settled by a look-up where one
// can tell (settledWrite: a diary entry, a rewrite, an add, an ask), and
// a checkpoint's items are looked up around the send
// (sentCheckpoint); a KG write's stamps follow the facts it closes
// (kgorigin.go). The stamp of a record a write rewrites or moves is
// withdrawn while it is in flight, and put back when the answer says
// nothing was written (withdrawStep). A write whose record the upstream held before it with
// the text it sends (req.held: a touch, a kg_add of a current fact; a
// kg_supersede that would leave two values current, not sent at all:
// supersedeHeld) changes no stamp: its answer says so (heldKey), for recordStep and for
// the op-id ledger's record, and a touch's stamp is not withdrawn. An op
// the ledger held in doubt, sent again (ledger.Resent), holds what its
// first send made when nothing stamped it since (attack23 N2, N3, N5);
// one whose first send was held (ledger.Held: the record was there
// before it) made nothing, and is held again (attack24 M1-M3). A device
// that is not admin ends only its own facts and rewrites only its own
// tunnels (othersTunnel), checked here, under the slot, so no other write
// changes the fact or the tunnel between check and send; a
// write refused here is not sent (req.unsent, which forward answers).
func (s *Server) sendWrite(ctx context.Context, d *Device, t catalogue.Tool, req *rpcRequest, body []byte) (int, []byte) {
	if status := unsentStale(ctx, req); status != 0 { // an update's or delete's base (keepStep)
		return status, nil
	}
	switch t.Name {
	case "checkpoint":
		return s.sentCheckpoint(ctx, t, req, body)
	case "kg_invalidate", "kg_supersede":
		if req.unsent = s.endsOthersFact(ctx, d, t, req); req.unsent != nil {
			return http.StatusServiceUnavailable, nil // not sent: the op-id ledger keeps nothing
		}
		if t.Name == "kg_supersede" {
			req.heldNote = s.supersedeHeld(ctx, d, req.Args, req.facts)
			req.held, req.replaced = req.heldNote != nil, req.heldNote != nil // not sent: another value is current (supersedeHeld)
		}
	case "kg_add":
		req.held = s.addingHeldFact(ctx, d, req)
	case "create_tunnel":
		if req.unsent = s.othersTunnel(ctx, d, req.Args, str(req.Args["source_wing"])); req.unsent != nil {
			return http.StatusServiceUnavailable, nil
		}
	case "update_drawer":
		if _, stamped := s.prov.Lookup(provenance.Drawer(str(req.Args["drawer_id"]))); req.held && ledger.Resent(ctx) && !stamped {
			req.held = false // this op's first send's text (that send was a rewrite), its answer lost
		}
	}
	if req.held {
		// A resend of this op, held in doubt, finds the record as this
		// send leaves it: the ledger keeps that it was there before.
		if err := ledger.Held(ctx); err != nil {
			s.Log.Error("op-id ledger not writable: refusing a write it may have to answer again", "tool", t.Name, "err", err)
			return http.StatusOK, rpcErrBytes(req.rawID(), CodeDenied, "devbox-config gateway: the op-id ledger cannot be written; writes are refused")
		}
	}
	putBack := s.withdrawStep(ctx, t, req)
	var status int
	var resp []byte
	switch {
	case req.held && t.Name == "update_drawer":
		status, resp = s.upstreamCall(ctx, body)
	case req.replaced:
		status, resp = settledAnswer(body, map[string]any{"success": true}) // its members: req.heldNote, below
	case req.kept != nil:
		status, resp = s.settledDelete(ctx, t, *req.kept, body)
	default:
		status, resp = s.settledWrite(ctx, t, req.Args, body)
	}
	putBack(status, resp)
	return status, s.afterSend(ctx, t, req, status, resp)
}

// afterSend is a write's answer resp once sent (or held): an end's stamps
// retired, an invalidate's already_closed, a held write's note and mark.
func (s *Server) afterSend(ctx context.Context, t catalogue.Tool, req *rpcRequest, status int, resp []byte) []byte {
	switch t.Name {
	case "kg_invalidate":
		resp = closedAlready(req.Args, req.facts, status, resp)
		s.retireFactStamps(ctx, req.Args, "object", s.factsOf(ctx, req.Args))
	case "kg_supersede":
		if req.replaced {
			break // not sent: nothing closed or opened
		}
		req.facts = s.factsOf(ctx, req.Args) // also the opened fact's (recordStep)
		s.retireFactStamps(ctx, req.Args, "old_object", req.facts)
	}
	if req.held {
		resp = markMeta(withMembers(resp, req.heldNote), heldKey)
	}
	return resp
}

// unsentStale is the status sendWrite answers an update_drawer or
// delete_drawer whose drawer changed on the primary since it was made
// (req.stale; nil for every other call) with, not
// sending it (req.unsent says why); 0: it is sent. Changed since, it is
// a conflict (503: the ledger keeps nothing), unless the ledger held the
// op in doubt: its first send may have landed and been edited over, so
// it stays in doubt (502: the ledger keeps it so).
func unsentStale(ctx context.Context, req *rpcRequest) int {
	switch {
	case req.stale == nil:
		return 0
	case ledger.Resent(ctx) && req.stale.rule == ruleUpdateChanged: // a delete that landed left no drawer to compare
		req.unsent = req.stale.editedOver()
		return http.StatusBadGateway
	}
	req.unsent = req.stale
	return http.StatusServiceUnavailable
}

// heldKey is the result._meta member (true) of a write's answer whose
// record the upstream held before it with the text it sent (or a kg_add
// whose look-up failed): it stamps nothing (recordStep), when answered
// and when the op-id ledger answers it again from its record.
const heldKey = "devbox-config/held"

// sentCheckpoint sends a checkpoint and, when its answer does not list
// what it filed (the settled answer names only the diary entry; a lost
// one names nothing), finds it: its items (by the ids MemPalace gives
// them, from wing, room and content) the upstream did not hold before
// the send and holds after it (req.filed, stamped with the writer by
// recordStep, whatever the answer; a send again finds them as duplicates
// and stamps nothing). An item the upstream held before is not this
// checkpoint's to stamp: its writer's, or of unknown origin if it was
// filed around the gateway (attack22 F4). A look-up that fails proves
// nothing: the items read as of unknown origin (logged). The cost, per
// checkpoint with items: one get_drawers (500 ids a call) before it, and
// one more after an answer that does not list what it filed.
func (s *Server) sentCheckpoint(ctx context.Context, t catalogue.Tool, req *rpcRequest, body []byte) (int, []byte) {
	ids := checkpointItemIDs(req.Args)
	absent, err := s.absentDrawers(ctx, ids)
	if err != nil {
		s.Log.Warn("checkpoint items not looked up before the send: if its answer is lost, the items it files read as of unknown origin", "err", err)
	}
	status, resp := s.settledWrite(ctx, t, req.Args, body)
	if _, full := resultOf(resp)["added"]; len(absent) == 0 || status == http.StatusOK && full {
		return status, resp
	}
	held, err := s.readDrawers(ctx, absent)
	if err != nil {
		s.Log.Warn("checkpoint items not looked up after a send whose answer did not list them: they read as of unknown origin", "err", err)
		return status, resp
	}
	for _, p := range held {
		req.filed = append(req.filed, str(p["drawer_id"]))
	}
	return status, resp
}

// checkpointItemIDs are the MemPalace ids of a checkpoint's items, each
// once.
func checkpointItemIDs(args map[string]any) []string {
	items, _ := args["items"].([]any)
	var ids []string
	for _, x := range items {
		item, _ := x.(map[string]any)
		wing, room, content := catalogue.SanitizedName(str(item["wing"])), catalogue.SanitizedName(str(item["room"])), str(item["content"])
		if id := catalogue.DrawerID(wing, room, content); wing != "" && room != "" && content != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// absentDrawers are the ids of ids the upstream says it does not hold.
func (s *Server) absentDrawers(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	held, err := s.readDrawers(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		return slices.ContainsFunc(held, func(p map[string]any) bool { return p["drawer_id"] == id })
	}), nil
}

// withdrawStep withdraws the stamp of the record a write rewrites or
// moves (withdrawn) while the write is in flight, so that a gateway
// stopping then leaves it of unknown origin, not stamped with a device
// whose text (or place) it may no longer hold. putBack puts the stamp
// back as it was when the answer says nothing was written: success
// false, an error result or a JSON-RPC error (a room name MemPalace
// refuses), not sent, found not applied (attack70 F5: a refused move
// left another device's drawer of unknown origin for good). A lost
// answer that no look-up settled leaves it withdrawn.
func (s *Server) withdrawStep(ctx context.Context, t catalogue.Tool, req *rpcRequest) (putBack func(status int, resp []byte)) {
	key, ok := withdrawn(t, req)
	old, had := s.prov.Lookup(key)
	if !ok || !had {
		return func(int, []byte) {}
	}
	ctx = context.WithoutCancel(ctx)
	if err := s.prov.Forget(ctx, key); err != nil {
		s.Log.Error("provenance index not writable: a record being rewritten or moved keeps its writer's origin while the write is in flight", "tool", t.Name, "key", key.Parts, "err", err)
	}
	return func(status int, resp []byte) {
		if answerLost(status) || written(status, resp) {
			return // its stamp is the answer's (recordStep), or none
		}
		if err := s.prov.Record(ctx, provenance.Entry{Key: key, Stamp: old}); err != nil {
			s.Log.Error("provenance index not writable: a record a refused write left alone reads as of unknown origin", "tool", t.Name, "key", key.Parts, "err", err)
		}
	}
}

// withdrawn is the record whose stamp a write withdraws while in
// flight: the text it rewrites (rewritten; a touch, req.held, rewrites
// none), or an update_drawer's drawer whose words it respells (neither
// the writer's text nor the updater's alone, so no one's) or that it
// moves for another device (no one's until the answer names the mover
// too).
func withdrawn(t catalogue.Tool, req *rpcRequest) (provenance.Key, bool) {
	if id := str(req.Args["drawer_id"]); t.Name == "update_drawer" && id != "" && (req.respelt || req.moved != nil) {
		return provenance.Drawer(id), true
	}
	if req.held {
		return provenance.Key{}, false
	}
	return rewritten(t, req.Args)
}

// written: the upstream's answer says the write was made, not refused
// (the op-id ledger's test: ledger.Recordable).
func written(status int, resp []byte) bool {
	_, ok := ledger.Recordable(ledger.Answer{Status: status, Body: resp})
	return ok
}
