package edge

// What the agent owes, told without a tool call (issue 28; RFC 003 §3.5):
// the edge keeps a view of the agent's owed asks, refreshed in the
// background every MailboxPoll (the five-minute floor), and
//
//   - answers initialize with MCP server instructions summarizing it (the
//     count and the first few asks, one line each, from trusted senders
//     only; none when nothing is owed), from the view it has: never
//     waiting on the primary longer than WakeWait, except that a view
//     read before this process (the kept one, below) waits up to
//     wakeTrustWait to hear the device's trusted set as the gateway
//     says it now, and shows only the asks whose senders it still
//     trusts (as last heard, kept across runs: device.go, so a
//     revocation holds with the gateway down);
//   - tells a running session of an ask that arrived since: a
//     notifications/resources/updated for mempalace://mailbox when the
//     client subscribed to it, else a one-line note on the next tool
//     answer (of the asks whose senders it trusts then).
//
// The view is kept in the outbox's meta too, one per agent identity (two
// harnesses on one devbox share its palace), so the next session starts
// from it (as of when it was read) when the primary is slow or down; a
// reply the agent makes through the edge takes the asks it clears out of
// it at once (answered), so the next session is not told them again.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
)

// The summary's bounds.
const (
	wakeShown    = 5    // asks listed, one line each
	wakeLineMax  = 160  // bytes of one ask's line as shown, its "- " and "…" included
	wakeMaxBytes = 2048 // of the whole summary
	wakeMetaKey  = "wake_owed"
	// wakeTrustWait bounds how long after the edge starts an initialize
	// answered from a view read before it waits to hear the gateway's
	// device header (its trusted set now); a primary known down is not
	// waited on.
	wakeTrustWait = time.Second
)

// owedAsk is one owed ask as the summary shows it.
type owedAsk struct {
	ID   string `json:"id"`
	Line string `json:"line"`
	// From is the sender's device, as its origin names it ("": the event
	// carried none); the trusted set is applied to it again at each
	// session start.
	From string `json:"from,omitempty"`
	// Via is the admin device whose join attributed it to From ("": none),
	// trusted with it.
	Via string `json:"via,omitempty"`
	// Corr is its correlation id ("": none), Stream its stream and Sender
	// its from_agent: a reply to Sender on Corr in Stream clears it
	// (answered), a reply to anyone else, or on another stream, does not.
	Corr   string `json:"corr,omitempty"`
	Stream string `json:"stream,omitempty"`
	Sender string `json:"sender,omitempty"`
}

// owedView is the agent's owed asks from trusted senders, oldest first, as
// of At.
type owedView struct {
	At   time.Time `json:"at"`
	Asks []owedAsk `json:"asks"`
}

// wake is the edge's view and what the session has been told of it.
type wake struct {
	mu         sync.Mutex
	view       owedView
	told       map[string]bool // ask ids the session was told of
	note       []owedAsk       // told on the next tool answer (none: nothing to tell)
	subscribed bool            // the client subscribed to the mailbox resource
	started    bool            // the session started (told the view at initialize)
	read       bool            // this process has read the log (else the view is an earlier session's)
	failed     bool            // this process's last read of the log failed (the view, if any, is older)
	first      chan struct{}   // closed once this process's first read ended
	deadline   time.Time       // initialize waits for first until then (the edge's start + WakeWait)
	trustBy    time.Time       // and for the device header until then (the edge's start + Config.trustWait)
	// replies are the agent's replies the edge took since the last read
	// of the log that succeeded began (refreshOwed, one at a time): that
	// read, and the one out now, may not count them (sent after it read
	// the agent's replies, not yet queued when it began), nor the view
	// kept (its keepView not done yet), so they are applied to each
	// again.
	replies []map[string]any
	// keep orders the writes of the view kept (keepView): the last one
	// writes the view as it is then, never an older one.
	keep sync.Mutex
}

// newWake is a wake whose initialize waits up to wait for the first read,
// trustWait (0: wakeTrustWait) for the device header.
func newWake(wait, trustWait time.Duration) *wake {
	now := time.Now()
	return &wake{told: map[string]bool{}, first: make(chan struct{}), deadline: now.Add(wait), trustBy: now.Add(cmp.Or(trustWait, wakeTrustWait))}
}

