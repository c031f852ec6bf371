package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/text/unicode/norm"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/jsondepth"
)

// Rules of the trash step.
const (
	ruleDeleteCap  Rule = "delete_cap"
	ruleUnknowable Rule = "trash:unknowable"
	ruleTrash      Rule = "trash:unwritable"
)

// kept is a call's drawers in the trash, waiting for the primary's answer.
type kept struct {
	id      int64
	tool    string
	rows    int      // delete_by_source: the rows MemPalace counted
	drawers []string // the kept drawer ids
}

// keepStep is the trash step of a call that removes or replaces drawers
// (destroys): it reads what the call will remove, refuses a delete of
// more drawers than the cap from a device without the bulk-delete grant,
// and keeps the drawers in the trash, durably, before the call is
// forwarded. It answers the request itself when it refuses (ok false); a
// nil kept means there was nothing to keep.
func (s *Server) keepStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest) (k *kept, ok bool) {
	if !destroys(t, req.Args) {
		return nil, true
	}
	refuse := func(rule Rule, msg string) (*kept, bool) {
		s.refuse(x, d, req, CodeDenied, "devbox-config gateway: "+msg+"; nothing was deleted", rule, "")
		return nil, false
	}
	doom, err := s.readDoomed(ctx, t, req.Args)
	if errors.Is(err, errNoAnswer) {
		s.busy(x, d, req, ruleUnknowable, err) // refused, a queued delete was dead in seconds (attack26 F3)
		return nil, false
	}
	if err != nil {
		return refuse(ruleUnknowable, fmt.Sprintf("%s: %v (the gateway keeps what a delete removes, so that it can be restored, and makes no delete it cannot keep)", req.Tool, err))
	}
	if t.Name == "update_drawer" && len(doom.drawers) == 1 && !s.updateStamp(x, d, req, doom.drawers[0]) {
		return nil, false
	}
	if t.Name == "delete_drawer" && len(doom.drawers) == 1 { // one whose base is not the primary's text is not sent
		req.stale = s.staleBase(req, doom.drawers[0], d)
	}
	cfg := s.cfg.Load()
	if limit := cfg.DeleteCapOrDefault(); t.Name != "update_drawer" && len(doom.drawers) > limit && !d.BulkDelete {
		return refuse(ruleDeleteCap, fmt.Sprintf("%s would remove %d drawers, more than the %d (delete_cap) a device without the bulk-delete grant may remove at once; delete fewer at a time, or ask the operator for the grant (\"bulk_delete\": true on device %s)", req.Tool, len(doom.drawers), limit, d.ID))
	}
	if len(doom.drawers) == 0 {
		id, _ := req.Args["drawer_id"].(string)
		return nil, t.Name != "delete_drawer" || id == "" || s.restoredStep(ctx, x, d, t, req, id)
	}
	bin, err := s.Trash()
	if err != nil {
		s.Log.Error("trash cannot be opened: refusing deletes", "err", err)
		return refuse(ruleTrash, "the gateway's trash cannot be opened, and a delete it cannot keep is not made")
	}
	params, _ := req.msg["params"].(map[string]any)
	opID, _, _ := ledger.OpIDOf(encodeJSON(params)) // a bad one: the ledger refuses the call, and the trash drops it
	del := trash.Delete{Device: d.ID, Label: d.Label, Tool: t.Name, Source: doom.source, Audit: x.ahead, OpID: opID}
	k = &kept{tool: t.Name, rows: doom.rows}
	for _, p := range doom.drawers {
		dr := keptDrawer(t.Name, p, doom.source)
		if s.prov != nil {
			if st, known := s.prov.Lookup(provenance.Drawer(dr.ID)); known {
				dr.Origin = &st
			}
		}
		del.Drawers = append(del.Drawers, dr)
		k.drawers = append(k.drawers, dr.ID)
	}
	if k.id, err = bin.Keep(ctx, del); err != nil {
		s.Log.Error("trash not writable: refusing deletes", "err", err)
		return refuse(ruleTrash, "the gateway's trash cannot be written, and a delete it cannot keep is not made")
	}
	if t.Name != "update_drawer" {
		req.kept = &doom
	}
	return k, true
}

