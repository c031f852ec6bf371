package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http/httptrace"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// canaryTolerance is how far two distances for one drawer may differ
// before the embedders are taken to differ (RFC 001 §7.4).
const canaryTolerance = 1e-3

// mergedRead asks both palaces in parallel (the latency is the slower
// side's, not the sum) and merges; with one side failing it answers from
// the other, marked degraded.
func (e *Edge) mergedRead(ctx context.Context, orig *call) (*mcp.CallToolResult, error) {
	// The answer's shape, as the catalogue names it for the gateway's
	// filter, says how the two sides merge.
	orig = diaryPinned(orig)
	shape, args := orig.tool.Filter, orig.argsMap()
	b := e.askBoth(ctx, orig, shape, args)
	mk, recs := e.marks(), orig.tool.Records
	if !b.lok || !b.pok {
		return e.oneSide(b, shape, args, recs, mk)
	}
	if shape == catalogue.FilterHits {
		mk.writtenHere = e.writtenHere(ctx)
	}
	mk.copies = e.ownCopies(ctx, b.lt, shape, mk.writtenHere)
	mk.copies = e.neverSent(ctx, b.lt, shape, catalogue.DiaryWingFor(args), mk.copies)
	if shape == catalogue.FilterHits {
		return textResult(e.mergeSearch(b.lt, b.pt, intArg(args, "limit", 5), mk), false, nil), nil
	}
	lm, pm := objectMap(mk.text(b.lt, recs, origin.PalaceLocal)), objectMap(mk.text(b.pt, recs, origin.PalacePrimary))
	var merged map[string]any
	switch shape {
	case catalogue.FilterMatches:
		merged = mergeDuplicates(lm, pm)
	case catalogue.FilterDiary:
		merged = mergeDiary(lm, pm, intArg(args, "last_n", 10), time.Local, mk)
	case catalogue.FilterDrawers:
		offset, limit := drawerWindow(args)
		merged = mergeDrawers(lm, pm, offset, limit, mk.copyID)
	default:
		merged = pm
	}
	return jsonResult(merged, false), nil
}

// diaryPinned is a diary_read without a wing pinned to the agent's diary
// wing, as a gateway pins it (its entries carry no wing, and the local
// palace's would be of every wing): both halves of the merged read ask
// the same (attack99 F8). Any other call is c.
func diaryPinned(c *call) *call {
	args := c.argsMap()
	if c.tool.Filter != catalogue.FilterDiary || args == nil {
		return c
	}
	if w, _ := args["wing"].(string); w != "" {
		return c
	}
	if a, _ := args["agent_name"].(string); a == "" {
		return c // refused as it is, by either palace
	}
	args = maps.Clone(args)
	args["wing"] = catalogue.DiaryWingFor(args)
	if p, err := c.with(args); err == nil {
		return p
	}
	return c // plain values: they encode
}

// sideAnswer is one palace's answer to a merged read.
type sideAnswer struct {
	res *mcp.CallToolResult
	err error
}

// bothSides is a merged read's two answers, and their texts where usable
// (lok, pok).
type bothSides struct {
	local, primary sideAnswer
	lt, pt         string
	lok, pok       bool
}

// askBoth asks the primary, then the local palace as soon as the
// primary's request is written (or has failed), so the local search does
// not compete with sending it; the local answer is needed only once the
// primary's is in. (Measured on two cores: the primary's answer comes
// 0.1-0.3 ms sooner than with both started at once; localHalf bounds
// the wait for it.) A local palace busy (localBusy) is asked only when
// the primary's answer is not usable, and one at a long job not at all.
// The primary's answer loses what this device deleted and what the agent
// did not ask for.
func (e *Edge) askBoth(ctx context.Context, orig *call, shape catalogue.Filter, args map[string]any) bothSides {
	askLocal := func(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
		if err := e.localBusy(false); err != nil {
			return nil, err // a mine sent since the check below (one sent between this check and the read's own send, microseconds, still has the read wait the timeout behind it)
		}
		return e.localServer.Call(ctx, c.params)
	}
	askPrimary := func(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
		return e.callPrimary(ctx, c, true)
	}
	if shape == catalogue.FilterDrawers {
		// Page the union: both sides from the start, up to the end of the
		// requested page (mergedpage.go).
		askLocal, askPrimary = drawersUpTo(askLocal), drawersUpTo(askPrimary)
	}
	busy := e.localBusy(true)
	lc := make(chan sideAnswer, 1)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	var asked time.Time
	startLocal := sync.OnceFunc(func() {
		asked = time.Now()
		go func() {
			r, err := askLocal(lctx, orig)
			lc <- sideAnswer{r, err}
		}()
	})
	pctx := ctx
	if busy == nil {
		pctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { startLocal() }})
	}
	var b bothSides
	b.primary.res, b.primary.err = e.primaryPage(pctx, orig, shape, args, askPrimary) // tombstone.go
	b.primary.res = duplicateFlag(shape, b.primary.res)
	b.pt, b.pok = usable(b.primary.res, b.primary.err)
	if busy != nil && b.pok {
		b.local.err = busy
		return b
	}
	startLocal()
	b.local = e.localHalf(lc, lcancel, b.pok, asked)
	b.lt, b.lok = usable(b.local.res, b.local.err)
	return b
}