// watchOwed keeps the view (loadOwed gave it the kept one): a read now
// and every MailboxPoll, until ctx ends.
func (e *Edge) watchOwed(ctx context.Context) {
	fctx, done := e.firstReadCtx(ctx)
	e.refreshOwed(fctx)
	done()
	close(e.wk.first)
	t := time.NewTicker(e.cfg.MailboxPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.refreshOwed(ctx)
		}
	}
}

// wakeFinish bounds how long the first read of the owed asks, once out,
// may outlive the session: one that ends right after initialize (a
// harness probing its servers) still keeps a fresh view for the next.
const wakeFinish = 2 * time.Second

// firstReadCtx is ctx for the first read, which does not end with the
// session (ctx) but wakeFinish later, or at a signal (the container's
// stop has its own grace).
func (e *Edge) firstReadCtx(ctx context.Context) (context.Context, func()) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(min(wakeFinish, e.cfg.CallTimeout))
		defer t.Stop()
		select {
		case <-fctx.Done():
		case <-t.C:
			cancel()
		}
	})
	halt := func() bool { return false }
	if e.halt != nil {
		halt = context.AfterFunc(e.halt, cancel)
	}
	return fctx, func() { stop(); halt(); cancel() }
}

// loadOwed starts from the view an earlier session kept.
func (e *Edge) loadOwed(ctx context.Context) {
	if v, ok := e.readKept(ctx); ok {
		e.wk.mu.Lock()
		e.wk.view = v // before watchOwed's first read: start runs this first
		e.wk.mu.Unlock()
	}
}

// readKept is the view kept in the outbox (ok false: none, or unreadable).
func (e *Edge) readKept(ctx context.Context) (owedView, bool) {
	var v owedView
	if e.outbox == nil {
		return v, false
	}
	s, err := e.outbox.Meta(ctx, e.wakeKey())
	if err != nil || s == "" || json.Unmarshal([]byte(s), &v) != nil {
		return v, false // none kept (or unreadable): the first read makes one
	}
	return v, true
}

// refreshOwed reads the owed set, keeps the trusted asks as the view and
// tells the session of those it was not told of yet. It reads every owed
// ask (no limit): the trusted ones may come after any number of others.
func (e *Edge) refreshOwed(ctx context.Context) {
	e.wk.mu.Lock()
	counted := len(e.wk.replies) // those taken before are on the primary or queued: the read counts them
	e.wk.mu.Unlock()
	replies := e.outboxReplies(ctx)
	r, err := e.box.Owed(ctx, e.cfg.Identity, "", 0, replies.sent)
	if err != nil || r.Degraded {
		if ctx.Err() != nil {
			return
		}
		e.wk.mu.Lock()
		again := e.wk.failed
		e.wk.failed = true
		e.wk.mu.Unlock()
		log := e.log.Warn // once a run of failures: every MailboxPoll after it, DEBUG
		if again {
			log = e.log.Debug
		}
		log("owed asks not refreshed; the last view stands, told as not fresh", "err", err, "degraded", r.Degraded)
		return
	}
	v := owedView{At: time.Now().UTC(), Asks: []owedAsk{}}
	stuck := replies.stuckOn(e.cfg.Identity, r.Owed)
	for _, it := range r.Owed {
		if e.trustedEvent(it.Event.Raw) {
			o, _ := origin.Of(it.Event.Raw)
			v.Asks = append(v.Asks, owedAsk{ID: it.Event.ID, Line: askLine(it.Event, stuckMark(stuck[it.Event.ID])), From: o.Device, Via: o.Via, Corr: deref(it.Event.CorrelationID), Stream: it.Event.Stream, Sender: it.Event.FromAgent})
		}
	}
	e.wk.mu.Lock()
	e.wk.replies = slices.Clone(e.wk.replies[counted:])
	for _, reply := range e.wk.replies {
		v.Asks = e.clearedBy(v.Asks, reply)
	}
	e.wk.view = v
	e.wk.read, e.wk.failed = true, false
	var fresh []owedAsk
	if e.wk.started || e.initialized.Load() {
		for _, a := range v.Asks {
			if !e.wk.told[a.ID] {
				fresh = append(fresh, a)
				e.wk.told[a.ID] = true
			}
		}
	}
	subscribed := e.wk.subscribed
	if len(fresh) > 0 && !subscribed {
		e.wk.note = append(e.wk.note, fresh...)
	}
	e.wk.mu.Unlock()
	e.keepView(ctx)
	if len(fresh) > 0 && subscribed {
		// Sent only to sessions that subscribed; an agent gone hears nothing.
		e.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: mailbox.ResourceURI})
	}
}

