package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// The primary's part of get_drawer and get_drawers: the ids the local
// palace lacks. An id is "Drawer not found" only when the primary said so
// (MemPalace's "Drawer not found", or a gateway's refusal of a drawer this
// device may not see, which it gives a drawer that does not exist too).
// An id the primary did not answer for (down, a timeout, a read rate not
// waited out, an error) says "not answered" and why, and the answer is
// degraded: the primary may hold it. A drawer a gateway withheld from
// this device (an untrusted writer's, for a device that withholds them)
// says withheld, and get_drawers counts it in untrusted_withheld. One this
// device deleted (a tombstone) is not asked: hidden by this device's own
// delete (hiddenByDelete).

// notAnsweredPrefix begins the error of an id the primary did not answer
// for.
const notAnsweredPrefix = "not answered: "

// hiddenByDelete is the error of an id this device deleted (its
// tombstone): the primary may hold the drawer (another device's copy, or
// one an operator restored from a gateway's trash), hidden from this
// device's reads, not gone.
func hiddenByDelete(id string) string {
	return fmt.Sprintf("hidden by this device's own delete: %s was deleted on this device, and its tombstone hides the drawer from this device's reads; the primary may still hold it (devbox-config edge status lists it ON PRIMARY). To show it here again, add_drawer its content to the same wing and room (the same drawer id lifts the tombstone)", id)
}

func notAnswered(id, why string) string {
	return fmt.Sprintf("%s%s is not in the local palace, and the primary did not answer for it (%s): it may hold it", notAnsweredPrefix, id, why)
}

