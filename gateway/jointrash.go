package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/trash"
)

// ruleJoinDeleted: a join's replay of a record an admin deleted on the
// primary, which the trash holds as deleted; ruleReplayDeleted: an edge's
// replay of such a drawer (an add_drawer its local palace answered
// already_exists: params._meta[origin.ReplayKey]).
const (
	ruleJoinDeleted   Rule = "join:deleted-on-primary"
	ruleReplayDeleted Rule = origin.ReplayDeletedRule
	ruleUpdateDeleted Rule = "update:deleted-on-primary"
)

// joinStep is the trash's word on a join's replay (a write whose
// params._meta[origin.JoinKey] is true): an add_drawer or diary_write that
// would file again what a delete through the gateway removed, and no
// restore brought back, is refused with ledger.CodeDeletedOnPrimary; so is
// an edge's replay (params._meta[origin.ReplayKey] true: its local palace
// answered already_exists), worded for a replay. An
// admin device (which runs joins for others) is told the delete and the
// restore that brings it back; any other only that it was deleted on the
// primary and the operator can restore it (the trash is the operator's).
// The same write without the mark (an agent filing it again on purpose)
// is not a join's and goes through, and so does a join's write of a drawer
// filed again since the delete (the primary holds it: one get_drawer,
// asked only of a drawer the trash holds; when the primary does not
// answer it, the write is answered as the primary being busy, HTTP 503,
// neither refused nor made). A trash that cannot be read refuses the
// join's write (fail closed). It answers the request itself
// when it refuses (ok false).
func (s *Server) joinStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest) (ok bool) {
	meta := req.meta()
	mark, present := meta[origin.JoinKey]
	replay, replayed := meta[origin.ReplayKey]
	local, named := meta[origin.JoinDrawerKey]
	id, _ := local.(string)
	switch {
	case named && (mark != true || t.Name != "add_drawer" || id == "" || len(id) > maxDrawerID):
		s.refuse(x, d, req, -32602, fmt.Sprintf("devbox-config gateway: Invalid params: params._meta[%q] must be a drawer id, on an add_drawer whose params._meta[%q] is true", origin.JoinDrawerKey, origin.JoinKey), ruleArguments, "")
		return false
	case !present && !replayed:
		return t.Name != "add_drawer" || s.writerStep(ctx, x, d, t, req)
	case present && mark != true || replayed && replay != true:
		s.refuse(x, d, req, -32602, fmt.Sprintf("devbox-config gateway: Invalid params: params._meta[%q] and params._meta[%q] must be true", origin.JoinKey, origin.ReplayKey), ruleArguments, "")
		return false
	case t.Name != "add_drawer" && t.Name != "diary_write":
		return true
	}
	copyN, _ := meta[origin.JoinCopyKey].(json.Number) // absent: 1, any copy in the trash
	nth, _ := copyN.Int64()
	del, found, err := s.deletedBefore(ctx, t, req.Args, id, int(nth))
	if errors.Is(err, errNoAnswer) {
		s.busy(x, d, req, ruleNoAnswer, err)
		return false
	}
	if err != nil {
		s.Log.Error("trash cannot be read: refusing a join's (or an edge's replayed) write", "device", d.ID, "tool", req.Tool, "err", err)
		s.refuse(x, d, req, CodeDenied, "devbox-config gateway: the gateway's trash cannot be read, and a join's (or an edge's replayed) write that may file again what an admin deleted on the primary is not made; nothing was written", ruleTrash, "")
		return false
	}
	if !found {
		return true
	}
	again := ""
	if replay == true {
		again = replayAgain
	}
	msg, rule := deletedWords(d, t, del, again)
	s.refuse(x, d, req, ledger.CodeDeletedOnPrimary, msg, rule, del.Drawers[0].Wing)
	return false
}

// The refusals' words for a write that is not a join's: an edge's replay
// of its local copy, and the writer's own write of the same words.
const (
	replayAgain = "a replay of this device's local copy does not file it again"
	writerAgain = "this device wrote it, and writing its words again does not file it again"
	updateAgain = "an update does not file it again"
)