// wakeKey is where the agent's view is kept in the outbox's meta.
func (e *Edge) wakeKey() string { return wakeMetaKey + ":" + e.cfg.Identity }

// keepView keeps the view as it is now for the agent's next session;
// called after each change, so the last write is of the newest view.
func (e *Edge) keepView(ctx context.Context) {
	if e.outbox == nil {
		return
	}
	e.wk.keep.Lock()
	defer e.wk.keep.Unlock()
	e.wk.mu.Lock()
	v := e.wk.view
	e.wk.mu.Unlock()
	b, err := json.Marshal(v)
	if err == nil {
		err = e.outbox.SetMeta(ctx, e.wakeKey(), string(b))
	}
	if err != nil {
		e.log.Debug("the owed view not kept for the next session", "err", err)
	}
}

// answered takes out of the view, and keeps, the asks the agent's reply c
// (an event_append or event_ack the edge took) clears, by the mailbox's
// own join (mailbox.Cleared): the next session is not told them as owed,
// whether or not the reply has reached the primary (a read counts the
// replies still queued). A read of the log out now, begun before the
// reply, clears them from its view too (wk.replies): it may have read
// the agent's replies before this one reached the primary.
func (e *Edge) answered(ctx context.Context, c *call) {
	if e.wk == nil {
		return
	}
	reply := c.argsMap()
	e.wk.mu.Lock()
	e.wk.replies = append(e.wk.replies, reply) // the read out now, if any, may not count it
	n := len(e.wk.view.Asks)
	e.wk.view.Asks = e.clearedBy(e.wk.view.Asks, reply)
	e.wk.note = e.clearedBy(e.wk.note, reply)
	changed := len(e.wk.view.Asks) != n
	e.wk.mu.Unlock()
	if changed {
		e.keepView(ctx)
	}
}

// clearedBy is asks (a copy) without those the agent's reply clears, by
// the mailbox's own join (mailbox.Cleared); asks itself when it clears
// none.
func (e *Edge) clearedBy(asks []owedAsk, reply map[string]any) []owedAsk {
	owed := make([]mailbox.Event, 0, len(asks))
	for _, a := range asks {
		owed = append(owed, mailbox.Event{ID: a.ID, Stream: a.Stream, FromAgent: a.Sender, CorrelationID: &a.Corr})
	}
	gone := mailbox.Cleared(e.cfg.Identity, owed, reply)
	if len(gone) == 0 {
		return asks
	}
	return slices.DeleteFunc(slices.Clone(asks), func(a owedAsk) bool { return slices.Contains(gone, a.ID) })
}

// keptView is the view for an answer that could not read the log: the
// asks from senders trusted now, as last read, with when and why it is
// not fresh (nil: the log was never read; a view of no asks is said so,
// as the session start told it: attack97 F1). As the online answer, a
// stream keeps the asks on that stream (its exact name), is named and
// counts those owed on the others (other_streams: a misspelled stream
// does not read as nothing owed, attack105 F3), and limit > 0 keeps the
// oldest limit (more counts the rest). The view kept in the outbox is
// read again first: another session of the agent on this devbox may
// have answered asks since (answered), or read the log later.
func (e *Edge) keptView(ctx context.Context, stream string, limit int) map[string]any {
	if e.wk == nil {
		return nil
	}
	kept, ok := e.readKept(ctx)
	e.wk.mu.Lock()
	if ok && !kept.At.Before(e.wk.view.At) {
		for _, reply := range e.wk.replies { // this session's: the kept view may not count them yet (review31 F3)
			kept.Asks = e.clearedBy(kept.Asks, reply)
		}
		e.wk.view = kept
	}
	v := e.trustedNow(e.wk.view)
	e.wk.mu.Unlock()
	if v.At.IsZero() {
		return nil
	}
	lines := []string{}
	for _, a := range v.Asks {
		if stream == "" || a.Stream == stream {
			lines = append(lines, a.Line)
		}
	}
	others, more := len(v.Asks)-len(lines), 0
	if limit > 0 && len(lines) > limit {
		lines, more = lines[:limit], len(lines)-limit
	}
	out := map[string]any{"as_of": v.At.UTC().Format(time.RFC3339), "asks": lines, "note": keptViewNote(stream, len(lines), others, more)}
	if stream != "" {
		out["stream"], out["other_streams"] = stream, others
	}
	if more > 0 {
		out["more"] = more
	}
	return out
}