// localHalf is the local palace's answer to a read sent to it at asked.
// With another answer to be had (fallback: the primary's), the local
// palace has the call timeout to answer: mempalace-mcp answers one call
// at a time, and one busy (a mine takes minutes) must not hold up what
// the primary answers; past it, its call is cancelled (the call returns
// at once: its answer, if it comes, is dropped). Without one, the local
// answer is the only answer, waited for while the local palace is at it,
// but given up likewise once it has waited the call timeout behind a call
// sent before it (localBusySince): a slow call with the primary down is
// answered "busy", not after it (a mine, known to be long, is not waited
// for at all: localBusy).
func (e *Edge) localHalf(lc <-chan sideAnswer, cancel context.CancelFunc, fallback bool, asked time.Time) sideAnswer {
	t := time.NewTicker(e.cfg.CallTimeout)
	defer t.Stop()
	for {
		select {
		case a := <-lc:
			return a
		case <-t.C:
		}
		if fallback || e.localBusySince(asked) {
			break
		}
	}
	cancel()
	a := <-lc // the call, cancelled, returns
	if a.err != nil {
		a.err = fmt.Errorf("%w: no answer within %s (%w)", errLocalBusy, e.cfg.CallTimeout, a.err)
	}
	return a
}

// localRead asks the local palace a read as a merged read does
// (localHalf), not at all while it is busy (localBusy). errLocalBusy: it
// did not answer.
func (e *Edge) localRead(ctx context.Context, c *call, fallback bool) (*mcp.CallToolResult, error) {
	if err := e.localBusy(fallback); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lc := make(chan sideAnswer, 1)
	asked := time.Now()
	go func() {
		r, err := e.localServer.Call(lctx, c.params)
		lc <- sideAnswer{r, err}
	}()
	a := e.localHalf(lc, cancel, fallback, asked)
	return a.res, a.err
}

// busyAndPrimaryDown answers a read neither palace answered: the local
// palace busy or down (err), the primary failing (why).
func busyAndPrimaryDown(err error, why string) *mcp.CallToolResult {
	return errorResult(fmt.Sprintf("%v, and the primary did not answer either (%s)", err, why), map[string]any{"local": localState(err), "primary": why})
}

// errLocalBusy: the local palace did not answer a read in time, or was not
// asked (localBusy).
var errLocalBusy = errors.New("the local palace is busy")

// localBusy is why a read does not ask the local palace now (nil: it is
// asked), which answers one call at a time, in order, so a read sent to it
// would wait behind the call it is at. It is at a long job the edge sent
// it (catalogue LongJob: a mine takes minutes, and the first read during
// it waited the whole call timeout before), or, when the primary answers
// instead (fallback), it has been at one call for longer than the call
// timeout with no answer since (childConn.busySince; each read waited the
// timeout before). Either holds until it answers again. Writes still go
// to it and wait.
func (e *Edge) localBusy(fallback bool) error {
	conn := e.liveChild()
	if conn == nil {
		return nil
	}
	if job := conn.longJob(); job != "" {
		return fmt.Errorf("%w %s (a job of minutes: it answers one call at a time), so it was not asked", errLocalBusy, job)
	}
	if fallback && conn.busySince(time.Now().Add(-e.cfg.CallTimeout)) {
		return fmt.Errorf("%w: at one call for over %s with no answer, so it was not asked", errLocalBusy, e.cfg.CallTimeout)
	}
	return nil
}

// localBusySince reports a local palace at a call sent before t, with no
// answer since (childConn.busySince).
func (e *Edge) localBusySince(t time.Time) bool {
	conn := e.liveChild()
	return conn != nil && conn.busySince(t)
}

// liveChild is the local palace's connection (nil: a test's local palace,
// or none running).
func (e *Edge) liveChild() *childConn {
	if e.child == nil {
		return nil
	}
	return e.child.live()
}

