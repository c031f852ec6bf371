package fakepalace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/catalogue"
)

var eventTypeRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

var eventStatuses = map[string]bool{"open": true, "claimed": true, "ready": true, "applied": true, "blocked": true, "failed": true, "superseded": true}

var artifactKinds = map[string]bool{"patch": true, "file": true, "log": true, "json": true, "note": true}

// routing is MemPalace's _sanitize_routing: v stripped as Python's
// str.strip() strips (a blank-only value refused), then checked.
func routing(field, v string, required bool) (string, error) {
	if v == "" {
		if required {
			return "", fmt.Errorf("%s must be a non-empty string", field)
		}
		return "", nil
	}
	if v = catalogue.SanitizedName(v); v == "" {
		return "", fmt.Errorf("%s must be a non-empty string", field)
	}
	if utf8.RuneCountInString(v) > 256 {
		return "", fmt.Errorf("%s exceeds maximum length of 256 characters", field)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%s contains control characters", field)
		}
	}
	return v, nil
}

// appendEvent validates and appends; there is no idempotency guard (RFC 003
// §7.1): two identical calls make two events.
func (pl *Palace) appendEvent(a args) (*Event, error) {
	typ := catalogue.SanitizedName(a.str("type")) // MemPalace's _sanitize_event_type strips it first
	if typ == "" {
		return nil, fmt.Errorf("type must be a non-empty string")
	}
	a["type"] = typ
	if !eventTypeRE.MatchString(typ) {
		return nil, fmt.Errorf("type='%s' is not a valid event type (lowercase letters, digits, '.', '_', '-'; max 64 chars)", typ)
	}
	for _, f := range []string{"stream", "room", "from_agent", "to_agent", "correlation_id", "branch", "base_commit", "topic"} {
		v, err := routing(f, a.str(f), f == "stream" || f == "room" || f == "from_agent")
		if err != nil {
			return nil, err
		}
		if v != "" {
			a[f] = v // filed stripped, as MemPalace files it
		}
	}
	if st := a.str("status"); st != "" && !eventStatuses[st] {
		return nil, fmt.Errorf("status='%s' is not one of: applied, blocked, claimed, failed, open, ready, superseded", st)
	}
	body := a.str("body")
	if strings.ContainsRune(body, 0) {
		return nil, fmt.Errorf("body contains null bytes")
	}
	if len(body) > 256*1024 {
		return nil, fmt.Errorf("body is %d bytes; maximum is %d bytes", len(body), 256*1024)
	}
	meta := a.object("metadata")
	if b, _ := json.Marshal(meta); len(b) > 64*1024 {
		return nil, fmt.Errorf("metadata exceeds maximum size of %d bytes", 64*1024)
	}
	ids := []string{}
	if raw, ok := a["artifact_ids"].([]any); ok {
		for _, x := range raw {
			id, _ := x.(string)
			if pl.st.Artifacts[id] == nil {
				return nil, fmt.Errorf("artifact_ids: unknown artifact %q", id)
			}
			ids = append(ids, id)
		}
	}
	pl.ensureReplica()
	seq := int64(len(pl.st.Events) + 1)
	now := pl.now().UTC()
	e := &Event{
		ID: "evt_" + now.Format("20060102T150405") + "_" + randHex(6), Seq: seq, OriginReplica: pl.st.ReplicaID, OriginSeq: seq,
		HLC:  fmt.Sprintf("%013d-%06x-%s", now.UnixMilli(), seq, pl.st.ReplicaID),
		Type: typ, Stream: a.str("stream"), Room: a.str("room"), FromAgent: a.str("from_agent"),
		ToAgent: ptr(a.str("to_agent")), CorrelationID: ptr(a.str("correlation_id")), Branch: ptr(a.str("branch")), BaseCommit: ptr(a.str("base_commit")),
		Status: ptr(a.str("status")), Topic: ptr(a.str("topic")), ArtifactIDs: ids, Body: body, CreatedAt: now.Format("2006-01-02T15:04:05Z"), Metadata: meta,
	}
	pl.st.Events = append(pl.st.Events, e)
	pl.wakeWaiters()
	return e, nil
}

func (pl *Palace) ensureReplica() {
	if pl.st.ReplicaID == "" {
		pl.st.ReplicaID = "rep_" + randHex(16)
	}
}

func (pl *Palace) eventAppend(a args) any {
	e, err := pl.appendEvent(a)
	if err != nil {
		return fail("%v", err) // a rejected append is an HTTP 200 (RFC 003 §7.6)
	}
	return map[string]any{"success": true, "event": e}
}