// keptViewNote is a kept view's note: n asks listed (more left out by the
// limit) on stream ("": every stream), others owed on other streams.
func keptViewNote(stream string, n, others, more int) string {
	on := ""
	if stream != "" {
		on = " on stream " + mailbox.Quoted(stream)
	}
	note := "the log could not be read now (the primary is not reachable): "
	switch {
	case n > 0:
		note += "these are the asks from trusted senders owed" + on + " as last read, at as_of; some may be answered already"
	case others > 0:
		note += fmt.Sprintf("no ask from trusted senders was owed%s as last read, at as_of, but %d on other streams (other_streams): is the stream's name right? Newer asks are not known", on, others)
	default:
		note += "no ask from trusted senders was owed" + on + " as last read, at as_of; newer ones are not known"
	}
	if more > 0 {
		note += fmt.Sprintf("; %d more (more: raise limit to see them)", more)
	}
	if n > 0 && others > 0 {
		note += fmt.Sprintf("; %d more on other streams (other_streams)", others)
	}
	return note
}

// deref is *p, "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// trustedEvent reports an event whose sender the reading device trusts:
// its origin says trusted (gateway/origin). An event without an origin
// counts as trusted only from a primary that stamps none (not a gateway,
// so no trusted set is configured anywhere).
func (e *Edge) trustedEvent(raw json.RawMessage) bool {
	if o, ok := origin.Of(raw); ok {
		return o.Trusted
	}
	if gjson.GetBytes(raw, origin.Key).Exists() || e.remote == nil {
		return false
	}
	in, ok := e.remote.Device()
	return !ok || in.Origins == 0
}

// trustedNow is v with only the asks whose senders the device trusts as
// the gateway last said (its Devbox-Config-Device header, as this run or
// an earlier one heard it: device.go): a view read under a wider trusted
// set is narrowed to the last one heard. v as it is when no gateway ever
// said or it stamps no origins.
func (e *Edge) trustedNow(v owedView) owedView {
	in, ok := e.device()
	if !ok || in.Origins == 0 {
		return v
	}
	out := owedView{At: v.At, Asks: []owedAsk{}}
	for _, a := range v.Asks {
		if a.From != "" && in.TrustsDevice(a.From) && (a.Via == "" || in.TrustsDevice(a.Via)) {
			out.Asks = append(out.Asks, a)
		}
	}
	return out
}