// settleBound bounds a kept delete from its send to its record in the
// trash: the delete's call and the look-up after a lost answer, each up
// to callTimeout.
const settleBound = 2 * callTimeout

// settling is the context a kept delete is sent and settled under: the
// device hanging up does not end it (attack28 n3: the look-up or the
// trash's record cut short left the delete "pending" for good, whatever
// the primary did), settleBound does.
func settling(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleBound)
}

// writeBound bounds a write from its audit line ahead to its answer: the
// wait for the write slot, then its send and settling.
const writeBound = writeWait + settleBound

// writing is the context a write runs under once its audit line ahead is
// written: the device hanging up ends only its wait for the write slot
// (clientOf); a write sent runs to its end, with the look-ups that settle
// a lost answer, its stamps and the op-id ledger's record (attack69 F8: a
// device that hung up mid-write left its records of unknown origin and
// its audit line saying 502), within writeBound.
func writing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), clientKey{}, ctx), writeBound)
}

type clientKey struct{}

// clientOf is the context of the device's request a write runs for
// (writing), which ends when the device hangs up; ctx itself elsewhere.
func clientOf(ctx context.Context) context.Context {
	if c, ok := ctx.Value(clientKey{}).(context.Context); ok {
		return c
	}
	return ctx
}

// keptDrawer is the trash's record of a drawer tool removes or replaces,
// from its get_drawer payload p; source, when given, is the whole source
// path a delete_by_source named.
func keptDrawer(tool string, p map[string]any, source string) trash.Drawer {
	id, _ := p["drawer_id"].(string)
	wing, _ := p["wing"].(string)
	room, _ := p["room"].(string)
	content, _ := p["content"].(string)
	meta, _ := p["metadata"].(map[string]any)
	src, _ := meta["source_file"].(string)
	if source != "" {
		src = source // the whole path, where the metadata has only its name
	}
	return trash.Drawer{ID: id, Wing: wing, Room: room, Content: content, Metadata: metadataOf(p), SourceFile: src, Kind: trash.Classify(tool, id, wing, room, content, meta)}
}

// preCall are the JSON-RPC errors MemPalace answers before a tool runs
// (unknown tool or parameters, the read-only, integrity, stale-library,
// diverged-index and peer-writer gates): nothing was removed.
// The op-id ledger's refusals (in flight, in doubt) are answered before
// the call is forwarded.
var preCall = []int64{-32601, -32602, -32001, -32002, -32003, -32004, -32005, CodeDenied, CodeRateLimited, ledger.CodeInFlight, ledger.CodeInDoubt}

// settle records the primary's answer to a kept call: deleted (less the
// drawers it reports it did not remove), dropped from the trash when it
// removed nothing, unconfirmed when no answer says either.
func (s *Server) settle(ctx context.Context, k *kept, status int, resp []byte) {
	if k == nil {
		return
	}
	bin, err := s.Trash()
	if err != nil {
		s.Log.Error("trash: recording a delete's answer", "delete", k.id, "err", err)
		return
	}
	state, note, notRemoved, drop := k.outcome(status, resp)
	if drop {
		err = bin.Drop(ctx, k.id)
	} else {
		err = bin.Settle(ctx, k.id, state, note, notRemoved)
	}
	if err != nil {
		s.Log.Error("trash: recording a delete's answer", "delete", k.id, "err", err)
	}
	if state == trash.StateDeleted && k.tool != "update_drawer" {
		s.forget(ctx, k.drawers, notRemoved)
	}
	if note != "" {
		s.Log.Warn("trash: "+note, "delete", k.id, "tool", k.tool)
	}
}