// oneSide answers a merged read one side of which is not usable: from
// the other, marked degraded (not degraded for a devbox new to the fleet,
// with nothing here to merge), or, with neither usable, an error saying
// so of a busy local palace, else the local answer as it came.
func (e *Edge) oneSide(b bothSides, shape catalogue.Filter, args map[string]any, recs catalogue.Records, mk marks) (*mcp.CallToolResult, error) {
	lo, perr := b.local, b.primary.err
	pwhy := "unusable answer"
	if perr != nil {
		pwhy = perr.Error()
	} else if b.pt != "" {
		pwhy = gjson.Get(b.pt, "error").String()
	}
	switch {
	case b.lok:
		degraded := true
		if pwhy == chromaMissing { // a primary no device has filed a drawer on yet: nothing there to merge
			pwhy, degraded = primaryNoDrawers, false
		}
		return annotate(mk.result(requestedPage(shape, lo.res, args), recs, origin.PalaceLocal), map[string]any{"local": "ok", "primary": pwhy}, degraded), nil
	case b.pok:
		why, degraded := "unusable answer", true
		switch {
		case lo.err != nil:
			why = lo.err.Error()
		case e.localEmpty():
			why, degraded = noDrawersYet, false // a devbox new to the fleet: nothing here to merge
		case b.lt != "":
			why = gjson.Get(b.lt, "error").String()
		}
		return annotate(mk.result(requestedPage(shape, b.primary.res, args), recs, origin.PalacePrimary), map[string]any{"local": why, "primary": "ok"}, degraded), nil
	case errors.Is(lo.err, errLocalBusy):
		return busyAndPrimaryDown(lo.err, pwhy), nil
	case lo.err == nil && e.localEmpty():
		// A devbox new to the fleet: its palace's errors mean "nothing
		// here". The primary's own refusal is the answer; a primary that
		// could not answer, or cannot open its drawers either (a fleet new
		// to memory after a search there), leaves the empty answer,
		// degraded.
		if rpcErr := peerError(perr); rpcErr != nil {
			return nil, rpcErr
		}
		if perr == nil && pwhy == chromaMissing { // a fleet new to memory: neither palace holds a drawer
			return annotate(jsonResult(emptyAnswer(shape, args), false), map[string]any{"local": noDrawersYet, "primary": primaryNoDrawers}, false), nil
		}
		if perr == nil && b.primary.res != nil && !unopened(pwhy) {
			return b.primary.res, nil
		}
		why := e.remote.State()
		if perr != nil || b.primary.res != nil {
			why = pwhy // a primary that cannot open its drawers either (unopened): its words, not its advice
		}
		return annotate(jsonResult(emptyAnswer(shape, args), false), map[string]any{"local": noDrawersYet, "primary": why}, true), nil
	}
	return localAnswer(lo.res, lo.err) // neither usable: the local answer as it came
}

// usable is a side's answer when it can be merged: a JSON object text, not
// an error result, without an "error" key. Otherwise the text (if any) is
// returned for its error message.
func usable(res *mcp.CallToolResult, err error) (string, bool) {
	if err != nil || res == nil {
		return "", false
	}
	t, ok := objectText(res)
	if !ok || res.IsError || gjson.Get(t, "error").Exists() {
		return t, false
	}
	return t, true
}

func intArg(m map[string]any, k string, def int) int {
	switch v := m[k].(type) {
	case float64:
		return int(v)
	case string:
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil {
			return n
		}
	}
	return def
}

// hit is one search hit, read in one pass: its bytes as they came, its
// identity (drawer_id, or for 3.6.0 hits without one, wing + room +
// sha256(text)), its distance (BM25-only hits have none and sort last),
// the text its distance is of, its own origin member (a gateway's) and the
// palace that returned it.
type hit struct {
	raw     string
	key     string
	dist    float64
	hasDist bool
	chunk   string // the matched chunk's text; "" when the text is not that chunk's (a closet-hydrated passage)
	origin  string // the origin member's JSON ("" when absent)
	palace  string
}