// askPrimary is callPrimary waiting out a gateway's read rate (-32029, as
// join's look-ups do) until until: the last answer, a refusal included.
func (e *Edge) askPrimary(ctx context.Context, c *call, until time.Time) (*mcp.CallToolResult, error) {
	wait := 20 * time.Millisecond
	for {
		res, err := e.callPrimary(ctx, c, true)
		if rpc := peerError(err); rpc == nil || rpc.Code != ledger.CodeRateLimited || time.Now().Add(wait).After(until) {
			return res, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// refused is a gateway's refusal of a read by id (a drawer this device may
// not see, or that does not exist: gateway.CodeDenied), or the primary's
// lack of the tool (MemPalace before 3.11.0 for get_drawers).
func refused(err error) (string, bool) {
	rpc := peerError(err)
	if rpc == nil || (rpc.Code != -31003 && rpc.Code != -32601) {
		return "", false
	}
	return rpc.Message, true
}

// whyUnanswered says why the primary did not answer a call (err), or its
// error answer res.
func whyUnanswered(res *mcp.CallToolResult, err error) string {
	if rpc := peerError(err); rpc != nil {
		return rpc.Message
	}
	if err != nil {
		return err.Error()
	}
	return "it answered an error: " + truncate(resultText(res), 300)
}

// byIDMissing: a drawer the local palace does not have (lacksLocally), or
// every drawer asked while it is busy or down (res nil, busy why), is asked of the
// primary (while it is up); any other local answer stands.
func (e *Edge) byIDMissing(ctx context.Context, c *call, res *mcp.CallToolResult, busy error) *mcp.CallToolResult {
	if c.tool.Name == "get_drawers" {
		return e.drawersMissing(ctx, c, res, busy)
	}
	id := fmt.Sprint(c.argsMap()["drawer_id"])
	var empty bool
	switch {
	case busy != nil:
	case !e.lacksLocally(res) && e.isUntaken(id, func() string { return gjson.Get(resultText(res), "content").String() }):
		return e.untakenRead(ctx, c, res, id)
	case !e.lacksLocally(res):
		return e.marks().tookOnly().result(res, c.tool.Records, origin.PalaceLocal)
	default:
		res, empty = notFoundHere(c, res)
	}
	if e.tombstones(ctx).drawers[id] {
		return annotate(jsonResult(map[string]any{"error": hiddenByDelete(id)}, false), map[string]any{"source": "local", "tombstone": id}, false)
	}
	why := e.remote.State()
	if e.remote.Up() {
		pres, perr := e.askPrimary(ctx, c, time.Now().Add(e.cfg.CallTimeout))
		msg, denied := refused(perr)
		switch {
		case perr == nil:
			return annotate(e.marks().result(pres, c.tool.Records, origin.PalacePrimary), busyMark(map[string]any{"source": "primary"}, busy), busy != nil)
		case denied && busy != nil:
			return errorResult(fmt.Sprintf("%v, and the primary refused it: %s", busy, msg), map[string]any{"local": localState(busy), "primary": "refused: " + msg})
		case denied:
			return annotate(res, map[string]any{"source": "local", "primary": "refused: " + msg}, false) // not found, as far as this device may know
		}
		why = whyUnanswered(pres, perr)
	}
	if busy != nil {
		return busyAndPrimaryDown(busy, why)
	}
	mark := map[string]any{"source": "local", "primary": why}
	if empty {
		mark["local"] = noDrawersYet
	}
	return annotate(jsonResult(map[string]any{"error": notAnswered(id, why)}, false), mark, true)
}

// drawersMissing is byIDMissing for get_drawers: the ids the local palace
// does not have are asked of the primary (primaryDrawers), and its
// answers take their places in the answer, in the order asked, its
// drawers marked as the primary's (a get_drawer's are).
func (e *Edge) drawersMissing(ctx context.Context, c *call, res *mcp.CallToolResult, busy error) *mcp.CallToolResult {
	if refusal := catalogue.BulkIDsRefusal(c.argsMap()["drawer_ids"], "fetch"); refusal != "" {
		if busy != nil {
			return jsonResult(map[string]any{"error": refusal}, false) // what the local palace would answer
		}
		return res // its refusal
	}
	ids, slots, ok := e.localSlots(c, res, busy)
	if !ok {
		return res // not 3.11's shape
	}
	sl := e.sortSlots(ctx, ids, slots)
	if len(sl.missing)+len(sl.untaken) == 0 {
		if busy != nil {
			return annotate(drawersAnswer(slots), busyMark(map[string]any{"source": "local"}, busy), true)
		}
		if sl.changed {
			return drawersAnswer(slots)
		}
		return res
	}
	asked := append(sl.missing, sl.untaken...)
	got, unanswered, why := e.primaryDrawers(ctx, c, asked)
	if busy != nil && unanswered == len(asked) {
		return busyAndPrimaryDown(busy, why)
	}
	for _, i := range sl.at {
		if s, ok := got[ids[i]]; ok {
			slots[i] = s
		}
	}
	mark := map[string]any{"source": "local and primary"}
	if unanswered == len(asked) {
		mark["source"] = "local"
	}
	if why != "" { // an untaken drawer not answered keeps its local text: not counted
		mark["primary"], mark["not_answered"] = why, notAnsweredOf(got, sl.missing)
	}
	if local := e.untakenSlots(slots, ids, sl.untakenAt, got); len(local) > 0 {
		mark["local"] = untakenHere(local...)
	}
	return annotate(drawersAnswer(slots), busyMark(mark, busy), busy != nil || why != "" || mark["local"] != nil)
}

// sortedSlots is what sortSlots found of a get_drawers' local slots:
// the ids to ask the primary for, at their indexes (missing: not found
// here; untaken: found, their dropped edit's take pending, untakenRead),
// and whether a slot was rewritten (a taken drawer marked, a deleted one
// hidden).
type sortedSlots struct {
	missing, untaken []string
	at, untakenAt    []int
	changed          bool
}

// sortSlots marks, hides and sorts slots (drawersMissing), rewriting
// them in place.
func (e *Edge) sortSlots(ctx context.Context, ids []string, slots []json.RawMessage) sortedSlots {
	var sl sortedSlots
	dead, mk := e.tombstones(ctx).drawers, e.marks().tookOnly()
	for i, id := range ids {
		if slots[i] != nil && !gjson.GetBytes(slots[i], "error").Exists() {
			if e.isUntaken(id, func() string { return gjson.GetBytes(slots[i], "content").String() }) {
				sl.untaken, sl.untakenAt = append(sl.untaken, id), append(sl.untakenAt, i)
			}
			if marked := mk.text(string(slots[i]), catalogue.RecordDrawer, origin.PalaceLocal); marked != string(slots[i]) {
				slots[i], sl.changed = json.RawMessage(marked), true
			}
			continue
		}
		if slots[i] == nil || notFound(gjson.GetBytes(slots[i], "error").String()) {
			msg := "Drawer not found: " + id
			if dead[id] {
				msg, sl.changed = hiddenByDelete(id), true
			} else {
				sl.missing, sl.at = append(sl.missing, id), append(sl.at, i)
			}
			slots[i], _ = json.Marshal(map[string]any{"drawer_id": id, "error": msg})
		}
	}
	return sl
}

// untakenSlots puts the primary's answer (got) of each drawer at
// untakenAt, whose dropped edit waits for its take, in its slot where it
// holds the drawer (and has the take tried again): the ids of those left
// with the local text, as the primary answered an error for them (none:
// it does not have them, or holds an untrusted writer's text, keepsOwn,
// and the take leaves the local text too).
func (e *Edge) untakenSlots(slots []json.RawMessage, ids []string, untakenAt []int, got map[string]json.RawMessage) (local []string) {
	answered := false
	for _, i := range untakenAt {
		s, ok := got[ids[i]]
		switch {
		case ok && keepsOwn(string(s)):
			answered = true // the pass keeps the local text, and the note goes
		case ok && !gjson.GetBytes(s, "error").Exists():
			slots[i], answered = s, true
		case ok:
			local = append(local, ids[i])
		}
	}
	if answered {
		e.primaryAnswered()
	}
	return local
}

// drawersInHalves answers a get_drawers whose local answer was too large
// for the edge (tooLarge, errAnswerTooLarge: 160 drawers of 100,000
// emoji pass 64 MiB within MemPalace's 500 ids) as join reads such a
// batch: the local palace is asked for each half of the ids, a half too
// large again in halves (halves), and the halves' drawers are one
// answer, in the order asked. An id whose drawer alone is too large
// gives tooLarge; a half's answer that is not a list of drawers (an
// error, an empty palace's) stands for the whole.
func (e *Edge) drawersInHalves(ctx context.Context, c *call, tooLarge error) (*mcp.CallToolResult, error) {
	ids, _ := c.argsMap()["drawer_ids"].([]any)
	parts, err := halves(ids, tooLarge, func(half []any) (*mcp.CallToolResult, error) {
		hc, err := c.with(map[string]any{"drawer_ids": half})
		if err != nil {
			return nil, err
		}
		return e.localRead(ctx, hc, e.remote.Up())
	})
	if err != nil {
		return nil, err
	}
	var slots []json.RawMessage
	for _, p := range parts {
		if p.err != nil {
			return nil, p.err
		}
		t, _ := objectText(p.res)
		results := gjson.Get(t, "results").Array()
		if len(results) != len(p.ids) {
			return p.res, nil
		}
		for _, r := range results {
			slots = append(slots, json.RawMessage(r.Raw))
		}
	}
	e.log.Info("a get_drawers answer too large for the edge was read from the local palace in parts", "ids", len(ids))
	return drawersAnswer(slots), nil
}

// part is one get_drawers of a read in parts: its ids and its answer,
// or err, why a single id was not answered (its drawer alone too large).
type part struct {
	ids []any
	res *mcp.CallToolResult
	err error
}

// answerTooLarge: an answer over what the edge takes, from the local
// palace or the primary (a gateway's refusal of one over its cap).
func answerTooLarge(err error) bool {
	return errors.Is(err, errAnswerTooLarge) || errors.Is(err, errPrimaryAnswerTooLarge)
}

// inParts asks ask for ids and, when the answer is too large
// (answerTooLarge), for each half of them (halves): the parts answered,
// in the order asked, up to err, the failure that ended the read.
func inParts(ids []any, ask func([]any) (*mcp.CallToolResult, error)) ([]part, error) {
	res, err := ask(ids)
	switch {
	case answerTooLarge(err):
		return halves(ids, err, ask)
	case err != nil:
		return nil, err
	}
	return []part{{ids: ids, res: res}}, nil
}

// halves is inParts for ids whose answer was too large (tooLarge): each
// half asked in parts; a single id's is its part's err.
func halves(ids []any, tooLarge error, ask func([]any) (*mcp.CallToolResult, error)) ([]part, error) {
	if len(ids) < 2 {
		return []part{{ids: ids, err: tooLarge}}, nil
	}
	first, err := inParts(ids[:len(ids)/2], ask)
	if err != nil {
		return first, err
	}
	second, err := inParts(ids[len(ids)/2:], ask)
	return append(first, second...), err
}

// primaryDrawers are the primary's answers for ids, by id: a drawer
// marked as its, a withheld one, another error it answered for the id,
// or, for an id it did not answer for, notAnswered (counted in
// unanswered, why saying why); an id it does not have is absent. They are
// asked in one get_drawers, one too large for the edge (or a gateway) in
// halves (inParts), or, when the primary refuses that (an older gateway,
// to a device that may not read every wing: gateway.CodeDenied;
// MemPalace before 3.11.0), one get_drawer each.
func (e *Edge) primaryDrawers(ctx context.Context, c *call, ids []string) (got map[string]json.RawMessage, unanswered int, why string) {
	got = map[string]json.RawMessage{}
	if !e.remote.Up() {
		return allNotAnswered(got, ids, e.remote.State())
	}
	asked := make([]any, len(ids))
	for i, id := range ids {
		asked[i] = id
	}
	parts, err := inParts(asked, func(half []any) (*mcp.CallToolResult, error) {
		pc, err := c.with(map[string]any{"drawer_ids": half})
		if err != nil {
			return nil, err
		}
		return e.askPrimary(ctx, pc, time.Now().Add(e.cfg.CallTimeout))
	})
	if _, denied := refused(err); denied && len(parts) == 0 {
		return e.primaryDrawersOneByOne(ctx, c, ids, got)
	}
	if len(parts) > 1 {
		e.log.Info("a get_drawers answer too large for the edge was read from the primary in parts", "ids", len(ids), "parts", len(parts))
	}
	done := 0
	for _, p := range parts {
		n, w := e.primaryPart(c, p, got)
		if done += len(p.ids); n > 0 {
			unanswered, why = unanswered+n, w
		}
	}
	if err != nil {
		_, n, w := allNotAnswered(got, ids[done:], whyUnanswered(nil, err))
		unanswered, why = unanswered+n, w
	}
	return got, unanswered, why
}

// notAnsweredOf is how many of ids got answers "not answered".
func notAnsweredOf(got map[string]json.RawMessage, ids []string) (n int) {
	for _, id := range ids {
		if strings.HasPrefix(gjson.GetBytes(got[id], "error").String(), notAnsweredPrefix) {
			n++
		}
	}
	return n
}

// allNotAnswered marks each of ids not answered (why) in got.
func allNotAnswered(got map[string]json.RawMessage, ids []string, why string) (map[string]json.RawMessage, int, string) {
	for _, id := range ids {
		got[id], _ = json.Marshal(map[string]any{"drawer_id": id, "error": notAnswered(id, why)})
	}
	return got, len(ids), why
}

// primaryPart puts the primary's answer for p's ids in got (see
// primaryDrawers): unanswered of them, why saying why.
func (e *Edge) primaryPart(c *call, p part, got map[string]json.RawMessage) (unanswered int, why string) {
	ids := make([]string, len(p.ids))
	for i, id := range p.ids {
		ids[i], _ = id.(string)
	}
	pt, ok := usable(p.res, p.err)
	if !ok {
		_, n, why := allNotAnswered(got, ids, whyUnanswered(p.res, p.err))
		return n, why
	}
	marked := gjson.Parse(e.marks().text(pt, c.tool.Records, origin.PalacePrimary))
	answered := map[string]bool{}
	for _, r := range marked.Get("results").Array() {
		id := r.Get("drawer_id").String()
		if answered[id] = true; !notFound(r.Get("error").String()) {
			got[id] = json.RawMessage(r.Raw)
		}
	}
	withheld := marked.Get("untrusted_withheld").Int() > 0
	for _, id := range ids {
		switch {
		case answered[id]:
		case withheld: // a gateway leaves a withheld drawer out, saying how many
			got[id], _ = json.Marshal(map[string]any{"drawer_id": id, "untrusted_withheld": 1,
				"error": "withheld: the primary left it out of its answer, as written by a device this device does not trust or of unknown origin (its untrusted setting is withhold)"})
		default:
			got[id], _ = json.Marshal(map[string]any{"drawer_id": id, "error": notAnswered(id, "its answer left it out")})
			unanswered, why = unanswered+1, "its answer left some ids out"
		}
	}
	return unanswered, why
}

// primaryDrawersOneByOne is primaryDrawers asking one get_drawer per id,
// each waiting out the read rate for the call timeout since the last
// answer; once one is not answered, the rest are not asked.
func (e *Edge) primaryDrawersOneByOne(ctx context.Context, c *call, ids []string, got map[string]json.RawMessage) (map[string]json.RawMessage, int, string) {
	for i, id := range ids {
		b, _ := json.Marshal(map[string]any{"drawer_id": id})
		one := newCall(&mcp.CallToolParams{Name: "mempalace_get_drawer", Arguments: json.RawMessage(b), Meta: c.params.Meta})
		res, err := e.askPrimary(ctx, one, time.Now().Add(e.cfg.CallTimeout))
		if _, denied := refused(err); denied {
			continue // not visible to this device: not found
		}
		t, ok := usable(res, err)
		msg := gjson.Get(t, "error").String()
		switch {
		case ok:
			got[id] = json.RawMessage(e.marks().text(t, one.tool.Records, origin.PalacePrimary))
		case notFound(msg):
		case strings.HasPrefix(msg, "withheld"): // a gateway's answer, saying by whom
			raw, _ := sjson.SetBytes([]byte(t), "drawer_id", id)
			got[id] = raw
		default:
			return allNotAnswered(got, ids[i:], whyUnanswered(res, err))
		}
	}
	return got, 0, ""
}

// localState is what a merged answer's edge.local says of a local palace
// that did not answer (err).
func localState(err error) string {
	switch {
	case errors.Is(err, errLocalBusy):
		return "busy"
	case errors.Is(err, errAnswerTooLarge):
		return "answer too large"
	}
	return "down"
}