// forget drops the origins of the drawers a confirmed delete removed
// (all of ids but notRemoved): the trash keeps them, a restore records
// them again, and the same id filed again after the delete is its new
// filer's, not the deleted drawer's writer's. A delete the primary did
// not confirm leaves them: the drawers may still be there.
func (s *Server) forget(ctx context.Context, ids, notRemoved []string) {
	if s.prov == nil {
		return
	}
	var keys []provenance.Key
	for _, id := range ids {
		if !slices.Contains(notRemoved, id) {
			keys = append(keys, provenance.Drawer(id))
		}
	}
	if err := s.prov.Forget(context.WithoutCancel(ctx), keys...); err != nil {
		s.Log.Error("provenance index not writable: deleted drawers keep their origins, and the same content filed again reads as their writer's", "err", err)
	}
}

// outcome reads a kept call's answer. One the op-id ledger answered
// from its record removed nothing (the send it records is kept in the
// trash as its own delete), nor did one answered 503 or 429 (not sent,
// or found not applied: settledDelete).
func (k *kept) outcome(status int, resp []byte) (state trash.State, note string, notRemoved []string, drop bool) {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || marked(resp, ledger.ReplayedKey) {
		return "", "", nil, true
	}
	if status != http.StatusOK || !jsondepth.Valid(resp) {
		return trash.StateUnconfirmed, "no answer from the primary: the drawers may or may not be gone", nil, false
	}
	if code := gjson.GetBytes(resp, "error.code"); code.Exists() {
		if slices.Contains(preCall, code.Int()) {
			return "", "", nil, true
		}
		return trash.StateUnconfirmed, "the primary answered error " + code.String() + ": the drawers may or may not be gone", nil, false
	}
	r := resultOf(resp)
	if r == nil {
		return trash.StateUnconfirmed, "the primary's answer is not a result: the drawers may or may not be gone", nil, false
	}
	switch k.tool {
	case "delete_drawers":
		items, _ := r["results"].([]any)
		removed := map[string]bool{}
		for _, x := range items {
			if it, _ := x.(map[string]any); it["error"] == nil {
				id, _ := it["drawer_id"].(string)
				removed[id] = true
			}
		}
		for _, id := range k.drawers { // an id named twice fails the second time: it was removed all the same
			if !removed[id] {
				notRemoved = append(notRemoved, id)
			}
		}
		if deleted, _ := r["deleted"].(float64); items == nil || deleted == 0 {
			return "", "", nil, true
		}
		return trash.StateDeleted, "", notRemoved, false
	case "delete_by_source":
		deleted, _ := r["deleted"].(float64)
		if r["success"] != true || r["dry_run"] != false || deleted == 0 {
			return "", "", nil, true
		}
		switch n := int(deleted); {
		case n > k.rows:
			note = fmt.Sprintf("the primary deleted %d row(s) from the source and the trash kept %d: %d filed between the gateway's read and the delete are not in the trash", n, k.rows, n-k.rows)
		case n < k.rows:
			note = fmt.Sprintf("the primary deleted %d row(s) from the source of the %d kept: some kept drawers may still be on the primary", n, k.rows)
		}
		return trash.StateDeleted, note, nil, false
	}
	if r["success"] != true || r["noop"] == true {
		return "", "", nil, true
	}
	return trash.StateDeleted, "", nil, false
}

// sameText: a and b are one text but for Unicode normal form (NFC) and
// whitespace (runs of it are one space; leading and trailing, none): an
// update_drawer sending its drawer's text so is a touch. Respelt (not the
// same bytes: an agent's round trip that normalised it, attack24 L2, or
// an indentation that moves a line of code out of its block), the drawer
// is of unknown origin, neither writer's (req.respelt).
func sameText(a, b string) bool {
	return a == b || slices.Equal(strings.Fields(norm.NFC.String(a)), strings.Fields(norm.NFC.String(b)))
}

// moved: an update_drawer's args name a wing or room (key) other than the
// drawer's (p, its get_drawer payload), as MemPalace stores the name.
func moved(args, p map[string]any, key string) bool {
	v, given := args[key].(string)
	return given && catalogue.SanitizedName(v) != str(p[key])
}