func readHit(h gjson.Result) hit {
	x := hit{raw: h.Raw, dist: math.Inf(1)}
	var id, text, wing, room, via string
	h.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "drawer_id":
			if v.Type == gjson.String {
				id = v.Str
			}
		case "distance":
			if v.Type == gjson.Number {
				x.dist, x.hasDist = v.Num, true
			}
		case "text":
			text = v.String()
		case "wing":
			wing = v.String()
		case "room":
			room = v.String()
		case "matched_via":
			via = v.String()
		case origin.Key:
			x.origin = v.Raw
		}
		return true
	})
	x.key = id
	if via == "" || via == "drawer" {
		// MemPalace sets matched_via "drawer+closet" where it replaced the
		// text with the passage around the drawer's best chunk: its distance
		// is still the matched chunk's, which that text may not be.
		x.chunk = text
	}
	if id == "" {
		sum := sha256.Sum256([]byte(text))
		x.key = wing + "\x00" + room + "\x00" + hex.EncodeToString(sum[:])
	}
	return x
}

func readHits(results gjson.Result) []hit {
	var out []hit
	results.ForEach(func(_, h gjson.Result) bool {
		if h.IsObject() {
			out = append(out, readHit(h))
		}
		return true
	})
	return out
}

// mergeSearch merges two search answers (JSON object texts) without
// decoding them: hits are read with gjson and spliced back as they came,
// each with its origin (marks). The envelope is the primary's. A diary
// entry held by both palaces under two ids is one hit (pairEntries).
func (e *Edge) mergeSearch(lt, pt string, limit int, mk marks) []byte {
	lh, ph := readHits(gjson.Get(lt, "results")), readHits(gjson.Get(pt, "results"))
	here := mk.writtenHereOnPrimary()
	ph = slices.DeleteFunc(ph, func(h hit) bool { return here[h.key] }) // not this device's text: the local hit, if any, stands
	copyIDs := map[string]bool{}
	for _, h := range lh {
		if c, known := mk.ownCopy(h.key); known && c.ID != "" {
			copyIDs[c.ID] = true
		}
	}
	pairEntries(lh, func(h hit) bool { _, known := mk.ownCopy(h.key); return !known })
	pairEntries(ph, func(h hit) bool { return !copyIDs[h.key] && mk.pairs(gjson.Get(h.origin, "device").String()) })
	for i, h := range lh {
		if c, known := mk.ownCopy(h.key); known && c.ID != "" {
			lh[i].key = c.ID // one hit with its copy's
		}
	}
	// Embedder canary: one chunk on both sides (one drawer, one text) at
	// different distances means different embedding models; comparing
	// their distances would be silent garbage, so only the primary's
	// ranking is returned.
	detail, agreed := canary(lh, ph)
	if agreed != nil {
		e.embedderAgrees(agreed)
	}
	if detail != "" {
		return e.primaryRanking(pt, ph, mk, detail)
	}
	seen := make(map[string]int, len(lh)+len(ph))
	all := make([]hit, 0, len(lh)+len(ph))
	add := func(hits []hit, palace string) {
		for _, h := range hits {
			if i, ok := seen[h.key]; ok {
				// Another hit of a drawer this side returned (a chunk
				// repeated) is that one; one the local side returned, with
				// its text or a closet passage, is both.
				if all[i].palace != palace && (all[i].chunk == "" || h.chunk == "" || all[i].chunk == h.chunk) { // else the local text is this palace's alone (origins.go's both)
					all[i].palace, all[i].origin = origin.PalaceBoth, h.origin // the primary's origin
				}
				continue
			}
			seen[h.key] = len(all)
			h.palace = palace
			all = append(all, h)
		}
	}
	add(lh, origin.PalaceLocal)
	add(ph, origin.PalacePrimary)
	sort.SliceStable(all, func(i, j int) bool { return all[i].dist < all[j].dist })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	out := spliceHits(pt, all, mk)
	out, _ = sjson.SetRawBytes(out, "edge", []byte(`{"merged":true,"local":"ok","primary":"ok"}`)) // out is the primary's object text: it takes a member
	return out
}

// primaryRanking is a search answered with the primary's hits alone, as
// the embedder canary found the palaces' embedders differ (detail).
func (e *Edge) primaryRanking(pt string, ph []hit, mk marks, detail string) []byte {
	e.embedderMismatch(detail)
	for j := range ph {
		ph[j].palace = origin.PalacePrimary
	}
	edge, _ := json.Marshal(map[string]any{"merged": false, "embedder_mismatch": true, "detail": detail, "local": "ok", "primary": "ok"}) // plain values: they encode
	out := spliceHits(pt, ph, mk)
	out, _ = sjson.SetRawBytes(out, "edge", edge)           // out is the primary's object text: it takes a member
	out, _ = sjson.SetBytes(out, "embedder_mismatch", true) // as above
	return out
}

