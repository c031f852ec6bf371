package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/warmconn"
)

// scanPages bounds an event look-up: at most this many pages of 500.
const scanPages = 20

// objectBefore is the object check made before a call, dec as it was
// or a denial: event_ack needs an event the caller can see (acking one
// it cannot would tell it the event's stream, room and sender), and an
// event_append may name in artifact_ids only artifacts the caller can
// read (refsReadable); errNoAnswer when the primary did not answer a
// look-up.
func (s *Server) objectBefore(ctx context.Context, d *Device, t catalogue.Tool, args map[string]any, dec Decision) (Decision, error) {
	if d.Coordinator {
		return dec, nil
	}
	switch t.Name {
	case "event_ack":
		id, _ := args["event_id"].(string)
		seen := false
		var err error
		if id != "" {
			seen, err = s.findEvent(ctx, d, func(e map[string]any) bool { return e["id"] == id })
		}
		if !seen {
			dec = deny(ruleNotVisible, "")
		}
		return dec, err
	case "event_append":
		return s.refsReadable(ctx, d, args, dec)
	}
	return dec, nil
}

// refsReadable refuses an event_append whose artifact_ids names an
// artifact the device cannot read now (artifactReadable): an event's
// reference lets whoever sees the event read the artifact, so a device
// naming an id it learnt but may not read would open it to the event's
// addressee (attack93 F3: a confused deputy). An id that names no
// artifact is refused in the same words, so the text does not say which
// exist; its time may (attack95 F5): MemPalace 3.11.0 names an
// artifact's creator only with its content (artifact_get, /sync/artifact),
// and only an existing one costs an event scan.
// Ids are looked up in the order given, each once, so the refusal names
// the first unreadable one (review30 F7). The look-ups are not charged to
// the device's read rate (left so on purpose): maxArtifactRefs bounds
// them per write.
func (s *Server) refsReadable(ctx context.Context, d *Device, args map[string]any, dec Decision) (Decision, error) {
	var ids []string
	seen := map[string]bool{}
	list, _ := args["artifact_ids"].([]any)
	for _, x := range list {
		if id, _ := x.(string); !seen[id] {
			seen[id] = true // MemPalace keeps each id once too
			ids = append(ids, id)
		}
	}
	if len(ids) > maxArtifactRefs {
		dec = deny(ruleArguments, "")
		dec.why = fmt.Sprintf("artifact_ids names %d artifacts; an event may name at most %d (each is looked up at the primary before the event is written): nothing was written (fix: name the others in further events)", len(ids), maxArtifactRefs)
		return dec, nil
	}
	for _, id := range ids {
		got := s.upstreamResult(ctx, "mempalace_artifact_get", map[string]any{"artifact_id": id})
		if got == nil {
			return dec, fmt.Errorf("%w artifact_get", errNoAnswer)
		}
		if ok, err := s.artifactReadable(ctx, d, id, got); err != nil || !ok {
			dec = deny(ruleNotVisible, "")
			dec.why = fmt.Sprintf("artifact_ids names %q, which is no artifact device %s can read (none of its agents created it, and no event it can see from another agent refers to it): whoever the event reaches could read it by this reference, so nothing was written (fix: leave it out, or have its creator send it to you in an event first)", id, d.ID)
			return dec, err
		}
	}
	return dec, nil
}

// maxArtifactRefs is how many distinct artifacts one event_append may
// name: each costs refsReadable an artifact_get at the primary (up to 4
// MiB) and perhaps an event scan, which one write of a few KiB must not
// multiply by thousands.
const maxArtifactRefs = 16

// objectAfter is the check made on an answer before it is passed on:
// artifact_get's artifact must be one the caller can read
// (artifactReadable).
func (s *Server) objectAfter(ctx context.Context, d *Device, t catalogue.Tool, args map[string]any, resp []byte) bool {
	if t.Name != "artifact_get" || d.Coordinator {
		return true
	}
	id, _ := args["artifact_id"].(string)
	ok, _ := s.artifactReadable(ctx, d, id, resultOf(resp)) // no answer: not visible (a read, refused, not queued)
	return ok
}

