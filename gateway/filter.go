package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/joakimp/devbox-config/catalogue"
)

// errUnknownShape: an answer the filter cannot cut with certainty is
// refused rather than passed on.
var errUnknownShape = errors.New("the answer's shape is not one the gateway's filter knows")

// knownKeys are, per filter, the top-level keys of every answer shape the
// reference lists (3.6.0 to dev, error answers and the dev response cap's
// truncation keys included). A key outside the list may carry another
// wing's data in a form the filter does not cut.
var knownKeys = map[catalogue.Filter][]string{
	catalogue.FilterHits: {"query", "filters", "total_before_filter", "results", "date_filter_pool_truncated", "index_recovered", "vector_disabled", "vector_disabled_reason",
		"query_sanitized", "sanitizer", "context_received", "fallback", "fallback_reason", "distinct_results_truncated", "candidates_truncated", "error", "details", "hint", "truncated", "notice", "total", "count",
		"cli_output"}, // 3.9+ cli_compatible: the hits as text; passed only for one readable wing
	catalogue.FilterMatches:    {"is_duplicate", "matches", "vector_disabled", "vector_disabled_reason", "hint", "error"},
	catalogue.FilterDrawers:    {"drawers", "total", "count", "offset", "limit", "error", "truncated", "notice"},
	catalogue.FilterWingCounts: {"total_drawers", "wings", "rooms", "taxonomy", "protocol", "aaak_dialect", "backend", "embedder", "embedding_device", "sqlite_integrity", "library_versions", "updates", "vector_disabled", "vector_disabled_reason", "hnsw_capacity", "sqlite_integrity_failed", "error", "partial"},
	catalogue.FilterRooms:      {"wing", "rooms", "error"},
	catalogue.FilterDiary:      {"agent", "entries", "total", "showing", "message", "error", "truncated", "notice"},
	catalogue.FilterCheckpoint: {"added", "duplicates", "errors", "diary", "error"},
	catalogue.FilterEvents:     {"events", "count", "timed_out", "note", "error", "truncated", "notice", "total"},
}

// needsFilter reports whether an answer of t must be cut for d.
func needsFilter(d *Device, t catalogue.Tool) bool {
	switch t.Filter {
	case catalogue.NoFilter:
		return false
	case catalogue.FilterEvents:
		return !d.Coordinator
	}
	return !d.readsAll()
}

// resultText is a tools/call answer's one text block, parsed: (nil, false)
// for a JSON-RPC error answer (passed on as is), an error for anything
// but MemPalace's envelope of exactly one text block holding an object.
func resultText(resp []byte) (env map[string]any, m map[string]any, err error) {
	if json.Unmarshal(resp, &env) != nil {
		return nil, nil, errUnknownShape
	}
	res, ok := env["result"].(map[string]any)
	if !ok {
		if _, isErr := env["error"]; isErr {
			return env, nil, nil
		}
		return nil, nil, errUnknownShape
	}
	content, _ := res["content"].([]any)
	if len(res) != 1 || len(content) != 1 {
		return nil, nil, errUnknownShape
	}
	block, _ := content[0].(map[string]any)
	text, ok := block["text"].(string)
	if !ok || block["type"] != "text" || len(block) != 2 {
		return nil, nil, errUnknownShape
	}
	if json.Unmarshal([]byte(text), &m) != nil || m == nil {
		return nil, nil, errUnknownShape
	}
	return env, m, nil
}