// awaitPrimary waits, while initialize would answer from a view read
// before this process, until what to say of the primary is known: the
// first read ended, the primary is known down (a refused connect, however
// slow), or it answered: with its device header (what this device trusts
// now) when the view has asks to filter, with a session when it has none.
// A gateway's server error (503: the primary behind it failed) carries the
// header too, but is no answer of the primary: the breaker it opens is
// waited for. So is an answer the gateway gives itself (the client's
// server/discover, 200 with the header, just before its initialize gets
// the 503: attack95 F4): the header counts once the connect is answered.
// It waits at most until the edge's start + wakeTrustWait (a hung
// primary).
func (e *Edge) awaitPrimary(ctx context.Context) {
	if e.remote == nil {
		return
	}
	e.wk.mu.Lock()
	none := len(e.wk.view.Asks) == 0
	e.wk.mu.Unlock()
	t := time.NewTimer(time.Until(e.wk.trustBy))
	defer t.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := e.remote.Device(); ok && e.remote.LastStatus() < 500 && e.remote.Connected() || !e.remote.Up() || none && e.remote.Connected() {
			return
		}
		select {
		case <-e.wk.first:
			return
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// askLine is one ask on one line: id, type, sender and stream (each
// mailbox.Name: a name, never a sentence of the instructions), mark (the
// edge's own words, "": none), the start of its body; what the log wrote
// in it is mailbox.Printable.
func askLine(ev mailbox.Event, mark string) string {
	body := strings.Join(strings.Fields(gjson.GetBytes(ev.Raw, "body").String()), " ")
	line := fmt.Sprintf("%s: %s from %s", ev.ID, mailbox.Type(ev.Type), mailbox.Name(ev.FromAgent))
	if ev.Stream != "" {
		line += " (stream " + mailbox.Quoted(ev.Stream) + ")"
	}
	if mark != "" {
		line += " " + mark
	}
	if body != "" {
		line += ": " + body
	}
	return mailbox.PrintableCut(line, wakeLineMax-len("- "), func(s string) int { return len(s) })
}

// renderOwed is the server instructions for a view ("" when nothing is
// owed and the log was read): the count, the first wakeShown asks, how
// to clear them; stale says why the view is not fresh ("": it is).
func renderOwed(v owedView, self string, stale string) string {
	self = mailbox.Quoted(self) // a name, never read as a sentence of the instructions
	if len(v.Asks) == 0 {
		switch {
		case stale == failedNote, v.At.IsZero() && (stale == keptNote || stale == refusedNote):
			why := map[string]string{keptNote: " (the primary is not reachable now)", refusedNote: " (the primary refuses this device's token; devbox-config doctor names the fix)"}[stale]
			return fmt.Sprintf("Coordination mailbox (devbox-config edge): the coordination log could not be read at this session's start%s: call mempalace_mailbox for what %s owes.", why, self)
		case stale != "" && !v.At.IsZero():
			return fmt.Sprintf("Coordination mailbox (devbox-config edge): %s owed no ask from trusted senders as of %s%s.", self, v.At.UTC().Format(time.RFC3339), stale)
		case stale != "":
			return fmt.Sprintf("Coordination mailbox (devbox-config edge): the coordination log was not read yet at this session's start: asks owed to %s come as notes on tool answers; call mempalace_mailbox for them now.", self)
		}
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Coordination mailbox (devbox-config edge): %s owes %d %s from trusted senders (as of %s%s). Oldest first:\n",
		self, len(v.Asks), plural(len(v.Asks), "ask", "asks"), v.At.UTC().Format(time.RFC3339), stale)
	for i, a := range v.Asks {
		if i == wakeShown {
			fmt.Fprintf(&b, "- and %d more: call mempalace_mailbox for all of them\n", len(v.Asks)-wakeShown)
			break
		}
		// One line of at most wakeLineMax bytes as shown, "- " and all; a
		// line kept by an older edge may be raw.
		b.WriteString("- " + mailbox.PrintableCut(a.Line, wakeLineMax-len("- "), func(s string) int { return len(s) }) + "\n")
	}
	fmt.Fprintf(&b, "Answer each with mempalace_event_ack(event_id=<id>, from_agent=%s, status=applied|blocked|failed|superseded); mempalace_mailbox lists them with why.", self)
	return truncate(b.String(), wakeMaxBytes)
}

// Why a view told is not fresh: read by an earlier session, the primary
// not reachable now or refusing the token, or this session's own read not
// in yet; or this run's last read of the log failed.
const (
	keptNote    = ", read by an earlier session: the primary is not reachable now, so some may be answered already and newer ones not told; call mempalace_mailbox"
	refusedNote = ", read by an earlier session: the primary refuses this device's token (MEMPALACE_REMOTE_TOKEN; devbox-config doctor names the fix), so some may be answered already"
	earlierNote = ", read by an earlier session: this session's read of the coordination log was not in yet at its start, so some may be answered already; newer asks come as notes on tool answers, or call mempalace_mailbox"
	failedNote  = ", the last time it could be read: the coordination log could not be read now, so some may be answered already and newer ones not told; call mempalace_mailbox"
)

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// newAsksNote is the one line a tool answer carries for asks that arrived
// during the session.
func newAsksNote(fresh []owedAsk) string {
	line := mailbox.Printable(fresh[0].Line) // a line kept by an older edge may be raw
	s := fmt.Sprintf("[devbox-config] %d new %s for you on the coordination log: %s", len(fresh), plural(len(fresh), "ask", "asks"), line)
	if len(fresh) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(fresh)-1)
	}
	return truncate(s+"; call mempalace_mailbox.", wakeLineMax+80)
}