// fromAgentNote is 3.10+'s answer to a from_agent on an event read: it
// names the caller, it does not filter (writer does).
const fromAgentNote = "from_agent is your identity and does not filter event_list/event_wait. Filter by who wrote an event with writer=<agent>; for your inbox use to_agent=<you>."

// eventIndex is the position of event id in the log, or an error naming
// the cursor field.
func (pl *Palace) eventIndex(field, id string) (int, error) {
	i := slices.IndexFunc(pl.st.Events, func(e *Event) bool { return e.ID == id })
	if i < 0 {
		return 0, fmt.Errorf("%s '%s' not found", field, id)
	}
	return i, nil
}

// filterEvents applies event_list's filters in append order. to_agent
// also matches "*"; writer filters by who wrote an event (from_agent does
// not filter: it is the caller's identity).
func (pl *Palace) filterEvents(a args) ([]*Event, error) {
	start, end := 0, len(pl.st.Events)
	if since := a.str("since_event_id"); since != "" {
		i, err := pl.eventIndex("since_event_id", since)
		if err != nil {
			return nil, err
		}
		start = i + 1
	}
	if before := a.str("before_event_id"); before != "" {
		i, err := pl.eventIndex("before_event_id", before)
		if err != nil {
			return nil, err
		}
		end = i
	}
	eq := func(k string, v *string) bool { return a.str(k) == "" || (v != nil && *v == a.str(k)) }
	var out []*Event
	for _, e := range pl.st.Events[start:max(start, end)] {
		if a.str("stream") != "" && e.Stream != a.str("stream") || a.str("room") != "" && e.Room != a.str("room") || a.str("type") != "" && e.Type != a.str("type") {
			continue
		}
		if who := pl.writerFilter(a); who != "" && e.FromAgent != who {
			continue
		}
		if to := a.str("to_agent"); to != "" && (e.ToAgent == nil || (*e.ToAgent != to && *e.ToAgent != "*")) {
			continue
		}
		if !eq("correlation_id", e.CorrelationID) || !eq("status", e.Status) || !eq("topic", e.Topic) {
			continue
		}
		if sc := a.str("since_created_at"); sc != "" && e.CreatedAt < sc {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// writerFilter is whose events a read keeps: writer from 3.11.0 (where
// from_agent names the caller), from_agent before.
func (pl *Palace) writerFilter(a args) string {
	if atLeast(pl.opts.Version, "3.11.0") {
		return a.str("writer")
	}
	return a.str("from_agent")
}

// noted adds 3.11's note to an event read given a from_agent.
func (pl *Palace) noted(a args, m map[string]any) map[string]any {
	if atLeast(pl.opts.Version, "3.11.0") && a.str("from_agent") != "" && a.str("writer") == "" {
		m["note"] = fromAgentNote
	}
	return m
}

// eventList lists oldest first before 3.10.0; from 3.10.0 newest first
// unless a since_event_id cursor is given, and "order" overrides.
func (pl *Palace) eventList(a args) any {
	order := "desc"
	if a.str("since_event_id") != "" || !atLeast(pl.opts.Version, "3.10.0") {
		order = "asc"
	}
	if a.has("order") {
		order = strings.ToLower(strings.TrimSpace(a.str("order")))
	}
	if order != "asc" && order != "desc" {
		return map[string]any{"error": fmt.Sprintf("order='%s' must be 'asc' or 'desc'", a.str("order"))}
	}
	evs, err := pl.filterEvents(a)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	limit := clamp(a.int("limit", 50), 1, 500)
	if order == "desc" {
		evs = slices.Clone(evs)
		slices.Reverse(evs)
	}
	evs = evs[:min(len(evs), limit)]
	out := make([]any, 0, len(evs))
	for _, e := range evs {
		if a.boolean("preview", false) && utf8.RuneCountInString(e.Body) > 200 {
			c := *e
			c.Body = string([]rune(e.Body)[:200])
			b, _ := json.Marshal(c)
			var m map[string]any
			json.Unmarshal(b, &m)
			m["body_truncated"], m["body_length"] = true, utf8.RuneCountInString(e.Body)
			out = append(out, m)
			continue
		}
		out = append(out, e)
	}
	return pl.noted(a, map[string]any{"events": out, "count": len(out)})
}

// eventWait long-polls: it releases the palace lock while it waits, so a
// concurrent append is not blocked (the tool is lock-free upstream).
func (pl *Palace) eventWait(a args) any {
	timeout := time.Duration(clamp(a.int("timeout_ms", 60000), 0, 300000)) * time.Millisecond
	deadline := time.Now().Add(timeout)
	for {
		evs, err := pl.filterEvents(a)
		if err != nil {
			return map[string]any{"error": err.Error()}
		}
		if len(evs) > 0 {
			evs = evs[:min(len(evs), clamp(a.int("limit", 50), 1, 500))]
			return pl.noted(a, map[string]any{"timed_out": false, "events": evs, "count": len(evs)})
		}
		left := time.Until(deadline)
		if left <= 0 {
			return pl.noted(a, map[string]any{"timed_out": true, "events": []any{}, "count": 0})
		}
		wake := pl.wake
		pl.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(min(left, time.Second)):
		}
		pl.mu.Lock()
	}
}

func (pl *Palace) eventAck(a args) any {
	i, err := pl.eventIndex("event", a.str("event_id"))
	if err != nil {
		return fail("%v", err)
	}
	target := pl.st.Events[i]
	corr := target.ID
	if target.CorrelationID != nil {
		corr = *target.CorrelationID
	}
	e, err := pl.appendEvent(args{
		"type": "event.ack", "stream": target.Stream, "room": target.Room, "from_agent": a["from_agent"], "to_agent": target.FromAgent,
		"correlation_id": corr, "status": a["status"], "body": a["body"], "topic": a["topic"], "metadata": map[string]any{"ack_of": target.ID},
	})
	if err != nil {
		return fail("%v", err)
	}
	return map[string]any{"success": true, "event": e}
}

func (pl *Palace) putArtifact(a args) (*Artifact, []string, error) {
	kind, content, by := a.str("kind"), a.str("content"), a.str("created_by")
	if !artifactKinds[kind] {
		return nil, nil, fmt.Errorf("kind %q must be one of patch, file, log, json, note", kind)
	}
	if content == "" {
		return nil, nil, fmt.Errorf("content must be non-empty")
	}
	if len(content) > 4*1024*1024 {
		return nil, nil, fmt.Errorf("content exceeds 4 MiB")
	}
	by, err := routing("created_by", by, true)
	if err != nil {
		return nil, nil, err
	}
	meta := a.object("metadata")
	var warnings []string
	if kind == "patch" {
		if !strings.HasSuffix(content, "\n") {
			warnings = append(warnings, "patch does not end with a newline; the last hunk line may be truncated")
		}
		if strings.Contains(content, "\r\n") {
			warnings = append(warnings, "patch has CRLF line endings")
		}
	}
	pl.ensureReplica()
	now := pl.now().UTC()
	art := &Artifact{ID: "art_" + now.Format("20060102T150405") + "_" + randHex(6), Kind: kind, SHA256: sha256Hex(content), SizeBytes: len(content), Content: content, CreatedBy: by, CreatedAt: now.Format("2006-01-02T15:04:05Z"), OriginReplica: pl.st.ReplicaID, Metadata: meta}
	pl.st.Artifacts[art.ID] = art // always a new row: sha256 is not a dedupe key
	return art, warnings, nil
}

func artifactSummary(a *Artifact, warnings []string) map[string]any {
	m := map[string]any{"id": a.ID, "kind": a.Kind, "sha256": a.SHA256, "size_bytes": a.SizeBytes, "created_by": a.CreatedBy, "created_at": a.CreatedAt, "origin_replica": a.OriginReplica}
	if len(warnings) > 0 {
		m["warnings"] = warnings
	}
	return m
}

func (pl *Palace) artifactPut(a args) any {
	art, warn, err := pl.putArtifact(a)
	if err != nil {
		return fail("%v", err)
	}
	return map[string]any{"success": true, "artifact": artifactSummary(art, warn)}
}

func (pl *Palace) artifactGet(a args) any {
	art := pl.st.Artifacts[a.str("artifact_id")]
	if art == nil {
		return map[string]any{"error": fmt.Sprintf("artifact '%s' not found", a.str("artifact_id"))}
	}
	return map[string]any{"artifact": art}
}

func (pl *Palace) patchSubmit(a args) any {
	art, warn, err := pl.putArtifact(args{"kind": "patch", "content": a["content"], "created_by": a["from_agent"], "metadata": a["metadata"]})
	if err != nil {
		return fail("%v", err)
	}
	room := cmp.Or(a.str("room"), "patches")
	ea := args{"type": "patch.ready", "stream": a["stream"], "room": room, "from_agent": a["from_agent"], "status": "ready", "artifact_ids": []any{art.ID}}
	for _, k := range []string{"to_agent", "correlation_id", "branch", "base_commit", "body", "metadata", "topic"} {
		if v, ok := a[k]; ok {
			ea[k] = v
		}
	}
	e, err := pl.appendEvent(ea)
	if err != nil {
		delete(pl.st.Artifacts, art.ID)
		return fail("%v", err)
	}
	return map[string]any{"success": true, "artifact": artifactSummary(art, warn), "event": e}
}