// filterAnswer is the filter step: it cuts an answer to the wings (or
// agents) the device may see, recomputes or removes counts that would
// reveal the rest, and refuses shapes it does not know. A filtered answer
// carries "filtered": true whether or not anything was cut, so the marker
// itself says nothing about other wings.
func (s *Server) filterAnswer(ctx context.Context, d *Device, t catalogue.Tool, dec Decision, resp []byte) ([]byte, error) {
	if !needsFilter(d, t) {
		return resp, nil
	}
	env, m, err := resultText(resp)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return resp, nil // a JSON-RPC error
	}
	for k := range m {
		if !slices.Contains(knownKeys[t.Filter], k) {
			return nil, fmt.Errorf("%w (%q)", errUnknownShape, k)
		}
	}
	readable := func(w any) bool { s, _ := w.(string); return match(d.Read, s) }
	byWing := func(h map[string]any) bool { return readable(h["wing"]) }
	switch t.Filter {
	case catalogue.FilterHits:
		if _, ok := m["cli_output"]; ok && (dec.Wing == "" || !readable(dec.Wing)) {
			return nil, errUnknownShape // the CLI's text over more than one readable wing
		}
		if err := cut(m, "results", byWing); err != nil {
			return nil, err
		}
		for _, h := range m["results"].([]any) {
			delete(h.(map[string]any), "also_in") // folded copies, possibly in other wings
		}
		delete(m, "total_before_filter")
		delete(m, "total")
		if _, ok := m["count"]; ok {
			m["count"] = len(m["results"].([]any))
		}
	case catalogue.FilterMatches:
		if err := cut(m, "matches", byWing); err != nil {
			return nil, err
		}
		m["is_duplicate"] = len(m["matches"].([]any)) > 0
	case catalogue.FilterDrawers:
		if err := cut(m, "drawers", byWing); err != nil {
			return nil, err
		}
		m["count"] = len(m["drawers"].([]any))
		if dec.Wing == "" {
			delete(m, "total") // a palace-wide total counts every wing
		}
	case catalogue.FilterWingCounts:
		total := 0.0
		for _, key := range []string{"wings", "taxonomy"} {
			if ws, ok := m[key].(map[string]any); ok {
				for w, n := range ws {
					if !readable(w) {
						delete(ws, w)
					} else if f, ok := n.(float64); ok {
						total += f
					}
				}
			}
		}
		if _, ok := m["total_drawers"]; ok {
			m["total_drawers"] = total
		}
		if _, ok := m["rooms"]; ok {
			m["rooms"] = s.readableRooms(ctx, d)
		}
	case catalogue.FilterRooms:
		if dec.Wing == "" {
			m["rooms"] = s.readableRooms(ctx, d) // recomputed over the readable wings
		}
	case catalogue.FilterDiary:
		// narrow pinned the read to a readable wing: every entry is in it.
		if dec.Wing == "" || !readable(dec.Wing) {
			return nil, errUnknownShape
		}
	case catalogue.FilterCheckpoint:
		dups, _ := m["duplicates"].([]any)
		for _, x := range dups {
			dm, ok := x.(map[string]any)
			if !ok {
				return nil, errUnknownShape
			}
			if err := cut(dm, "matches", byWing); err != nil {
				return nil, err
			}
		}
		m["duplicates"] = append(append([]any{}, dec.found...), dups...) // with the items narrow held back
	case catalogue.FilterEvents:
		if err := cut(m, "events", func(e map[string]any) bool { return eventVisible(d, e) }); err != nil {
			return nil, err
		}
		if _, ok := m["count"]; ok {
			m["count"] = len(m["events"].([]any))
		}
		delete(m, "total")
	}
	m["filtered"] = true
	text, _ := json.MarshalIndent(m, "", "  ") // values decoded from JSON: they encode
	env["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}
	return json.Marshal(env)
}

// cut keeps the objects of list m[key] that keep approves; a missing list
// stays missing, anything else there is an unknown shape.
func cut(m map[string]any, key string, keep func(map[string]any) bool) error {
	raw, present := m[key]
	if !present {
		m[key] = []any{}
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		return errUnknownShape
	}
	out := []any{}
	for _, x := range list {
		h, ok := x.(map[string]any)
		if !ok {
			return errUnknownShape
		}
		if keep(h) {
			out = append(out, h)
		}
	}
	m[key] = out
	return nil
}

// eventVisible: an event to or from one of the device's agents, or a
// broadcast; every event for a coordinator.
func eventVisible(d *Device, e map[string]any) bool {
	if d.Coordinator {
		return true
	}
	to, _ := e["to_agent"].(string)
	from, _ := e["from_agent"].(string)
	return to == "*" || (to != "" && slices.Contains(d.Agents, to)) || (from != "" && slices.Contains(d.Agents, from))
}

// readableRooms recomputes room counts over the wings a device may read,
// from the upstream's wing -> room -> count taxonomy.
func (s *Server) readableRooms(ctx context.Context, d *Device) map[string]any {
	tax, _ := s.upstreamResult(ctx, "mempalace_get_taxonomy", map[string]any{})["taxonomy"].(map[string]any)
	rooms := map[string]any{}
	for wing, rs := range tax {
		if !match(d.Read, wing) {
			continue
		}
		rm, _ := rs.(map[string]any)
		for room, n := range rm {
			f, _ := n.(float64)
			prev, _ := rooms[room].(float64)
			rooms[room] = prev + f
		}
	}
	return rooms
}
