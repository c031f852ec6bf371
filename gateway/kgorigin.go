package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// addingHeldFact reports that the upstream holds the fact a kg_add
// sends (subject, predicate, object) current: MemPalace then files none
// and answers the current fact's id, so the add is not that fact's to
// stamp (attack23 N3: a fact filed around the gateway, or one whose
// kg_add answer was lost, read as the next adder's). A resend of an op
// the ledger held in doubt claims it when nothing stamped it and its
// first send found it absent (ledger.Resent: that send's, whose answer
// was lost); one whose first send found it current, or could not look,
// claims nothing (ledger.Held, sendWrite: attack24 M2, M3). A look-up
// that fails proves nothing: the add stamps nothing either (logged). It also moves the stamps of
// the subject's facts closed around the gateway (retireFactStamps). The
// cost: one kg_query of the subject before each kg_add. The answer of an
// add held by another's fact, or by one with other dates, says so
// (req.heldNote, heldNote).
func (s *Server) addingHeldFact(ctx context.Context, d *Device, req *rpcRequest) bool {
	args := req.Args
	facts := s.factsOf(ctx, args)
	if facts == nil {
		s.Log.Warn("provenance: the facts of a kg_add's subject were not read before it; the fact reads as of unknown origin", "subject", args["subject"], "predicate", args["predicate"])
		return !ledger.Resent(ctx)
	}
	s.retireFactStamps(ctx, args, "object", facts)
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if str(f["valid_to"]) != "" || !sameTriple(f, str(args["subject"]), str(args["predicate"]), str(args["object"])) {
			continue
		}
		st, stamped := s.prov.Lookup(provenance.Fact(str(args["subject"]), str(args["predicate"]), str(args["object"]), str(f["valid_from"]), ""))
		held := stamped || !ledger.Resent(ctx)
		if held {
			req.heldNote = heldNote(d, args, str(f["valid_from"]), st, stamped)
		}
		return held
	}
	if req.heldNote = s.replacedHeld(ctx, d, req, facts); req.heldNote != nil {
		req.replaced = true // not sent (sendWrite)
		return true
	}
	return false
}

// heldNote is what a kg_add's answer gains when the upstream held its
// fact current already and filed nothing (attack99 F1): "held_by" (the
// device whose fact it is, "" of unknown origin), "valid_from_kept" and
// a "note" saying the add's own dates were not kept; nil when it is this
// device's own fact with the add's dates as MemPalace keeps them (a send
// again, or a join: review32 R2).
func heldNote(d *Device, args map[string]any, kept string, st provenance.Stamp, stamped bool) map[string]any {
	asked, to := str(args["valid_from"]), str(args["valid_to"])
	if same := provenance.Temporal(asked); stamped && st.Device == d.ID && (same == "" || same == provenance.Temporal(kept)) && to == "" {
		return nil
	}
	fix := "end it (any --kg write device may), then add it again"
	switch {
	case stamped && st.Device == d.ID:
		fix = "supersede it, or end it and add it again"
	case stamped:
		fix = "an admin device may end it, after which this add, made again, files this device's own"
	}
	dates := ""
	if asked != "" || to != "" {
		dates = fmt.Sprintf(" (from %s to %s)", cmp.Or(asked, "-"), cmp.Or(to, "-"))
	}
	return map[string]any{"held_by": st.Device, "valid_from_kept": kept, "note": fmt.Sprintf(
		"devbox-config gateway: the primary held this fact current already, %s, before this add arrived: nothing was filed, so this add's dates%s were not kept and the fact reads as that writer's; to record this device's dates: %s", whoseSince(d, kept, st, stamped), dates, fix)}
}

// whoseSince names a current fact for a held write's note: whose it is
// (this device's own, another device's, or of unknown origin: st and
// stamped, its provenance) and since when (kept, its valid_from).
func whoseSince(d *Device, kept string, st provenance.Stamp, stamped bool) string {
	whose := "of unknown origin (filed around the gateway, or its add's answer lost)"
	switch {
	case stamped && st.Device == d.ID:
		whose = "this device's own"
	case stamped:
		whose = fmt.Sprintf("device %s's (label %s)", st.Device, st.Label)
	}
	if kept == "" {
		return whose + ", with no start date"
	}
	return whose + ", from " + kept
}