// pairEntries keys one side's diary entry hits as diary_read pairs
// entries (mergeDiary) whose copy the outbox does not name (marks.copies:
// a hit it names is keyed by its copy's id): a replicated entry has
// another id on the primary (its timestamp is when it was written there),
// but the same wing and text, which the id's suffix is of. The n-th
// newest hit of a wing and suffix on one side is keyed as the n-th newest
// on the other, so the pair merges as one hit, palace both, under the
// local id. Only the hits that may pair (marks.pairs: not another
// device's copy, nor a copy the outbox names) are keyed so.
func pairEntries(hits []hit, mayPair func(hit) bool) {
	type entry struct {
		i     int
		stamp string
	}
	groups := map[string][]entry{}
	for i, h := range hits {
		if stamp, suffix, ok := catalogue.DiaryEntryID(h.key); ok && mayPair(h) {
			g := h.key[:len(h.key)-len(stamp)-len(suffix)-2] + "\x00" + suffix
			groups[g] = append(groups[g], entry{i, stamp})
		}
	}
	for g, es := range groups {
		sort.SliceStable(es, func(a, b int) bool { return es[a].stamp > es[b].stamp })
		for n, en := range es {
			hits[en.i].key = fmt.Sprintf("%s\x00%d", g, n)
		}
	}
}

// spliceHits replaces the envelope's results with hits, each with its
// origin (marks: written first in the hit, or set over the one it had).
func spliceHits(envelope string, hits []hit, mk marks) []byte {
	arr := make([]byte, 0, len(envelope))
	arr = append(arr, '[')
	for i, h := range hits {
		if i > 0 {
			arr = append(arr, ',')
		}
		o := mk.local(h.raw)
		if h.palace != origin.PalaceLocal {
			o = mk.primary(h.origin, h.palace)
		}
		body := strings.TrimSpace(h.raw[1:])
		switch {
		case h.origin != "" || gjson.Get(h.raw, origin.Key).Exists():
			tagged, err := sjson.SetRaw(h.raw, origin.Key, string(o))
			if err != nil {
				tagged = h.raw
			}
			arr = append(arr, tagged...)
		case body == "}":
			arr = append(append(append(arr, `{"origin":`...), o...), '}')
		default:
			arr = append(append(append(arr, `{"origin":`...), o...), ',')
			arr = append(arr, body...)
		}
	}
	arr = append(arr, ']')
	out, err := sjson.SetRawBytes([]byte(envelope), "results", arr)
	if err != nil {
		return []byte(envelope)
	}
	return out
}

// canary compares the distances of the chunks both palaces returned: a
// hit of one drawer with one text on each side. A pair with different
// texts (this device's update not on the primary yet, another device's
// there and not here, two chunks of one drawer) says nothing about the
// embedders. mismatch is the first pair whose distances differ ("" none),
// agreed the primary's hit of the first pair whose distances agree (nil
// none).
func canary(lh, ph []hit) (mismatch string, agreed *hit) {
	local := make(map[[2]string]float64, len(lh))
	for _, h := range lh {
		if h.hasDist && h.chunk != "" {
			local[[2]string{h.key, h.chunk}] = h.dist
		}
	}
	for i, h := range ph {
		d, ok := local[[2]string{h.key, h.chunk}]
		switch {
		case !ok || !h.hasDist || h.chunk == "":
		case math.Abs(d-h.dist) > canaryTolerance:
			return fmt.Sprintf("drawer %s, same text on both sides: local distance %.4f, primary %.4f", h.key, d, h.dist), nil
		case agreed == nil:
			agreed = &ph[i]
		}
	}
	return "", agreed
}

// embedderMismatch records a mismatch the canary saw (the first one
// since the last cleared), in the outbox for edge status and doctor.
func (e *Edge) embedderMismatch(detail string) {
	e.mu.Lock()
	first := e.mismatch == ""
	if first {
		e.mismatch = detail
	}
	e.mu.Unlock()
	if first {
		e.log.Error("embedder mismatch between the local palace and the primary: merged search is off, only the primary's results are returned", "detail", detail)
		e.recordMismatch(detail)
	}
}

// embedderAgrees clears a recorded mismatch: the canary saw one chunk (the
// primary's hit h) at the same distance on both sides, and no chunk at two.
func (e *Edge) embedderAgrees(h *hit) {
	e.mu.Lock()
	was := e.mismatch
	e.mismatch = ""
	e.mu.Unlock()
	if was != "" {
		e.log.Info("embedder mismatch cleared: distances agree again", "drawer", h.key, "distance", h.dist, "was", was)
		e.recordMismatch("")
	}
}