// artifactReadable reports whether the device may read artifact id,
// got being artifact_get's answer for it: one its agent created, or one
// an event it can see, written by another agent, refers to. Such an
// event was written through the gateway by a device that could read the
// artifact then (refsReadable); one written before that check, or
// around the gateway, counts as it is. errNoAnswer when the primary did
// not answer the event look-up.
func (s *Server) artifactReadable(ctx context.Context, d *Device, id string, got map[string]any) (bool, error) {
	art, _ := got["artifact"].(map[string]any)
	if art == nil {
		return false, nil // not found looks the same as not visible
	}
	if by, _ := art["created_by"].(string); d.Grants(by, false) {
		return true, nil
	}
	return s.findEvent(ctx, d, func(e map[string]any) bool {
		// A reference the device wrote itself proves nothing: it could
		// name any id it learnt (found by an attacker pass). Only an
		// event another agent wrote counts.
		if from, _ := e["from_agent"].(string); d.Grants(from, false) {
			return false
		}
		ids, _ := e["artifact_ids"].([]any)
		return slices.Contains(ids, any(id))
	})
}

// hiddenCursorPage is an event_list's answer with its page emptied when
// a cursor (since_event_id, before_event_id) names an event that exists
// (the upstream answered a page) but the device cannot see: the visible
// events after or before it would place the hidden event in the log. A
// cursor that does not exist stays the upstream's error, and one the
// gateway sealed for the device (issued: the arguments that held one) is
// its to read after.
func (s *Server) hiddenCursorPage(ctx context.Context, d *Device, req *rpcRequest, resp []byte, issued []string) []byte {
	m := resultOf(resp)
	if _, ok := m["events"].([]any); !ok || m["error"] != nil {
		return resp
	}
	for _, k := range []string{"since_event_id", "before_event_id"} {
		id, _ := req.Args[k].(string)
		if id == "" || slices.Contains(issued, k) {
			continue
		}
		if _, visible := s.cursorSeen(ctx, d, id); !visible {
			m["events"], m["count"] = []any{}, 0
			return textAnswer(req.rawID(), m)
		}
	}
	return resp
}

// cursorSeen reports whether event id exists (false only when the
// upstream says it is not found) and whether the device can see it, in
// two calls whatever the log's length: the event just before it (newest
// first, before_event_id), then the one after that, which is id's own
// record (real cursors are strict and in append order, whatever the
// timestamps). A release without before_event_id and order (before
// 3.10.0), or a log that answers otherwise, is scanned by findEvent.
func (s *Server) cursorSeen(ctx context.Context, d *Device, id string) (found, visible bool) {
	params, _ := s.eventListParams(ctx) // no answer: nor will findEvent's be (not visible)
	modern := params["before_event_id"] && params["order"]
	probe := map[string]any{"since_event_id": id, "limit": 1}
	if modern {
		probe = map[string]any{"before_event_id": id, "order": "desc", "limit": 1}
	}
	r := s.upstreamResult(ctx, "mempalace_event_list", probe)
	if strings.Contains(fmt.Sprint(r["error"]), "not found") {
		return false, false
	}
	if prev, _ := r["events"].([]any); modern {
		args := map[string]any{"order": "asc", "limit": 1}
		if p, _ := firstOf(prev).(map[string]any); p != nil {
			args["since_event_id"] = p["id"]
		}
		evs, _ := s.upstreamResult(ctx, "mempalace_event_list", args)["events"].([]any)
		if e, _ := firstOf(evs).(map[string]any); e != nil && e["id"] == id {
			return true, eventVisible(d, str(e["to_agent"]), str(e["from_agent"]))
		}
	}
	visible, _ = s.findEvent(ctx, d, func(e map[string]any) bool { return e["id"] == id }) // no answer: not visible
	return true, visible
}