// supersedeHeld decides a kg_supersede whose old fact the primary holds
// closed, none of it open (facts: the subject's, read before it by
// endsOthersFact), while another value of its subject and predicate is
// current, neither its old object nor its new one, that replaced it
// (replacement): the second of two devices superseding one fact
// (attack105 F2). MemPalace would close nothing and open the new value
// beside the current one, so every reader saw two current values and no
// writer was told. Such a supersede is not
// sent: its answer (a success: the op is done) is held_by and
// valid_from_kept, as a held kg_add's, already_closed (the old fact's end
// kept) and a note. nil: it is sent as before (the old fact open; closed
// with no other value current, an invalidate's end; or the new value
// current already, a resend or two devices choosing one value).
func (s *Server) supersedeHeld(ctx context.Context, d *Device, args map[string]any, facts []any) map[string]any {
	subj, pred, old, nw := str(args["subject"]), str(args["predicate"]), str(args["old_object"]), str(args["new_object"])
	if isCurrent(facts, subj, pred, nw) {
		return nil
	}
	return s.replacedNote(ctx, d, facts, subj, pred, old, nw, "supersede", addedAfter{})
}

// replacedHeld decides a kg_add of a current fact (no valid_to, or one
// ahead of now) whose object the primary holds closed, replaced by
// another value that is current (replacement): a device that filed the
// old value while another device superseded it, each offline (attack112
// F1: MemPalace filed it again beside the replacement, and that device's
// own supersede of it then went through too). Held as supersedeHeld's,
// unless the add starts after the replacement did (its valid_from later)
// and was made after the replacement landed (the op's made-at, or now
// for a call not queued: its device could have seen it), a value meant
// to be current beside it; an add made offline before the replacement
// landed is held whatever its valid_from (attack113 F1). nil: it is sent.
func (s *Server) replacedHeld(ctx context.Context, d *Device, req *rpcRequest, facts []any) map[string]any {
	args, now := req.Args, s.Now().UTC()
	if vt := provenance.Instant(str(args["valid_to"])); vt != "" && vt <= now.Format(time.RFC3339) {
		return nil // closed: never a second current value (attack113 F2: one ending ahead is current till then)
	}
	meta := req.meta()
	made, err := time.Parse(time.RFC3339, str(meta[ledger.MadeAtKey]))
	if err != nil {
		made = now // not queued (a live call), or a build that sends no made-at
	}
	return s.replacedNote(ctx, d, facts, str(args["subject"]), str(args["predicate"]), str(args["object"]), str(args["object"]), "add", addedAfter{provenance.Instant(str(args["valid_from"])), made, true})
}

// addedAfter is what lets an add of a replaced value be filed beside its
// replacement: it starts after the replacement did (from), and was made
// after the replacement landed on the primary (made); or, others, the
// replacement is not known to be another device's (this device's own,
// which it made before the add and replicates in order, or of unknown
// origin: a supersede whose answer was lost; the chaos test's one device
// re-adding a value it had replaced).
type addedAfter struct {
	from   string
	made   time.Time
	others bool
}