// recordMismatch stores the canary's record ("" none) for edge status
// and doctor.
func (e *Edge) recordMismatch(detail string) {
	if e.outbox == nil {
		return
	}
	if err := e.outbox.SetMeta(context.Background(), metaEmbedderMismatch, detail); err != nil {
		e.log.Warn("the embedder canary's record not updated in the outbox (edge status and doctor show the one before)", "err", err)
	}
}

// metaEmbedderMismatch is the outbox meta key of the canary's record.
const metaEmbedderMismatch = "embedder_mismatch"

// keyed is a record of a merged list and its id.
type keyed struct {
	id  string
	rec map[string]any
}

// union is the object records of both sides' lists at list, local first,
// one per id member: a record both returned is kept once (both). onPrimary
// (nil: none) is the id a local record's copy has on the primary where it
// is another (a diary entry's: outbox.EntryCopies): the two are one
// record, under the local id.
func union(lm, pm map[string]any, list, id string, onPrimary func(string) string) []keyed {
	seen := map[string]int{}
	var all []keyed
	for s, side := range []map[string]any{lm, pm} {
		xs, _ := side[list].([]any)
		for _, x := range xs {
			r, ok := x.(map[string]any)
			if !ok {
				continue
			}
			k := fmt.Sprint(r[id])
			if s == 0 && onPrimary != nil {
				if c := onPrimary(k); c != "" {
					seen[c] = len(all) // its copy's record is this one's
				}
			}
			if i, dup := seen[k]; dup {
				all[i].rec = both(all[i].rec, r)
				continue
			}
			seen[k] = len(all)
			all = append(all, keyed{k, r})
		}
	}
	return all
}

// records is the list of a page of merged records.
func records(page []keyed) []any {
	out := make([]any, len(page))
	for i, k := range page {
		out[i] = k.rec
	}
	return out
}

func mergeDuplicates(lm, pm map[string]any) map[string]any {
	all := union(lm, pm, "matches", "id", nil)
	sort.SliceStable(all, func(i, j int) bool { return num(all[i].rec["similarity"]) > num(all[j].rec["similarity"]) })
	all = all[:min(len(all), 5)]
	out := maps.Clone(pm) // the primary's envelope: a gateway's filtered and untrusted_withheld
	out["is_duplicate"], out["matches"] = len(all) > 0, records(all)
	out["edge"] = map[string]any{"merged": true, "local": "ok", "primary": "ok"}
	return out
}