// waitFromEnd moves an event_wait's since_event_id that names an event
// the device cannot see to the log's newest event, so the wait answers
// only what is appended after it, as if that cursor gave nothing to wait
// from: the visible events after the hidden one would place it in the
// log. False when the newest event cannot be asked for (before 3.10.0):
// the wait is then answered empty at once. A cursor that does not exist
// is left for the upstream's error.
func (s *Server) waitFromEnd(ctx context.Context, d *Device, req *rpcRequest) bool {
	id, _ := req.Args["since_event_id"].(string)
	if id == "" {
		return true
	}
	if found, visible := s.cursorSeen(ctx, d, id); !found || visible {
		return true
	}
	if params, _ := s.eventListParams(ctx); !params["order"] { // no answer: answered empty
		return false
	}
	evs, _ := s.upstreamResult(ctx, "mempalace_event_list", map[string]any{"order": "desc", "limit": 1})["events"].([]any)
	last, _ := firstOf(evs).(map[string]any)
	if last == nil || str(last["id"]) == "" {
		return false
	}
	req.Args["since_event_id"] = str(last["id"])
	return true
}

// firstOf is list's first item, or nil.
func firstOf(list []any) any {
	if len(list) == 0 {
		return nil
	}
	return list[0]
}

// findEvent looks for an event the device can see that satisfies want,
// through event_list filtered by each of its agents (as addressee and as
// writer), oldest first, page by page. The filters and the order are
// named as the upstream's own schema names them (eventListParams): from
// 3.10.0 event_list lists newest first unless told order=asc, and from
// 3.11.0 from_agent names the caller and filters nothing (writer does).
// errNoAnswer when the primary did not answer a page or the schema
// (never taken for "no such event").
func (s *Server) findEvent(ctx context.Context, d *Device, want func(map[string]any) bool) (bool, error) {
	params, err := s.eventListParams(ctx)
	if err != nil {
		return false, err
	}
	sender := "from_agent"
	if params["writer"] {
		sender = "writer"
	}
	for _, a := range d.Agents {
		for _, filter := range []string{"to_agent", sender} {
			cursor := ""
			for range scanPages {
				args := map[string]any{filter: a, "limit": 500}
				if params["order"] {
					args["order"] = "asc"
				}
				if cursor != "" {
					args["since_event_id"] = cursor
				}
				page := s.upstreamResult(ctx, "mempalace_event_list", args)
				if page == nil {
					return false, fmt.Errorf("%w event_list", errNoAnswer)
				}
				evs, _ := page["events"].([]any)
				for _, x := range evs {
					if e, ok := x.(map[string]any); ok && eventVisible(d, str(e["to_agent"]), str(e["from_agent"])) && want(e) {
						return true, nil
					}
				}
				if len(evs) < 500 {
					break
				}
				last, _ := evs[len(evs)-1].(map[string]any)
				if cursor, _ = last["id"].(string); cursor == "" {
					break
				}
			}
		}
	}
	return false, nil
}

// eventListParams is the set of parameters the upstream's event_list
// schema lists, read from its tools/list at the first look-up and kept
// until the next Reload (nil, and asked again next time, when the list
// names none: the look-up then names only what every release has).
// errNoAnswer when the primary did not answer the list: which names and
// order the release takes is not known, and a guess misses events.
func (s *Server) eventListParams(ctx context.Context) (map[string]bool, error) {
	s.mu.Lock()
	known := s.eventParams
	s.mu.Unlock()
	if known != nil {
		return known, nil
	}
	_, resp := s.upstreamCall(warmconn.WithReplayable(ctx), []byte(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`))
	if !gjson.GetBytes(resp, "result").IsObject() {
		return nil, fmt.Errorf("%w tools/list", errNoAnswer)
	}
	props := gjson.GetBytes(resp, `result.tools.#(name=="mempalace_event_list").inputSchema.properties`)
	if !props.IsObject() {
		return nil, nil
	}
	known = map[string]bool{}
	props.ForEach(func(k, _ gjson.Result) bool {
		known[k.Str] = true
		return true
	})
	s.mu.Lock()
	s.eventParams = known
	s.mu.Unlock()
	return known, nil
}