// replacedNote is the held answer of a write (verb) that would make nw
// current while old, closed on the primary, has a current replacement
// (nil when old has none, or, for an add, when after lets it be filed
// beside it). A resend of an op the ledger held in doubt says its first
// send may have filed it before it was replaced (review34 R4).
func (s *Server) replacedNote(ctx context.Context, d *Device, facts []any, subj, pred, old, nw, verb string, after addedAfter) map[string]any {
	other, ended := replacement(facts, subj, pred, old)
	if other == nil {
		return nil
	}
	cur, kept := str(other["object"]), str(other["valid_from"])
	st, stamped := s.prov.Lookup(provenance.Fact(subj, pred, cur, kept, ""))
	if after.others && (!stamped || st.Device == d.ID) || after.from > provenance.Instant(kept) && (!stamped || !after.made.Before(st.At)) {
		return nil
	}
	fix := "or kg_add it if both are meant to be current"
	if verb == "add" {
		fix = fmt.Sprintf("or, if both are meant to be current, kg_add it with a valid_from after %s (made offline before that value reached the primary, an add is held whatever its valid_from)", kept)
	}
	filed := "nothing was filed"
	if ledger.Resent(ctx) {
		filed = "nothing was filed by this send (its op's first send, whose answer was lost, may have filed it before it was replaced)"
	}
	return map[string]any{"held_by": st.Device, "valid_from_kept": kept, "already_closed": ended, "note": fmt.Sprintf(
		"devbox-config gateway: the primary held %q closed already (ended %s) and %q current, %s, before this %s arrived (another device's supersede reached it first, or an earlier one of this device's): %s, so %q was not made current (MemPalace would have opened it beside %q: two current values); to make it the value: supersede %q with it (ending another device's fact is for an admin device), %s",
		old, ended, cur, whoseSince(d, kept, st, stamped), verb, filed, nw, cur, cur, fix)}
}

// replacement is the current value of subject and predicate that replaced
// old on the primary (facts: the subject's), and old's last end: nil when
// old is current, or closed with no value replacing it (replacedBy).
func replacement(facts []any, subj, pred, old string) (map[string]any, string) {
	ended, reached := "", map[string]bool{} // old's last end; the instants its replacements start at
	var values []map[string]any             // the subject and predicate's other values
	for _, x := range facts {
		f, _ := x.(map[string]any)
		switch {
		case !sameTriple(f, subj, pred, str(f["object"])):
		case !sameTriple(f, subj, pred, old):
			values = append(values, f)
		case str(f["valid_to"]) == "":
			return nil, ""
		default:
			ended = max(ended, str(f["valid_to"]))
			reached[provenance.Temporal(str(f["valid_to"]))] = true
		}
	}
	return replacedBy(values, reached), ended
}

// isCurrent: facts hold subject, predicate and object open.
func isCurrent(facts []any, subj, pred, obj string) bool {
	return slices.ContainsFunc(facts, func(x any) bool {
		f, _ := x.(map[string]any)
		return str(f["valid_to"]) == "" && sameTriple(f, subj, pred, obj)
	})
}

// replacedBy is the current value the old fact's replacements lead to:
// a value that starts at an instant reached (an end of the old fact, at
// first) replaced it, as a supersede leaves them (one instant); a closed
// one's end is reached in turn (alice -> bob -> dave: attack109 F3). A
// value current beside the old one all along (a predicate of several
// values) replaced nothing (review33 R1). nil: none current.
func replacedBy(values []map[string]any, reached map[string]bool) map[string]any {
	for grew := true; grew; {
		grew = false
		for _, f := range values {
			if !reached[provenance.Temporal(str(f["valid_from"]))] {
				continue
			}
			end := provenance.Temporal(str(f["valid_to"]))
			if end == "" {
				return f
			}
			if !reached[end] {
				reached[end], grew = true, true
			}
		}
	}
	return nil
}

// sameTriple: the fact f, as kg_query lists it, is subject, predicate
// and object as MemPalace normalizes them.
func sameTriple(f map[string]any, subject, predicate, object string) bool {
	return slices.Equal(provenance.Fact(str(f["subject"]), str(f["predicate"]), str(f["object"]), "", "").Parts, provenance.Fact(subject, predicate, object, "", "").Parts)
}

// factsOf are the upstream's facts of a KG write's subject (outgoing),
// nil when it did not answer.
func (s *Server) factsOf(ctx context.Context, args map[string]any) []any {
	facts, _ := s.upstreamResult(ctx, "mempalace_kg_query", map[string]any{"entity": str(args["subject"]), "direction": "outgoing"})["facts"].([]any)
	return facts // an empty list decodes as one, not nil: read, none held
}