// duplicateFlag is a check_duplicate answer whose is_duplicate says what
// its matches say (as MemPalace and the gateway compute it): a match the
// tombstones hid leaves no duplicate behind. Any other answer is as it
// came.
func duplicateFlag(shape catalogue.Filter, res *mcp.CallToolResult) *mcp.CallToolResult {
	text, ok := objectText(res)
	if shape != catalogue.FilterMatches || !ok || res.IsError {
		return res
	}
	flag, matches := gjson.Get(text, "is_duplicate"), gjson.Get(text, "matches")
	if !matches.IsArray() || flag.Type != gjson.True && flag.Type != gjson.False || flag.Bool() == (len(matches.Array()) > 0) {
		return res
	}
	out, err := sjson.SetBytes([]byte(text), "is_duplicate", !flag.Bool())
	if err != nil {
		return res
	}
	return textResult(out, false, res.Meta)
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// mergeDiary: the union of the two sides as multisets of (topic, text),
// newest first by entryTime (local is the zone of a timestamp without an
// offset), cut to last_n. Text repeats ("standup: nothing new" on Monday
// and on Tuesday is two entries), and a replicated entry has a different
// timestamp on the primary (it was written there when it was sent), so
// for each (topic, text) the merge keeps max(local count, primary count)
// entries: the local ones, newest first, paired with the primary's, newest
// first (each pair one entry, palace both), and the longer side's rest.
// A primary entry another device wrote (marks.pairs) pairs with none.
func mergeDiary(lm, pm map[string]any, lastN int, local *time.Location, mk marks) map[string]any {
	all := pairDiary(groupDiary(lm, pm, local, mk))
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
	if lastN > 0 && len(all) > lastN {
		all = all[:lastN]
	}
	res := make([]any, len(all))
	for i, h := range all {
		res[i] = h.entry
	}
	out := maps.Clone(pm)
	if out["agent"] == nil {
		out["agent"] = lm["agent"]
	}
	delete(out, "message")
	out["entries"], out["showing"] = res, len(res)
	out["total"] = max(num(lm["total"]), num(pm["total"]), float64(len(all)))
	out["edge"] = map[string]any{"merged": true, "local": "ok", "primary": "ok"}
	return out
}

// datedEntry is a diary entry and the instant it was written.
type datedEntry struct {
	entry map[string]any
	at    time.Time
}

// diaryGroup is the entries of one (topic, text): the local palace's,
// then the primary's.
type diaryGroup struct{ sides [2][]datedEntry }

// groupDiary is the two sides' entries grouped by (topic, text), in the
// order each was first seen; a primary entry another device wrote
// (marks.pairs) is grouped by its device too, with no local entry. A
// local entry whose copy the outbox names (marks.copies) is grouped with
// that copy alone (the primary entry of its timestamp), or with none.
func groupDiary(lm, pm map[string]any, local *time.Location, mk marks) []*diaryGroup {
	groups := map[string]*diaryGroup{}
	var order []*diaryGroup
	for s, side := range []map[string]any{lm, pm} {
		es, _ := side["entries"].([]any)
		for _, x := range es {
			h, ok := x.(map[string]any)
			if !ok {
				continue
			}
			ts, _ := h["timestamp"].(string)
			k := fmt.Sprint(h["topic"], "\x00", h["content"], "\x00", diaryPairing(h, s == 0, mk))
			g := groups[k]
			if g == nil {
				g = &diaryGroup{}
				groups[k] = g
				order = append(order, g)
			}
			g.sides[s] = append(g.sides[s], datedEntry{h, entryTime(ts, local)})
		}
	}
	return order
}

// diaryPairing is what a diary entry h (a local one, or the primary's)
// pairs by beside its topic and text: a local entry whose copy the outbox
// names, and that copy, by the copy's timestamp; a local entry whose
// write has not reached the primary (unsent, or never sent) by its own,
// which no primary entry has; a primary entry another device wrote by that device; any other
// by nothing more (paired newest first, pairDiary).
func diaryPairing(h map[string]any, local bool, mk marks) string {
	ts, _ := h["timestamp"].(string)
	if local {
		switch c, known := mk.copies[entryStamp(ts)]; {
		case known && c.ID == "":
			return "not sent\x00" + ts
		case known && c.Timestamp != "":
			return "copy\x00" + c.Timestamp
		}
		return ""
	}
	if mk.copied(ts) {
		return "copy\x00" + ts
	}
	if o, _ := h[origin.Key].(map[string]any); o != nil {
		if dev, _ := o["device"].(string); !mk.pairs(dev) {
			return dev
		}
	}
	return ""
}

// entryStamp is the stamp of the id MemPalace gives a diary entry written
// at ts (its timestamp, the entry's filed_at: "20060102_150405" and the
// microseconds of the same wall clock); "" when ts does not parse.
func entryStamp(ts string) string {
	t := entryTime(ts, time.UTC)
	if t.IsZero() {
		return ""
	}
	return t.Format("20060102_150405") + fmt.Sprintf("%06d", t.Nanosecond()/1000)
}

// pairDiary is each group's entries, newest first on each side, paired
// local with primary (each pair one entry, palace both), then the longer
// side's rest.
func pairDiary(groups []*diaryGroup) []datedEntry {
	var all []datedEntry
	for _, g := range groups {
		for s := range g.sides {
			sort.SliceStable(g.sides[s], func(i, j int) bool { return g.sides[s][i].at.After(g.sides[s][j].at) })
		}
		l, p := g.sides[0], g.sides[1]
		for i := range max(len(l), len(p)) {
			switch {
			case i >= len(l):
				all = append(all, p[i])
			case i >= len(p):
				all = append(all, l[i])
			default:
				all = append(all, datedEntry{both(l[i].entry, p[i].entry), l[i].at})
			}
		}
	}
	return all
}

// entryTime is the instant a diary entry was written. MemPalace 3.12
// writes its timestamps with a UTC offset (or Z), read as they say; 3.11
// writes datetime.now() without one, the local time of the machine that
// wrote it, read in local (the edge's own zone: the local palace's
// machine, and for a 3.11 primary the assumption that the fleet keeps one
// zone). A timestamp that does not parse is the oldest.
func entryTime(ts string, local *time.Location) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		return t
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, ts, local); err == nil {
			return t
		}
	}
	return time.Time{}
}