// updateStep refuses, with ledger.CodeDeletedOnPrimary, an update_drawer
// of a drawer the primary lacks because an admin deleted it there (the
// trash holds it, not restored), in a wing the device may read: the
// device is told the delete and the restore, not that the drawer is not
// visible to it (a grant's reason; an edge's offline update flushed after
// the delete, attack48 F4). A drawer in a wing it may not read, or one the
// trash does not hold, is left to the "not visible" refusal, which tells
// neither apart. It answers the request itself when it refuses (ok false).
func (s *Server) updateStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest) (ok bool) {
	id, _ := req.Args["drawer_id"].(string)
	bin, err := s.Trash()
	var del trash.Delete
	found := false
	if err == nil && id != "" {
		del, found, err = bin.DeletedDrawer(ctx, id)
	}
	if err == nil && !found {
		if id == "" {
			return true // no drawer named: the "not visible" refusal
		}
		return s.restoredStep(ctx, x, d, t, req, id)
	}
	if err != nil {
		s.Log.Warn("trash cannot be read: an update of a drawer the primary lacks is refused as not visible", "device", d.ID, "err", err)
		return true
	}
	if !d.reads(del.Drawers[0].Wing) {
		return true
	}
	msg := fmt.Sprintf("devbox-config gateway: this drawer was deleted on the primary by an admin and is in the gateway's trash (delete %d, wing %s), not restored; %s; nothing was written. The gateway's operator can bring it back (devbox-config gateway trash restore %d), then update it again", del.ID, del.Drawers[0].Wing, updateAgain, del.ID)
	if d.Admin || del.Drawers[0].PurgedAt != nil {
		msg, _ = deletedWords(d, t, del, updateAgain)
	}
	s.refuse(x, d, req, ledger.CodeDeletedOnPrimary, msg, ruleUpdateDeleted, del.Drawers[0].Wing)
	return false
}

// ruleRestoredAs: an update or delete of a drawer id the operator's
// restore brought back under another id (an updated drawer comes back
// under the id its content gives).
const ruleRestoredAs Rule = "restored-as-another-id"

// restoredStep refuses, with ledger.CodeDeletedOnPrimary (an edge makes
// the op dead at once: no try of this id lands), an update_drawer or
// delete_drawer of drawer id the primary lacks because the operator
// restored it under another id, in a wing the device may read: the
// device is told the new id to write to, not that the drawer is not
// visible to it (outside tester attack63 F1). Any other id is left to
// the "not visible" refusal. It answers the request itself when it
// refuses (ok false).
func (s *Server) restoredStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest, id string) (ok bool) {
	bin, err := s.Trash()
	var del trash.Delete
	found := false
	if err == nil {
		del, found, err = bin.RestoredElsewhere(ctx, id)
	}
	if err != nil {
		s.Log.Warn("trash cannot be read: a write of a drawer the primary lacks is refused as not visible", "device", d.ID, "err", err)
		return true
	}
	if !found || !d.reads(del.Drawers[0].Wing) {
		return true
	}
	dr := del.Drawers[0]
	verb := strings.TrimSuffix(t.Name, "_drawer")
	msg := fmt.Sprintf("devbox-config gateway: "+ledger.RestoredAsWords+"%s: %s %s (this id, %s, is not on the primary: an admin deleted it, delete %d in the gateway's trash, wing %s, and the restore brought it back %s under the id its content gives; the restored drawer holds the text as it was deleted); nothing was written",
		dr.RestoredAs, verb, dr.RestoredAs, id, del.ID, dr.Wing, dr.RestoredAt.Format(time.RFC3339))
	s.refuse(x, d, req, ledger.CodeDeletedOnPrimary, msg, ruleRestoredAs, dr.Wing)
	return false
}

// writerStep refuses, as a replay is, a fresh add_drawer (no mark) by the
// device that wrote a drawer an admin deleted on the primary (the trash
// keeps its writer), of the same words and not restored: its agent filing
// again what it remembers, or after deleting its local copy, would undo
// the delete (outside tester attack38 B2). Another device's write of the
// same words is made, and so is the deleting device's own (wroteIt). One
// trash look-up per add_drawer; the primary is asked only for a drawer the
// trash holds.
func (s *Server) writerStep(ctx context.Context, x *exchange, d *Device, t catalogue.Tool, req *rpcRequest) bool {
	del, found, err := s.deletedBefore(ctx, t, req.Args, "", 0)
	switch {
	case errors.Is(err, errNoAnswer):
		s.busy(x, d, req, ruleNoAnswer, err)
		return false
	case err != nil:
		// An agent's own write is not refused for a trash it cannot read
		// (a join's or replay's is: joinStep).
		s.Log.Error("trash cannot be read: an add_drawer is made without looking for its writer's deleted copy", "device", d.ID, "err", err)
		return true
	case !found || !wroteIt(d, del):
		return true
	}
	msg, rule := deletedWords(d, t, del, writerAgain)
	s.refuse(x, d, req, ledger.CodeDeletedOnPrimary, msg, rule, del.Drawers[0].Wing)
	return false
}

// wroteIt reports device d as the writer of the drawer delete del removed
// (the trash keeps its writer), the delete not its own (it chose to).
func wroteIt(d *Device, del trash.Delete) bool {
	o := del.Drawers[0].Origin
	return o != nil && o.Device == d.ID && del.Device != d.ID
}

