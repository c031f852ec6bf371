package mailbox

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// Result is the mailbox's answer. Its JSON is what `devbox-config mailbox
// --json` prints — {"agent", "owed", "count"} — plus, only when they
// apply, more (items beyond limit), degraded/age/as_of (answered from
// the last view because the primary could not be read) and warnings.
type Result struct {
	Agent string `json:"agent"`
	// Owed is oldest first; each item is the primary's event object plus
	// "why".
	Owed []Item `json:"owed"`
	// Count is len(Owed).
	Count int `json:"count"`
	// More counts owed items left out by limit.
	More int `json:"more,omitempty"`
	// LeftOut counts owed items left out to keep the answer within
	// AnswerMax, and Bound says what Bounded cut ("": nothing).
	LeftOut int    `json:"left_out,omitempty"`
	Bound   string `json:"bound,omitempty"`
	// Stream is the stream the asks were kept on ("": every stream), and
	// OtherStreams how many are owed on the others (a misspelled stream
	// is not read as an empty mailbox).
	Stream       string `json:"stream,omitempty"`
	OtherStreams int    `json:"other_streams,omitempty"`
	// Degraded: the primary could not be read; this is the last view.
	Degraded bool `json:"degraded,omitempty"`
	// Age is how old the last view is (a Go duration, e.g. "4m10s").
	Age string `json:"age,omitempty"`
	// AsOf is when the last view was read (RFC 3339, UTC).
	AsOf string `json:"as_of,omitempty"`
	// UntrustedWithheld counts the events to the agent (broadcasts among
	// them) that the gateway left out of the read as from senders this
	// device withholds: asks among them are not listed.
	UntrustedWithheld int      `json:"untrusted_withheld,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
}

// Filters returns the two event_list queries the owed set needs: what is
// addressed to agent (the primary's to_agent filter also returns "*"
// broadcasts, which Derive drops) and what agent wrote (its replies; only
// the join fields matter, so bodies come as previews), by "writer" as
// 3.11 names it (a ToolSource sends it as from_agent to a primary
// without writer). Neither names a stream: an ack answers the ask it
// names from any stream, so a stream's owed set is the whole one's asks
// on that stream. A primary that filters by neither (from_agent on 3.11)
// returns more than needed; Derive ignores the excess.
func Filters(agent string) []map[string]any {
	return []map[string]any{{"to_agent": agent}, {"writer": agent, "preview": true}}
}

// Read fetches every event the owed set of agent depends on, and how many
// the reads withheld as from untrusted senders. The to_agent query comes
// first so that, where both return an event, Derive keeps its full body
// rather than the from_agent query's preview.
func Read(ctx context.Context, src Source, agent string) ([]Event, int, error) {
	fs := Filters(agent)
	got := make([][]Event, len(fs))
	held := make([]int, len(fs))
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs { // each filter's pages at once: the read takes the slowest's time, not the sum
		wg.Add(1)
		go func() { defer wg.Done(); got[i], held[i], errs[i] = Fetch(ctx, src, f) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, err // the first filter's failure, as read one after the other
		}
	}
	withheld := 0
	for _, n := range held {
		withheld += n
	}
	return slices.Concat(got...), withheld, nil
}

// Owed reads the primary and derives agent's owed set; stream, if not
// empty, keeps the asks on that stream (answered as in the whole set).
// limit > 0 keeps the oldest limit items (the rest are counted in More).
func Owed(ctx context.Context, src Source, agent, stream string, limit int) (Result, error) {
	if err := checkAgent(agent); err != nil {
		return Result{}, err
	}
	evs, withheld, err := Read(ctx, src, agent)
	if err != nil {
		return Result{}, err
	}
	r := build(evs, agent, stream, limit)
	r.UntrustedWithheld = withheld
	return r, nil
}

func checkAgent(agent string) error {
	switch agent {
	case "":
		return fmt.Errorf("no agent identity: name the agent (<harness>@<device>)")
	case "*":
		return fmt.Errorf(`agent "*" is the broadcast address, which owes nothing (RFC 003 §7.4)`)
	}
	return nil
}

// build derives from a set of events (fresh or remembered, with pending
// ones merged).
func build(evs []Event, agent, stream string, limit int) Result {
	items, more := derive(evs, agent, stream, limit)
	r := Result{Agent: agent, Owed: items, More: more, Stream: stream}
	if stream != "" {
		all, _ := derive(evs, agent, "", 0)
		r.OtherStreams = len(all) - len(items) - more
	}
	if r.Owed == nil {
		r.Owed = []Item{}
	}
	r.Count = len(r.Owed)
	if w := IdentityWarning(agent); w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	return r
}

// WithPending returns events plus the agent's writes still in the outbox,
// so that offline a reply already written counts as sent and the agent
// does not answer twice. Each pending map is the arguments of an
// event_append (type, from_agent, to_agent, correlation_id, status,
// metadata.ack_of, ...) or of an event_ack (event_id, from_agent,
// status), oldest first; they all come after every event the primary
// returned. Maps that are neither (no "type" and no "event_id") are
// skipped. Names and ids are read as MemPalace files them, stripped as
// Python's str.strip() strips (a reply to " pi@laptop" is filed to
// pi@laptop); status as sent, as MemPalace refuses a padded one.
func WithPending(events []Event, pending []map[string]any) []Event {
	out := append([]Event(nil), events...)
	for i, a := range pending {
		str := func(k string) string { s, _ := a[k].(string); return s }
		filed := func(k string) string { return catalogue.SanitizedName(str(k)) } // as MemPalace strips it
		ptr := func(s string) *string {
			if s != "" {
				return &s
			}
			return nil
		}
		e := Event{Type: filed("type"), Stream: filed("stream"), FromAgent: filed("from_agent"), ToAgent: ptr(filed("to_agent")),
			CorrelationID: ptr(filed("correlation_id")), Status: ptr(str("status")), pending: true, pendingAt: i}
		switch {
		case filed("event_id") != "" && e.Type == "":
			e.Type, e.AckOf, e.ToAgent, e.CorrelationID = "event.ack", filed("event_id"), nil, nil
		case e.Type != "":
			if m, ok := a["metadata"].(map[string]any); ok {
				e.AckOf, _ = m["ack_of"].(string)
			}
		default:
			continue
		}
		raw := maps.Clone(a) // not nil: it has a type or an event_id
		raw["pending"] = true
		e.Raw, _ = json.Marshal(raw)
		out = append(out, e)
	}
	return out
}

// Mailbox answers Owed and remembers the last events it read for each
// agent (every stream's: one stream's owed set is read as the whole
// one), so that while the primary cannot be read it answers from that
// view, marked degraded with its age.
type Mailbox struct {
	Src Source
	// Wait bounds the primary read when a last view exists (0: only ctx
	// bounds it). The edge sets it so the mailbox answers within its
	// budget even when the primary hangs instead of refusing.
	Wait time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu    sync.Mutex
	views map[string]view
}

type view struct {
	events   []Event
	withheld int
	at       time.Time
}

func (m *Mailbox) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Owed reads the primary and derives agent's owed set with pending (the
// agent's event_append/event_ack arguments still in the outbox, see
// WithPending) counted as sent. If the primary cannot be read and a view
// of it was read before, the answer is derived from that view and marked
// degraded; with no view the read's error is returned.
func (m *Mailbox) Owed(ctx context.Context, agent, stream string, limit int, pending []map[string]any) (Result, error) {
	if err := checkAgent(agent); err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	last, have := m.views[agent]
	m.mu.Unlock()

	rctx := ctx
	if have && m.Wait > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, m.Wait)
		defer cancel()
	}
	evs, withheld, err := Read(rctx, m.Src, agent)
	if err == nil {
		m.mu.Lock()
		if m.views == nil {
			m.views = map[string]view{}
		}
		m.views[agent] = view{events: evs, withheld: withheld, at: m.now()}
		m.mu.Unlock()
		r := build(WithPending(evs, pending), agent, stream, limit)
		r.UntrustedWithheld = withheld
		return r, nil
	}
	if !have {
		return Result{}, err
	}
	r := build(WithPending(last.events, pending), agent, stream, limit)
	r.UntrustedWithheld = last.withheld
	age := m.now().Sub(last.at).Round(time.Second)
	r.Degraded, r.Age, r.AsOf = true, age.String(), last.at.UTC().Format(time.RFC3339)
	r.Warnings = append(r.Warnings, fmt.Sprintf("the primary could not be read (%v); this is its view from %s ago", err, age))
	return r, nil
}
