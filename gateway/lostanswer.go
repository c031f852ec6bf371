package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// settledWrite is a write's call to the upstream under the write slot
// (forward's send), made so that no record is left stamped with a device
// that did not write its text when the upstream's answer is lost (502,
// 504) or the gateway stops with the write in flight. When a look-up
// finds the write made, it answers as the upstream would have (recordStep
// then stamps the writer, the op-id ledger records the answer, and a
// resend gets it again); when it finds it not made, "not applied: send it
// again" (503); anything else stays lost, the op in doubt, as before:
//
//   - a write that rewrites a record's text (update_drawer's content,
//     create_tunnel's label: rewritten) has its stamp withdrawn first
//     (sendWrite's withdrawStep), so the record reads as of unknown
//     origin until the answer (or the look-up) says whose text it holds;
//     a look-up that finds it not applied answers so, and the stamp is
//     put back;
//   - add_drawer: the drawer the look-up finds is this write's when its
//     added_by (the gateway sets it) names this device and agent;
//     otherwise it is already_exists, its first filer's;
//   - event_append, patch_submit: the event carrying the write's
//     metadata.edge_op_id (an edge's outbox stamps it) in the sender's
//     recent events; without one nothing can find it (unknown origin);
//     event_ack: the sender's ack of the same event, status and body;
//   - a diary entry: settledDiary.
//
// An add_drawer the ledger held in doubt and sent again is answered
// already_exists: resentAdd finds what its first send filed. Other writes
// whose answer is lost leave their records unstamped (of unknown origin)
// until a resend under the same op id is answered: a fact's stamp is keyed by
// its text, an artifact and a task have new ids and nothing lists them.
func (s *Server) settledWrite(ctx context.Context, t catalogue.Tool, args map[string]any, body []byte) (int, []byte) {
	if diary := diaryOf(t, args); diary != nil {
		return s.settledDiary(ctx, t, diary, body)
	}
	var look func(ctx context.Context) map[string]any // what the write made (its answer), nil: not found
	switch t.Name {
	case "update_drawer", "create_tunnel":
		return s.settledRewrite(ctx, t, args, body)
	case "add_drawer":
		look = s.filedLookUp(args)
	case "event_append", "patch_submit", "event_ack":
		look = s.eventLookUp(t, args)
	}
	status, resp := s.upstreamCall(ctx, body)
	if t.Name == "add_drawer" && status == http.StatusOK && resultOf(resp)["reason"] == "already_exists" && ledger.Resent(ctx) {
		return s.resentAdd(ctx, look, body, status, resp)
	}
	if look == nil || !answerLost(status) {
		return status, resp
	}
	if made := look(ctx); made != nil {
		return settledAnswer(body, made)
	}
	return status, resp
}

// resentAdd is the answer to an add_drawer the op-id ledger held in
// doubt, sent again and answered already_exists (attack23 N5: its first
// send's answer and the look-up after it were lost): the drawer is this
// op's, its first send's, when it carries this device's and agent's
// added_by and nothing stamped it since; otherwise it is answered as the
// upstream answered (its first filer's, or of unknown origin).
func (s *Server) resentAdd(ctx context.Context, look func(context.Context) map[string]any, body []byte, status int, resp []byte) (int, []byte) {
	made := look(ctx)
	if made == nil || made["reason"] == "already_exists" {
		return status, resp
	}
	if _, stamped := s.prov.Lookup(provenance.Drawer(str(made["drawer_id"]))); stamped {
		return status, resp
	}
	made["recovered"] = "this op was sent before and its answer lost: the gateway found the drawer that send filed"
	return settledAnswer(body, made)
}

// notApplied answers a write whose upstream answer was lost and which a
// look-up found not made (the upstream's state: held): 503, so that the
// edge sends it again.
func notApplied(body []byte, held string) (int, []byte) {
	return callFailed(body, http.StatusServiceUnavailable, "upstream answer lost, and the upstream "+held+": not applied, send it again")
}

// answerLost: the upstream call was sent and its answer lost (the upstream
// step's own words).
func answerLost(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusGatewayTimeout
}