// deletedWords is the refusal of a write of what delete del removed, and
// its rule: to an admin device the delete and the restore that brings it
// back, to any other only that it was deleted on the primary and the
// operator can restore it (first, so a note that cuts the words keeps
// it). again says why this write does not file it again (replayAgain,
// writerAgain); "" for a join's.
func deletedWords(d *Device, t catalogue.Tool, del trash.Delete, again string) (string, Rule) {
	dr := del.Drawers[0]
	what := map[string]string{"add_drawer": "this drawer", "update_drawer": "this drawer", "diary_write": "this diary entry", "checkpoint": "this item's drawer"}[t.Name]
	if dr.PurgedAt != nil { // no restore brings it back: none is offered
		rule, why := ruleJoinDeleted, "a join does not file again what was deleted on the primary"
		if again != "" {
			rule, why = ruleReplayDeleted, again
		}
		if d.Admin {
			return fmt.Sprintf("devbox-config gateway: %s was deleted on the primary, and the "+ledger.PurgedWords+" from the gateway's trash: %s (%s/%s), removed by delete %d (%s by %s), purged %s; no restore brings it back, and %s; nothing was written",
				what, dr.ID, dr.Wing, dr.Room, del.ID, del.Tool, del.Device, dr.PurgedAt.Format(time.RFC3339), why), rule
		}
		return fmt.Sprintf("devbox-config gateway: %s was deleted on the primary, and the gateway's "+ledger.PurgedWords+" for good; %s (wing %s; nothing was written)", what, why, dr.Wing), rule
	}
	if again != "" {
		if d.Admin {
			return fmt.Sprintf("devbox-config gateway: %s was deleted on the primary; `gateway trash restore %d` brings it back: %s (%s/%s) was removed by delete %d in the gateway's trash (%s, %s by %s) and has not been restored; %s; nothing was written (on the gateway: devbox-config gateway trash restore %d, or trash restore %s for this one alone)",
				what, del.ID, dr.ID, dr.Wing, dr.Room, del.ID, del.Time.Format(time.RFC3339), del.Tool, del.Device, again, del.ID, dr.ID), ruleReplayDeleted
		}
		return fmt.Sprintf("devbox-config gateway: %s was deleted on the primary, and the gateway's operator can restore it; %s (wing %s, not restored; nothing was written; devbox-config gateway trash list)", what, again, dr.Wing), ruleReplayDeleted
	}
	if d.Admin {
		return fmt.Sprintf("devbox-config gateway: a join does not file again what was deleted on the primary: %s (%s/%s) was removed by delete %d in the gateway's trash (%s, %s by %s) and has not been restored; nothing was written. To have it back, on the gateway: devbox-config gateway trash restore %d (or trash restore %s for this one alone)",
			dr.ID, dr.Wing, dr.Room, del.ID, del.Time.Format(time.RFC3339), del.Tool, del.Device, del.ID, dr.ID), ruleJoinDeleted
	}
	return fmt.Sprintf("devbox-config gateway: a join does not file again what was deleted on the primary: %s (wing %s) was deleted on the primary and has not been restored; nothing was written. The gateway's operator can restore it (devbox-config gateway trash list)", what, dr.Wing), ruleJoinDeleted
}

// maxDrawerID bounds the local drawer id a join names (MemPalace's ids
// are drawer_<wing>_<room>_<hash>, names of at most 128 characters).
const maxDrawerID = 2048

// deletedBefore is the delete in the trash that removed what the write
// would file again: a diary entry by its agent, wing and text, when the
// trash holds at least nth equal ones (the join's nth copy the primary
// lacks: k in the trash account for k copies, not for all; the agent as
// MemPalace keeps it, lower-cased; a pending or unconfirmed delete's
// entry counting only if the primary lacks it); a drawer by
// the id its wing, room and content give or, for a drawer updated after it
// was filed, by local (the id the join's palace holds it under) in the
// add's own wing; neither when the primary holds it (filed again since).
func (s *Server) deletedBefore(ctx context.Context, t catalogue.Tool, args map[string]any, local string, nth int) (trash.Delete, bool, error) {
	bin, err := s.Trash()
	if err != nil {
		return trash.Delete{}, false, err
	}
	str := func(k string) string { v, _ := args[k].(string); return v }
	if t.Name == "diary_write" {
		// MemPalace lower-cases the agent it keeps (and the wing it gives).
		gone := func(ctx context.Context, id string) (bool, error) {
			w, err := s.drawerWing(ctx, id) // an entry is a drawer to get_drawer
			return w == "", err
		}
		return bin.DeletedEntry(ctx, catalogue.PythonLower(str("agent_name")), catalogue.DiaryWingFor(args), catalogue.DiaryEntry(args), nth, gone)
	}
	for i, id := range []string{catalogue.DrawerID(str("wing"), str("room"), str("content")), local} {
		if id == "" {
			continue
		}
		del, found, err := bin.DeletedDrawer(ctx, id)
		switch {
		case err != nil:
			return del, false, err
		case !found || i == 1 && del.Drawers[0].Wing != str("wing"): // a local id says nothing of other wings
			continue
		}
		switch w, err := s.drawerWing(ctx, id); {
		case err != nil:
			return trash.Delete{}, false, err // no answer is not "not on the primary"
		case w == "":
			return del, true, nil
		}
	}
	return trash.Delete{}, false, nil
}