// wakeInstructions is what initialize answers with: the view as it is
// once this process's first read ended, or WakeWait after the edge
// started (an initialize that comes later waits less; the primary is
// never waited on longer, but for what to say of it: awaitPrimary), with
// only the asks from senders trusted now (trustedNow). Every ask told
// counts as told.
func (e *Edge) wakeInstructions(ctx context.Context) string {
	if e.wk == nil {
		return ""
	}
	t := time.NewTimer(time.Until(e.wk.deadline))
	defer t.Stop()
	select {
	case <-e.wk.first:
	case <-t.C:
	case <-ctx.Done():
	}
	e.awaitPrimary(ctx)
	e.wk.mu.Lock()
	defer e.wk.mu.Unlock()
	e.wk.started = true
	v := e.trustedNow(e.wk.view)
	for _, a := range v.Asks {
		e.wk.told[a.ID] = true
	}
	stale := ""
	switch {
	case !e.wk.read && e.remote != nil && e.remote.State() == "unauthorized":
		stale = refusedNote
	case !e.wk.read && e.remote != nil && !e.remote.Up():
		stale = keptNote
	case e.wk.failed:
		stale = failedNote
	case !e.wk.read:
		stale = earlierNote
	}
	return renderOwed(v, e.cfg.Identity, stale)
}

// sessionInstructions is what initialize answers with: the writes the
// primary refused for good (deadnote.go) and those that stayed local
// unrecorded, then the owed asks, then an identity that is not the
// device's, within the summary's bounds ("": none of them).
func (e *Edge) sessionInstructions(ctx context.Context) string {
	var lines []string
	for _, l := range []string{e.deadInstructions(ctx), e.stayedLocalLine(), e.wakeInstructions(ctx), e.identityLine()} {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return truncate(strings.Join(lines, "\n"), wakeMaxBytes)
}

// stayedLocalLine tells each session start, until a join sends them, of
// the writes that stayed in this devbox's palace only because the outbox
// could not record them (outbox.StayedLocal; "": none): the agent that
// made them was told in its answer, a later session would not be.
func (e *Edge) stayedLocalLine() string {
	recs, err := outbox.ReadStayedLocal(filepath.Join(e.cfg.StateDir(), outbox.FileName))
	if err != nil {
		e.log.Debug("the record of writes that stayed local is unreadable; edge status and doctor say so", "err", err)
	}
	var lines []string
	for _, sl := range recs {
		lines = append(lines, "Writes not shared (devbox-config edge): "+sl.String()+"; tell the user.")
	}
	return strings.Join(lines, "\n")
}

// identityLine says MEMPALACE_AGENT_NAME or MEMPALACE_ORIGIN_LABEL was
// refused, and that the session's identity is not one of its device's agents as the gateway
// last said ("": neither; the latter is not said when nothing is known,
// or the device coordinates and sees every event): no ask to it can be
// seen, and its coordination writes are refused.
func (e *Edge) identityLine() string {
	var lines []string
	if v := e.cfg.AgentRefused; v != "" {
		lines = append(lines, "Coordination identity (devbox-config edge): "+identityRefusedNote(ladder.EnvAgentName, v, e.cfg.Identity))
	}
	if v := e.cfg.LabelRefused; v != "" {
		lines = append(lines, "Coordination identity (devbox-config edge): "+identityRefusedNote(ladder.EnvOriginLabel, v, e.cfg.Identity))
	}
	if p := e.identityProblem(e.cfg.Identity); p != "" {
		lines = append(lines, "Coordination identity (devbox-config edge): "+p)
	}
	return strings.Join(lines, "\n")
}

// identityRefusedNote says the agent name or the label (the variable envVar's
// value name) was refused and why: the characters a name may not hold,
// escaped, and the name itself, quoted and escaped, only when it holds no
// white space and no '=' (as the ladder's warning: it may be two .env
// lines run together, a secret among them); and what the session is
// without it.
func identityRefusedNote(envVar, name, identity string) string {
	what := "a MemPalace agent name"
	if envVar == ladder.EnvOriginLabel {
		what = "a label (checked as an agent name)"
	}
	why := "not valid as " + what + " (letters, digits, _ . ' - and space, at most 128, first and last a letter or digit)"
	if bad := ladder.NameFaults(name); len(bad) > 0 {
		why = "it holds " + strings.Join(bad, ", ") + ", which " + what + " may not (letters, digits, _ . ' - and space only)"
	}
	shown := "=" + truncate(strconv.Quote(name), 80)
	if strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || r == '=' }) {
		shown = " (its value not shown: it holds white space or '=', and may hold a secret)"
	}
	instead := "this session has no coordination identity: no mailbox is read and no owed ask is told"
	if identity != "" {
		instead = "this session speaks as " + mailbox.Quoted(identity) + " instead"
	}
	return mailbox.Printable(fmt.Sprintf("%s%s was refused: %s; so %s. Fix it in .env; devbox-config doctor names it.", envVar, shown, why, instead))
}