// settledRewrite is settledWrite for a write that rewrites a record's
// text (its stamp withdrawn while it is in flight: withdrawStep): after a
// lost answer the record is looked up.
func (s *Server) settledRewrite(ctx context.Context, t catalogue.Tool, args map[string]any, body []byte) (int, []byte) {
	status, resp := s.upstreamCall(ctx, body)
	key, ok := rewritten(t, args)
	if !ok || !answerLost(status) {
		return status, resp
	}
	switch now, found := s.rewriteLookUp(ctx, t, args, key); {
	case !found: // not known: withdrawn it stays
	case now != nil:
		return settledAnswer(body, now)
	default:
		return notApplied(body, "does not hold the rewrite")
	}
	return status, resp
}

// settledDelete is settledWrite for a delete whose drawers the keep step
// kept (attack26 F1): after a lost answer the kept drawers are looked up.
// All gone, the delete was made: it is answered as MemPalace would have
// (the op-id ledger records it, a resend is answered from that record;
// the trash says deleted). All there as kept, it was not: "not applied:
// send it again" (503; nothing stays in the trash). Anything else (some
// gone, the look-up not answered) stays lost, the op in doubt. The write
// slot is held throughout: no other write through the gateway lands
// between the delete and its look-up.
func (s *Server) settledDelete(ctx context.Context, t catalogue.Tool, doom doomed, body []byte) (int, []byte) {
	status, resp := s.upstreamCall(ctx, body)
	if !answerLost(status) {
		return status, resp
	}
	ids := make([]string, len(doom.drawers))
	for i, p := range doom.drawers {
		ids[i] = str(p["drawer_id"])
	}
	switch now, err := s.readDrawers(ctx, ids); {
	case err != nil:
	case len(now) == 0:
		return settledAnswer(body, deletedAnswer(t.Name, ids, doom, recovered))
	case slices.EqualFunc(now, doom.drawers, sameDrawer):
		return notApplied(body, "still holds what the delete removes")
	}
	return status, resp
}

// deletedAnswer is MemPalace's answer to a delete (tool) that removed
// ids (doom, for delete_by_source: its source and rows), with note.
func deletedAnswer(tool string, ids []string, doom doomed, note string) map[string]any {
	switch tool {
	case "delete_drawers":
		results := make([]any, len(ids))
		for i, id := range ids {
			results[i] = map[string]any{"drawer_id": id}
		}
		return map[string]any{"results": results, "count": len(ids), "deleted": len(ids), "errors": 0, "recovered": note}
	case "delete_by_source":
		return map[string]any{"success": true, "dry_run": false, "source_file": doom.source, "deleted": doom.rows, "recovered": note}
	}
	return map[string]any{"success": true, "drawer_id": ids[0], "recovered": note}
}

// sameDrawer: two get_drawer payloads of one drawer with the same text,
// wing and room.
func sameDrawer(a, b map[string]any) bool {
	return a["drawer_id"] == b["drawer_id"] && a["content"] == b["content"] && a["wing"] == b["wing"] && a["room"] == b["room"]
}

// rewritten is the record whose text a write rewrites: update_drawer's
// drawer when it sends content (not a move), create_tunnel's tunnel (the
// same two rooms again rewrite its label).
func rewritten(t catalogue.Tool, args map[string]any) (provenance.Key, bool) {
	switch t.Name {
	case "update_drawer":
		if _, ok := args["content"]; ok && str(args["drawer_id"]) != "" {
			return provenance.Drawer(str(args["drawer_id"])), true
		}
	case "create_tunnel":
		return provenance.Tunnel(catalogue.TunnelID(str(args["source_wing"]), str(args["source_room"]), str(args["target_wing"]), str(args["target_room"]))), true
	}
	return provenance.Key{}, false
}

// rewriteLookUp asks the upstream for the rewritten record: made is the
// answer the write would have had when the record holds its text, nil
// when it holds another; found false when the record was not found (or
// the look-up failed).
func (s *Server) rewriteLookUp(ctx context.Context, t catalogue.Tool, args map[string]any, key provenance.Key) (made map[string]any, found bool) {
	id := key.Parts[0]
	if t.Name == "update_drawer" {
		got := s.upstreamResult(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id})
		if str(got["drawer_id"]) != id {
			return nil, false
		}
		if got["content"] != args["content"] {
			return nil, true
		}
		return map[string]any{"success": true, "drawer_id": id, "wing": got["wing"], "room": got["room"], "recovered": recovered}, true
	}
	tun, _ := s.tunnelOf(ctx, str(args["source_wing"]), id)
	switch {
	case tun == nil:
		return nil, false
	case !sameTunnel(tun, args):
		return nil, true
	}
	return tun, true
}