// retireFactStamps moves the stamp of an open fact (the args' subject,
// predicate and the object named by objKey) that the upstream holds
// closed (facts, the subject's) to the closed fact's key, so the fact
// filed again after it (another fact, of another writer: MemPalace opens
// a new one) does not read as the closed one's writer's (attack22 F8).
// It runs under the write slot, after a kg_invalidate or kg_supersede
// (its answer given or lost: the upstream says what happened), and
// before a kg_add (closed around the gateway since, the add files a new
// fact, stamped with its own writer). A closed fact the index holds a
// stamp for keeps its own; an open fact with the same valid_from as a
// closed one keeps the open stamp (it cannot be told which of the two it
// was). The cost: one kg_query of the subject after each kg_invalidate
// and kg_supersede.
func (s *Server) retireFactStamps(ctx context.Context, args map[string]any, objKey string, facts []any) {
	subj, pred, obj := str(args["subject"]), str(args["predicate"]), str(args[objKey])
	if facts == nil {
		s.Log.Warn("provenance: the facts of a KG write were not read; a fact it closed keeps its stamp on the open fact's key", "subject", subj, "predicate", pred)
		return
	}
	open, closed := map[string]bool{}, map[string]string{} // by valid_from; closed: the latest valid_to
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if !sameTriple(f, subj, pred, obj) {
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

// The rules that refuse a device that is not admin the end of a fact it
// did not write (attack44 F2: a kg write grant ended any device's facts,
// palace-wide, and a device trusting only the admin then read the
// admin's fact as ended).
//
// A fact of unknown origin (written around the gateway or before it, or a
// device's own whose kg_add answer was lost, so the gateway never stamped
// it) is ended as before: refusing it would leave a device unable to end
// its own fact after a lost answer, and such a fact is already untrusted
// by every device with a trusted set.
const ruleOthersFact Rule = "kg write: a device that is not admin ends only the facts it wrote (this open fact is another device's; an admin device may end it)"

// endsOthersFact decides a kg_invalidate or kg_supersede: one of a
// triple the primary holds no fact of is refused (notOnPrimary) for any
// device; for a device that is not admin, MemPalace ends every open fact
// of its subject, predicate and object (old_object), and each must be one
// the provenance index holds as this device's or holds no stamp for (a
// *denial naming the rule when another device's is among them).
// An admin device ends any. errNoAnswer when the subject's facts could
// not be read (an admin's end is sent all the same). sendWrite asks it
// under the write slot: a fact checked before the wait could be ended
// and filed again by another writer before the send. The facts read
// (req.facts) let a kg_invalidate's answer tell of a fact closed already
// (closedAlready). The cost: one kg_query of the subject before each.
func (s *Server) endsOthersFact(ctx context.Context, d *Device, t catalogue.Tool, req *rpcRequest) error {
	args := req.Args
	objKey := map[string]string{"kg_invalidate": "object", "kg_supersede": "old_object"}[t.Name]
	if objKey == "" {
		return nil
	}
	facts := s.factsOf(ctx, args)
	req.facts = facts // a kg_invalidate's answer notes a fact closed already (closedAlready)
	switch {
	case facts == nil && d.Admin:
		return nil
	case facts == nil:
		return fmt.Errorf("%w kg_query of %q", errNoAnswer, str(args["subject"]))
	}
	subj, pred, obj := str(args["subject"]), str(args["predicate"]), str(args[objKey])
	if !slices.ContainsFunc(facts, func(x any) bool { f, _ := x.(map[string]any); return sameTriple(f, subj, pred, obj) }) {
		return notOnPrimary(t.Name, args)
	}
	if d.Admin {
		return nil
	}
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if f["valid_to"] != nil || !sameTriple(f, subj, pred, obj) {
			continue
		}
		if st, stamped := s.prov.Lookup(provenance.Fact(subj, pred, obj, str(f["valid_from"]), "")); stamped && st.Device != d.ID {
			return &denial{ruleOthersFact, ruleOthersFact.String()}
		}
	}
	return nil
}

// ruleNotOnPrimary refuses the end of a fact the primary holds none of.
const ruleNotOnPrimary Rule = "kg write: an end of a fact the primary holds none of (its add not there yet, or never sent)"

// notOnPrimary refuses a kg_invalidate or kg_supersede (tool) of a
// triple the primary holds no fact of, open or closed (attack99 F2):
// MemPalace answers such an end success and changes nothing, and a
// supersede opens its new fact all the same, so the end was lost
// silently, and a supersede whose old fact landed after it left two
// current values. Refused, not sent (ledger.CodeNotOnPrimary, which an
// edge sends again as any refusal): the fact's add may be on its way
// from another palace of the device, after which the end lands.
func notOnPrimary(tool string, args map[string]any) *changed {
	obj, also := str(args["object"]), ""
	if tool == "kg_supersede" {
		obj, also = str(args["old_object"]), fmt.Sprintf("; %q was not opened either (MemPalace would open it beside whatever value is current)", str(args["new_object"]))
	}
	return &changed{code: ledger.CodeNotOnPrimary, rule: ruleNotOnPrimary, msg: fmt.Sprintf(
		"devbox-config gateway: the primary holds no fact %q → %q → %q, open or closed, so this %s would change nothing there (MemPalace answers it success): refused, nothing written%s. If the fact's kg_add is still queued (on another palace of this device, or this one), an edge sends this end again and it lands once the add has; if only this devbox's palace holds the fact (written without the primary), `devbox-config join` sends it, then `devbox-config edge outbox retry <op>` sends this end; `devbox-config edge outbox drop <op>` gives it up",
		str(args["subject"]), str(args["predicate"]), obj, tool, also)}
}

// closedAlready notes in a kg_invalidate's answer (resp, status) that the
// fact it ends was closed before it arrived (facts: the subject's, read
// before the send; none of the triple open, one closed): MemPalace
// answers such an end success and changes nothing, so the second of two
// devices closing one fact would not learn its end date was not kept
// (attack63 F2). The answer gains "already_closed" (the end kept) and a
// "note"; any other answer is as it was.
func closedAlready(args map[string]any, facts []any, status int, resp []byte) []byte {
	if status != http.StatusOK || facts == nil {
		return resp
	}
	kept := ""
	for _, x := range facts {
		f, _ := x.(map[string]any)
		if !sameTriple(f, str(args["subject"]), str(args["predicate"]), str(args["object"])) {
			continue
		}
		if str(f["valid_to"]) == "" {
			return resp // an open one: this end closes it
		}
		kept = max(kept, str(f["valid_to"]))
	}
	if kept == "" {
		return resp
	}
	not := ""
	if asked := askedEnd(args, resp); asked != "" {
		not = ", not " + asked
	}
	return withMembers(resp, map[string]any{"already_closed": kept, "note": fmt.Sprintf(
		"devbox-config gateway: this fact was already closed on the primary (ended %s) before this invalidate arrived (another device's end reached it first, or an earlier one of this device's); nothing changed: its end stays %s%s", kept, kept, not)})
}

// askedEnd is the end a kg_invalidate asked for: its "ended", or, left
// out, the date MemPalace took for it (today), which its answer names
// ("" if neither).
func askedEnd(args map[string]any, resp []byte) string {
	if e := str(args["ended"]); e != "" {
		return e
	}
	return gjson.Get(gjson.GetBytes(resp, "result.content.0.text").String(), "ended").String()
}

// withMembers adds members to a successful answer's JSON text (MemPalace's
// result object); any other answer is as it was.
func withMembers(resp []byte, add map[string]any) []byte {
	if len(add) == 0 {
		return resp
	}
	text := gjson.GetBytes(resp, "result.content.0.text")
	var m map[string]any
	if text.Type != gjson.String || json.Unmarshal([]byte(text.Str), &m) != nil || m["success"] != true {
		return resp
	}
	maps.Copy(m, add)
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return resp // cannot happen: m came from json.Unmarshal, add is strings
	}
	out, err := sjson.SetBytes(resp, "result.content.0.text", string(body))
	if err != nil {
		return resp // cannot happen: the path was read just now
	}
	return out
}