// identityProblem is identityLine's sentence for agent, for the
// mailbox's warnings too ("": none).
func (e *Edge) identityProblem(agent string) string {
	in, ok := e.device()
	if e.box == nil || agent == "" || !ok || in.Coordinator || in.ActsAs(agent, false) {
		return ""
	}
	// The name .env gave, quoted: the gateway says it is not the device's.
	return mailbox.Printable(fmt.Sprintf("%s is not one of this device's agents at the gateway (%s): no ask to it can be seen, and its coordination writes are refused. Set MEMPALACE_AGENT_NAME to one of them, or ask the operator to add it (devbox-config gateway device set %s --agents ...).",
		mailbox.Quoted(agent), quotedNames(in.Agents), in.ID))
}

// quotedNames is names, each mailbox.Quoted, comma-separated ("none": no
// name).
func quotedNames(names []string) string {
	quoted := make([]string, len(names))
	for i, a := range names {
		quoted[i] = mailbox.Quoted(a)
	}
	return cmp.Or(strings.Join(quoted, ", "), "none")
}

// toldByMailbox counts the asks a mailbox answer for the session's own
// agent lists (owed) as told: no "new ask" note for them, on that answer
// or a later one.
func (e *Edge) toldByMailbox(agent string, owed []mailbox.Item) {
	if e.wk == nil || agent != e.cfg.Identity {
		return
	}
	listed := map[string]bool{}
	for _, it := range owed {
		listed[it.Event.ID] = true
	}
	e.wk.mu.Lock()
	defer e.wk.mu.Unlock()
	maps.Copy(e.wk.told, listed)
	// Only the asks it listed: a noted ask is in told already (attack71
	// F5: a mailbox of another stream, or a page of older asks, dropped
	// every pending note).
	e.wk.note = slices.DeleteFunc(e.wk.note, func(a owedAsk) bool { return listed[a.ID] })
}

// takeNotes is the notes for this tool answer (none: nothing to tell),
// one line each, given once: the asks waiting for it whose senders the
// device trusts now (trustedNow: a revocation heard since they were read
// applies), and the writes the primary refused for good since the
// session was last told (deadnote.go). back puts them back, for an
// answer that could not carry them.
func (e *Edge) takeNotes(ctx context.Context) (notes []string, back func()) {
	asks := e.takeNoteAsks()
	dead := e.newDead(ctx, false)
	if len(asks) > 0 {
		notes = append(notes, newAsksNote(asks))
	}
	notes = append(notes, deadNotes(dead)...)
	return notes, func() {
		if len(asks) > 0 {
			e.wk.mu.Lock()
			e.wk.note = append(asks, e.wk.note...)
			e.wk.mu.Unlock()
		}
		e.untell(dead)
	}
}

// takeNoteAsks takes the asks waiting for the next tool answer whose
// senders the device trusts now.
func (e *Edge) takeNoteAsks() []owedAsk {
	if e.wk == nil {
		return nil
	}
	e.wk.mu.Lock()
	defer e.wk.mu.Unlock()
	asks := e.trustedNow(owedView{Asks: e.wk.note}).Asks
	e.wk.note = nil
	return asks
}

// notePending reports a note waiting for the next tool answer.
func (e *Edge) notePending(ctx context.Context) bool {
	if e.deadPending(ctx) {
		return true
	}
	if e.wk == nil {
		return false
	}
	e.wk.mu.Lock()
	defer e.wk.mu.Unlock()
	return len(e.wk.note) > 0
}

// subscribe notes whether the client subscribed to the mailbox resource.
func (e *Edge) subscribe(uri string, on bool) {
	if e.wk != nil && uri == mailbox.ResourceURI {
		e.wk.mu.Lock()
		e.wk.subscribed = on
		e.wk.mu.Unlock()
	}
}

// withNote is a tool answer (its result's JSON) carrying the notes, if
// any wait, one text block each.
func (e *Edge) withNote(ctx context.Context, result json.RawMessage) json.RawMessage {
	notes, back := e.takeNotes(ctx)
	out := result
	for _, n := range notes {
		block, _ := json.Marshal(&mcp.TextContent{Text: n}) // a text block: it encodes
		var err error
		if out, err = sjson.SetRawBytes(out, "content.-1", block); err != nil {
			back() // no answer could carry them
			return result
		}
	}
	return out
}
