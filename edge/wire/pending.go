package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// Pending is the agent's requests not answered yet, by id: the guard
// records each request it lets through (Request), the writer each answer
// it sends (Answered). When the agent closes its input, the guard waits
// for them (Wait) before the SDK sees the end, since the SDK neither
// writes nor lets a handler finish once its input has ended.
//
// An id is matched as the SDK reads it: a string as its value, a number
// as the integer it truncates to.
//
// Owed closes the set for good, at the very end: what is still pending
// then is answered by the edge itself, and any later answer to it is a
// second one, which SyncWriter drops.
type Pending struct {
	n       atomic.Int64 // the requests in ids, read without the lock on every write
	closed  atomic.Bool  // Owed ran: an answer to an id not pending is a second one
	mu      sync.Mutex
	ids     map[string]owed
	changed chan struct{} // closed at the next answer; nil when nobody waits
}

// owed is what is known of the requests pending under one id: how many
// (an agent may reuse an id), and the tool the last one called ("" for
// another method). One tool serves them all: an id reused while pending
// is the agent's bug (JSON-RPC), and an answer does not say which of them
// it answers, so no tool kept per request would be known to be right.
type owed struct {
	n    int
	tool string
}

// Unanswered is a request still pending when the set was closed (Owed).
type Unanswered struct {
	ID   json.RawMessage // as the SDK reads it: a number truncated
	Tool string          // the tools/call's tool; "" for another method
}

// NewPending returns an empty set.
func NewPending() *Pending { return &Pending{ids: map[string]owed{}} }

// Request records a message from the agent: a request is pending until
// answered; notifications/cancelled takes its request off (the agent wants
// no answer, and MCP gives none). The message is read as the SDK reads it
// (checkEnvelope); the guard, which has read it already, calls request.
func (p *Pending) Request(msg []byte) {
	if env, why := checkEnvelope(msg); why == "" {
		p.request(env, msg)
	}
}

func (p *Pending) request(env envelope, msg []byte) {
	if !env.IsRequest {
		return // the agent's answer to the edge's own request
	}
	if env.Method == "notifications/cancelled" {
		if k, ok := idKey(gjson.GetBytes(msg, "params.requestId").Value()); ok {
			p.remove(k, true)
		}
		return
	}
	k, ok := idKey(env.ID)
	if !ok {
		return // a notification
	}
	var tool string
	if env.Method == "tools/call" {
		tool = gjson.GetBytes(msg, "params.name").String()
	}
	p.mu.Lock()
	p.ids[k] = owed{n: p.ids[k].n + 1, tool: tool}
	p.n.Add(1)
	p.mu.Unlock()
}

// idKey is an id's key (as the SDK's decoder, or gjson's Value, left it),
// ok false for one that is not a request's (absent, null, an object).
func idKey(id any) (string, bool) {
	switch v := id.(type) {
	case string:
		return "s" + v, true
	case float64:
		return "n" + strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

// Owed closes the set and returns the requests still pending, one per
// request (under a reused id, each with the last one's tool: owed): the
// caller answers them itself, through the SyncWriter, which
// from now on writes no answer to a request no longer pending (an answer
// given already, by the caller or by whoever raced it).
func (p *Pending) Owed() []Unanswered {
	p.closed.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Unanswered
	for k, o := range p.ids {
		id, _ := json.Marshal(k[1:]) // a string's key: the string
		if k[0] == 'n' {
			id = []byte(k[1:])
		}
		for range o.n {
			out = append(out, Unanswered{ID: id, Tool: o.tool})
		}
	}
	return out
}

// stale reports an answer to a request no longer pending once the set is
// closed (Owed): one the edge answered at the end already.
func (p *Pending) stale(msg []byte) bool {
	if !p.closed.Load() {
		return false
	}
	id := gjson.GetBytes(msg, "id")
	k, ok := idKey(id.Value())
	if !ok || !isResponse(msg, id) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[k].n == 0
}

// Answered records a message to the agent: an answer takes its request
// off. It costs nothing while no request is pending, and reads only the
// message's start when the writer puts the id before the result, as the
// SDK and the fast lane do.
func (p *Pending) Answered(msg []byte) {
	if p.n.Load() == 0 {
		return
	}
	id := gjson.GetBytes(msg, "id")
	k, ok := idKey(id.Value())
	if !ok || !isResponse(msg, id) {
		return
	}
	p.remove(k, false)
}

// isResponse tells an answer from a request of the edge's own (which has
// a method), looking at the key after the id when there is one.
func isResponse(msg []byte, id gjson.Result) bool {
	if id.Index > 0 && id.Index+len(id.Raw) <= len(msg) {
		rest := bytes.TrimLeft(msg[id.Index+len(id.Raw):], " \t\r\n")
		if r, ok := bytes.CutPrefix(rest, []byte(",")); ok {
			r = bytes.TrimLeft(r, " \t\r\n")
			switch {
			case bytes.HasPrefix(r, []byte(`"result"`)), bytes.HasPrefix(r, []byte(`"error"`)):
				return true
			case bytes.HasPrefix(r, []byte(`"method"`)):
				return false
			}
		}
	}
	return !gjson.GetBytes(msg, "method").Exists()
}

func (p *Pending) remove(k string, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.ids[k]
	if !ok {
		return
	}
	if o.n <= 1 || all {
		delete(p.ids, k)
		p.n.Add(-int64(o.n))
	} else {
		o.n--
		p.ids[k] = o
		p.n.Add(-1)
	}
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// Len is the number of requests not answered yet.
func (p *Pending) Len() int { return int(p.n.Load()) }

// Wait returns once every pending request is answered, or with ctx's
// error (wrapped) and the number still unanswered.
func (p *Pending) Wait(ctx context.Context) (int, error) {
	for {
		p.mu.Lock()
		if len(p.ids) == 0 {
			p.mu.Unlock()
			return 0, nil
		}
		if p.changed == nil {
			p.changed = make(chan struct{})
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			n := p.Len()
			return n, fmt.Errorf("%d requests unanswered: %w", n, ctx.Err())
		}
	}
}