// movedBy is the stamp of a drawer (st, stamped: its stamp before) that
// device mover moves, not being its writer: its writer's words in the
// mover's place, vouched for by both (the mover as via: trusted only by a
// device that trusts both). One of unknown origin stays so, and so
// becomes one that already names another via (a join's admin, an earlier
// mover), which a stamp cannot name beside a third device.
func movedBy(st provenance.Stamp, stamped bool, mover string) *provenance.Stamp {
	if !stamped || st.Via != "" && st.Via != mover {
		return &provenance.Stamp{}
	}
	st.Via = mover
	return &st
}

// updateStamp reads what an update_drawer of drawer p (its get_drawer
// payload) makes of its stamp: a move by another device names the mover
// (req.moved), a rewrite that leaves it in place keeps who placed it
// (req.placedBy), a touch keeps it and a respelling drops it (req.held,
// req.respelt). A non-admin's move of a drawer not its own out of its
// wing is refused and answered (false).
func (s *Server) updateStamp(x *exchange, d *Device, req *rpcRequest, p map[string]any) bool {
	st, stamped := s.prov.Lookup(provenance.Drawer(str(req.Args["drawer_id"])))
	own := stamped && st.Device == d.ID
	if moved(req.Args, p, "wing") && !own && !d.Admin {
		s.refuse(x, d, req, CodeDenied, fmt.Sprintf("devbox-config gateway: %s moves drawer %s out of wing %s, and it is not this device's (%s): a move out of its wing takes it from that wing's readers as a delete does, so only an admin device may make it, as a delete; move it to another room of %s, file its text in the other wing with add_drawer, or ask an admin device; nothing was moved", req.Tool, str(p["drawer_id"]), str(p["wing"]), cmp.Or(st.Device, "of unknown origin"), str(p["wing"])), ruleAdminOnly, str(p["wing"]))
		return false
	}
	move := moved(req.Args, p, "wing") || moved(req.Args, p, "room")
	req.diary, req.diaryText = diaryEntryOf(p), str(p["content"])
	if !own && move {
		req.moved = movedBy(st, stamped, d.ID)
	}
	if !move && stamped && st.Via != d.ID {
		req.placedBy = st.Via // rewritten, its place stays that device's text
	}
	if content, ok := req.Args["content"]; ok {
		now, sent := str(p["content"]), str(content)
		req.held = sameText(now, sent)                // a touch: the text stays its writer's, or, respelt, no one's
		req.respelt = req.held && now != sent && !own // its own words respelt stay its writer's
		if req.held && now != sent && own {
			req.respeltOwn = &st
		}
		req.stale = s.staleBase(req, p, d)
	}
	return true
}

// ruleUpdateChanged: an update_drawer whose drawer changed on the primary
// since the edit was made (staleBase).
const ruleUpdateChanged Rule = "update:changed-on-primary"

// drawerStamp is drawer id's stamp in the provenance index (none without
// one).
func (s *Server) drawerStamp(id string) (provenance.Stamp, bool) {
	if s.prov == nil {
		return provenance.Stamp{}, false
	}
	return s.prov.Lookup(provenance.Drawer(id))
}

// ruleDeleteChanged: a delete_drawer whose drawer changed on the primary
// since the device read the text it deletes, in its palace or on the
// primary (staleBase).
const ruleDeleteChanged Rule = "delete:changed-on-primary"

// ruleUpdateEditedOver: an update_drawer the op-id ledger held in doubt,
// sent again, whose drawer changed on the primary since the edit
// (changed.editedOver).
const ruleUpdateEditedOver Rule = "update:in-doubt-changed-since"

// changed is staleBase's refusal, which sendWrite makes under the write
// slot, after the op-id ledger (a send it recorded is answered from the
// record, never refused). code is ledger.CodeChangedOnPrimary, or
// ledger.CodeInDoubt for a send of an op that may have landed
// (editedOver); othersTunnel's and notOnPrimary's refusals are made the
// same way, with their own codes.
type changed struct {
	msg, wing string
	id, who   string // the drawer, and who changed it (staleBase's words)
	code      int
	rule      Rule
}