// tunnelOf is tunnel id, one of whose ends is in wing, as the upstream
// lists it (nil: not listed). The error is errNoAnswer when no list came
// back, and MemPalace's error (its text) when it answered that instead
// (a wing name it refuses; review28b F6 answered that "busy, send it
// again" for good, and review29 F4 took it for "none listed").
func (s *Server) tunnelOf(ctx context.Context, wing, id string) (map[string]any, error) {
	got := s.upstreamAny(ctx, "mempalace_list_tunnels", map[string]any{"wing": catalogue.SanitizedName(wing)})
	if m, ok := got.(map[string]any); ok {
		if msg := str(m["error"]); msg != "" && m["tunnels"] == nil {
			return nil, errors.New(msg)
		}
		got = m["tunnels"]
	}
	tunnels, listed := got.([]any)
	if !listed {
		return nil, fmt.Errorf("%w list_tunnels", errNoAnswer)
	}
	for _, x := range tunnels {
		if t, _ := x.(map[string]any); str(t["id"]) == id {
			return t, nil
		}
	}
	return nil, nil
}

// recovered tells a writer its write's answer is the gateway's.
const recovered = "the upstream's answer was lost: the gateway found the write made"

// filedLookUp is add_drawer's look-up after a lost answer: the drawer
// (its id comes from wing, room and content) is this write's when the
// upstream holds it filed by this device and agent (its added_by, which
// the gateway sets: StampProvenance), and already_exists (its first
// filer's) when it holds it filed by another.
func (s *Server) filedLookUp(args map[string]any) func(context.Context) map[string]any {
	wing, room := catalogue.SanitizedName(str(args["wing"])), catalogue.SanitizedName(str(args["room"]))
	id := catalogue.DrawerID(wing, room, str(args["content"]))
	return func(ctx context.Context) map[string]any {
		got := s.upstreamResult(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id})
		meta, _ := got["metadata"].(map[string]any)
		switch {
		case str(got["drawer_id"]) != id:
			return nil
		case meta["added_by"] != args["added_by"]:
			return map[string]any{"success": true, "reason": "already_exists", "drawer_id": id, "recovered": recovered}
		}
		return map[string]any{"success": true, "drawer_id": id, "wing": wing, "room": room, "recovered": recovered}
	}
}

// eventLookUp is the look-up after a lost answer of an event_append or
// patch_submit (the sender's event carrying the write's
// metadata.edge_op_id; nil without one) or an event_ack (the sender's
// ack of the same event with the same status and body), the edge's own
// look-up (catalogue.EventFound) among the sender's events of the last
// quarter hour.
func (s *Server) eventLookUp(t catalogue.Tool, args map[string]any) func(context.Context) map[string]any {
	meta, _ := args["metadata"].(map[string]any)
	filter, is, ok := catalogue.EventFound(t, args, str(meta["edge_op_id"]), s.Now())
	if !ok {
		return nil
	}
	return func(ctx context.Context) map[string]any {
		evs, _ := s.upstreamResult(ctx, "mempalace_event_list", filter)["events"].([]any)
		for _, x := range evs {
			if ev, _ := x.(map[string]any); ev != nil && is(ev) {
				return map[string]any{"success": true, "event": ev, "recovered": recovered}
			}
		}
		return nil
	}
}

// settledAnswer is the upstream's answer the gateway made for a write it
// found made: res as MemPalace's text result, under the request's id.
func settledAnswer(body []byte, res map[string]any) (int, []byte) {
	id := json.RawMessage(gjson.GetBytes(body, "id").Raw)
	return http.StatusOK, encodeJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": textResult(res)})
}

// textResult is res as MemPalace's tools/call result.
func textResult(res map[string]any) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": string(encodeJSON(res))}}}
}

// upstreamAny is upstreamResult for an answer that may be a JSON array
// (list_tunnels answers one).
func (s *Server) upstreamAny(ctx context.Context, name string, args map[string]any) any {
	text := gjson.GetBytes(s.upstreamBytes(ctx, name, args), "result.content.0.text").Str
	var v any
	if json.Unmarshal([]byte(strings.TrimSpace(text)), &v) != nil {
		return nil
	}
	return v
}