// ownCopies is the copy on the primary of each diary entry of the local
// answer lt (a search's hits, by their ids; a diary_read's entries, by
// their timestamps), and of each diary entry of here (writtenHere, which
// a search's primary hits of drop), that the outbox knows
// (outbox.EntryCopies), by the stamp of the entry's id: the entry pairs
// with that copy alone. nil without an outbox, or when it cannot say
// (logged): every entry pairs by text then. No call to the primary.
func (e *Edge) ownCopies(ctx context.Context, lt string, shape catalogue.Filter, here map[string]bool) map[string]outbox.EntryCopy {
	var stamps []string
	for id := range here {
		if stamp, _, ok := catalogue.DiaryEntryID(id); ok {
			stamps = append(stamps, stamp)
		}
	}
	switch {
	case e.outbox == nil:
		return nil
	case shape == catalogue.FilterHits:
		gjson.Get(lt, "results.#.drawer_id").ForEach(func(_, v gjson.Result) bool {
			if stamp, _, ok := catalogue.DiaryEntryID(v.String()); ok {
				stamps = append(stamps, stamp)
			}
			return true
		})
	case shape == catalogue.FilterDrawers:
		gjson.Get(lt, "drawers.#.drawer_id").ForEach(func(_, v gjson.Result) bool {
			if stamp, _, ok := catalogue.DiaryEntryID(v.String()); ok {
				stamps = append(stamps, stamp)
			}
			return true
		})
	case shape == catalogue.FilterDiary:
		gjson.Get(lt, "entries.#.timestamp").ForEach(func(_, v gjson.Result) bool {
			if stamp := entryStamp(v.String()); stamp != "" {
				stamps = append(stamps, stamp)
			}
			return true
		})
	}
	copies, err := e.outbox.EntryCopies(ctx, stamps)
	if err != nil {
		e.log.Warn("the outbox did not say which copies on the primary are this device's diary entries': they pair by text", "err", err)
	}
	return copies
}

// neverSent is copies with each diary entry of the local answer lt (a
// diary_read's of wing, a search's hits, list_drawers' drawers) that no
// write of the outbox may have carried to the primary (outbox.NeverSent)
// added with its copy: none, so it pairs with no primary entry of its
// text, which is another palace's (attack99 F5), or the one a join sent
// (attack102 F2). copies as they came without an outbox, or when it
// cannot say (logged).
func (e *Edge) neverSent(ctx context.Context, lt string, shape catalogue.Filter, wing string, copies map[string]outbox.EntryCopy) map[string]outbox.EntryCopy {
	var ens []outbox.LocalEntry
	add := func(stamp, wing, suffix string) {
		if _, known := copies[stamp]; !known {
			t, _ := time.ParseInLocation("20060102_150405.000000", stamp[:15]+"."+stamp[15:], time.Local) // the local palace's clock
			ens = append(ens, outbox.LocalEntry{Stamp: stamp, Wing: wing, Suffix: suffix, Written: t})
		}
	}
	switch list := map[catalogue.Filter]string{catalogue.FilterHits: "results", catalogue.FilterDrawers: "drawers"}[shape]; {
	case e.outbox == nil:
		return copies
	case list != "":
		gjson.Get(lt, list).ForEach(func(_, h gjson.Result) bool {
			if stamp, suffix, ok := catalogue.DiaryEntryID(h.Get("drawer_id").String()); ok {
				add(stamp, h.Get("wing").String(), suffix)
			}
			return true
		})
	case shape == catalogue.FilterDiary:
		gjson.Get(lt, "entries").ForEach(func(_, en gjson.Result) bool {
			if stamp := entryStamp(en.Get("timestamp").String()); stamp != "" {
				add(stamp, wing, catalogue.EntrySuffix(en.Get("content").String()))
			}
			return true
		})
	}
	never, err := e.outbox.NeverSent(ctx, ens)
	if err != nil {
		e.log.Warn("the outbox did not say which diary entries no write sent, or which a join sent: they pair by text", "err", err)
	}
	if len(never) == 0 {
		return copies
	}
	out := maps.Clone(copies)
	if out == nil {
		out = map[string]outbox.EntryCopy{}
	}
	maps.Copy(out, never)
	return out
}

// writtenHere is the drawers this device's writes not on the primary
// name (outbox.WrittenHere): nil without an outbox, or when it cannot
// say (logged: the primary's hits of them are then merged as they come).
func (e *Edge) writtenHere(ctx context.Context) map[string]bool {
	if e.outbox == nil {
		return nil
	}
	here, err := e.outbox.WrittenHere(ctx)
	if err != nil {
		e.log.Warn("the outbox did not say which drawers this device's unsent writes name: a search may show the primary's older text of one", "err", err)
	}
	return here
}