func (e *changed) Error() string { return e.msg }

// editedOver is the answer to a resend of an op the op-id ledger held in
// doubt (its first send reached the primary, its answer lost) whose
// drawer changed since the edit: that send may have landed and been
// edited over by the writer named (who), or never landed. Which one
// nothing here can tell, so it is no conflict: the op stays in doubt,
// and nothing is written (attack66 N1).
func (e *changed) editedOver() *changed {
	return &changed{wing: e.wing, id: e.id, who: e.who, code: ledger.CodeInDoubt, rule: ruleUpdateEditedOver, msg: fmt.Sprintf("devbox-config gateway: this op may have landed: its first send reached the primary and no answer came back, and drawer %s has changed on the primary since this edit was made (%s): the edit either landed and was then edited over, or never landed; which, nothing can tell. Nothing was written now, and the op stays in doubt. If it landed (the other writer's text came after it): devbox-config edge outbox delivered <op> keeps the primary's text; to overwrite the primary's text with this edit: devbox-config edge outbox retry <op> (sent without the check; the text it replaces stays in the gateway's trash)", e.id, e.who)}
}

// staleBase refuses an update_drawer whose base (params._meta[origin.BaseKey]:
// the sha256 of the text the device's local palace held before the edit)
// is not drawer p's text on the primary: another device changed it since
// (its stamp names who last wrote it; d's own stamp names no one then). The primary holding
// the update's own text, byte for byte (a send whose answer was lost), is
// no conflict, nor is an update without a base (nil). Like the base, it is
// exact: a text equal but for line endings, Unicode form or whitespace
// (sameText, req.held) is another device's, not to be written over unseen
// (attack66 N3).
func (s *Server) staleBase(req *rpcRequest, p map[string]any, d *Device) *changed {
	meta := req.meta()
	base, _ := meta[origin.BaseKey].(string)
	sent, edit := req.Args["content"].(string)
	if now := str(p["content"]); base == "" || edit && now == sent || origin.Base(now) == base {
		return nil
	}
	st, stamped := s.drawerStamp(str(p["drawer_id"]))
	who := "by a write the gateway has no record of (made before it kept one, or around it)"
	switch {
	case stamped && st.Device == d.ID: // its stamp is this device's: that write's text is not kept, so which is not known
		who = "not through this gateway, or by this device's earlier write"
	case stamped && st.Device != "":
		who = fmt.Sprintf("last written by device %s at %s", st.Device, st.At.UTC().Format(time.RFC3339))
	}
	id := str(p["drawer_id"])
	if !edit { // a delete_drawer's
		return &changed{wing: str(p["wing"]), who: who, id: id, code: ledger.CodeChangedOnPrimary, rule: ruleDeleteChanged, msg: fmt.Sprintf("devbox-config gateway: drawer %s changed on the primary since this delete was made (%s): its text there is not the one this device read when it made the delete (its own palace's copy, or the primary's), and this delete would remove it unseen; nothing was deleted. The drawer stays deleted in this device's local palace, and hidden from its reads. To delete the primary's text too: devbox-config edge outbox retry <op> (sent without the check; the gateway's trash keeps what it removes); to keep the primary's: devbox-config edge outbox drop <op>, and read the drawer again", id, who)}
	}
	return &changed{wing: str(p["wing"]), who: who, id: id, code: ledger.CodeChangedOnPrimary, rule: ruleUpdateChanged, msg: fmt.Sprintf("devbox-config gateway: drawer %s changed on the primary since this edit was made (%s): its text there is not the one this device's palace held when the edit was made, and this update would overwrite it unseen; nothing was written. The edit is kept in this device's local palace. To overwrite the primary's text with it: devbox-config edge outbox retry <op> (sent without the check; the text it replaces stays in the gateway's trash); to keep the primary's: devbox-config edge outbox drop <op>, and read the drawer again", id, who)}
}
