package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/jsondepth"
	"github.com/joakimp/devbox-config/redact"
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
	catalogue.FilterWingCounts: {"total_drawers", "wings", "rooms", "taxonomy", "protocol", "aaak_dialect", "backend", "embedder", "embedding_device", "details", "hint", "sqlite_integrity", "library_versions", "updates", "vector_disabled", "vector_disabled_reason", "hnsw_capacity", "sqlite_integrity_failed", "error", "partial"},
	catalogue.FilterRooms:      {"wing", "rooms", "error"},
	catalogue.FilterDiary:      {"agent", "entries", "total", "showing", "message", "error", "truncated", "notice"},
	catalogue.FilterCheckpoint: {"added", "duplicates", "errors", "diary", "error"},
	catalogue.FilterEvents:     {"events", "count", "timed_out", "note", "error", "truncated", "notice", "total"},
	catalogue.FilterByID:       {"results", "count", "errors", "error", "details", "hint", "backend"},
}

// needsFilter reports whether an answer of t must be cut for d.
func needsFilter(d *Device, t catalogue.Tool) bool {
	switch t.Filter {
	case catalogue.NoFilter:
		return false
	case catalogue.FilterEvents:
		return !d.Coordinator
	case catalogue.FilterWingCounts, catalogue.FilterCheckpoint:
		return !d.readsAll() || !d.Admin // a status, a checkpoint's errors name the primary's topology (cutTopology, cutErrorTopology)
	}
	return !d.readsAll()
}

// answerEnvelope is a tools/call answer as MemPalace sends it: exactly
// one text block, or a JSON-RPC error.
type answerEnvelope struct {
	JSONRPC segjson.RawMessage `json:"jsonrpc"`
	ID      segjson.RawMessage `json:"id"`
	Result  *struct {
		Content []struct {
			Type string             `json:"type"`
			Text segjson.RawMessage `json:"text"`
		} `json:"content"`
		IsError *bool `json:"isError"`
	} `json:"result"`
	Error segjson.RawMessage `json:"error"`
}

// answerKind is what answerText read: a tool's result, a JSON-RPC error
// (passed on as is), or a result MemPalace marked isError (read only as
// unopenedPalace's answer: it is no shape the filters know).
type answerKind int

const (
	answerResult answerKind = iota
	answerRPCError
	answerToolError
)

// answerText is a tools/call answer's one text block, parsed, and its
// kind; an error
// for anything but MemPalace's envelope of exactly one text block holding
// an object or an array (follow_tunnels'). The envelope is decoded into a struct (segmentio's decoder:
// exact-case keys, no unknown ones) and the text is read where it lies
// (gjson), never decoded into maps: on MemPalace's real answers
// (kilobytes of text) that decoding was most of the gateway's added
// latency.
func answerText(resp []byte) (text gjson.Result, kind answerKind, err error) {
	_, body, ok := plainAnswer(resp)
	if !ok {
		var env answerEnvelope
		if jsondepth.Deeper(resp, jsondepth.Max) { // segmentio's decoder reads nesting by recursion
			return text, kind, errUnknownShape
		}
		if _, perr := segjson.Parse(resp, &env, segjson.DisallowUnknownFields|segjson.DontMatchCaseInsensitiveStructFields); perr != nil {
			return text, kind, errUnknownShape
		}
		if env.Result == nil {
			if env.Error != nil {
				return text, answerRPCError, nil
			}
			return text, kind, errUnknownShape
		}
		if env.Result.IsError != nil && *env.Result.IsError {
			kind = answerToolError
		}
		c := env.Result.Content
		if len(c) != 1 || c[0].Type != "text" || len(c[0].Text) < 2 || c[0].Text[0] != '"' {
			return text, kind, errUnknownShape
		}
		var end int
		body, end, ok = unquote(c[0].Text[1:])
		ok = ok && end == len(c[0].Text)-2
	}
	if !ok || !utf8.Valid(body) || !jsondepth.Valid(body) {
		return text, kind, errUnknownShape
	}
	if text = gjson.ParseBytes(body); !text.IsObject() && !text.IsArray() {
		return text, kind, errUnknownShape
	}
	return text, kind, nil
}

// member is one member of an answer object.
type member struct {
	name string
	v    gjson.Result
}

// membersOf is obj's members in their order, read in one pass.
func membersOf(obj gjson.Result) []member {
	ms := make([]member, 0, 8)
	obj.ForEach(func(k, v gjson.Result) bool {
		ms = append(ms, member{k.String(), v})
		return true
	})
	return ms
}

// memberOf is the first member of ms named name.
func memberOf(ms []member, name string) (gjson.Result, bool) {
	for _, m := range ms {
		if m.name == name {
			return m.v, true
		}
	}
	return gjson.Result{}, false
}

// oddKey is the first key of ms that appears twice or is not among
// allowed ("" and false: none): gjson reads the first of two equal keys,
// a client's parser may read the last.
func oddKey(ms []member, allowed []string) (string, bool) {
	for i, m := range ms {
		if !slices.Contains(allowed, m.name) || slices.ContainsFunc(ms[:i], func(o member) bool { return o.name == m.name }) {
			return m.name, true
		}
	}
	return "", false
}

// filterAnswer is the filter step: it cuts an answer to the wings (or
// agents) the device may see, recomputes or removes counts that would
// reveal the rest, and refuses shapes it does not know. A filtered answer
// carries "filtered": true whether or not anything was cut, so the marker
// itself says nothing about other wings. A rebuilt answer goes out under
// id, the request's (what the device's client matches on), whatever id
// the upstream's answer says.
func (s *Server) filterAnswer(ctx context.Context, d *Device, t catalogue.Tool, dec Decision, id json.RawMessage, resp []byte) ([]byte, error) {
	if t.Name == "kg_stats" && d.Trusts != nil && s.prov != nil {
		return s.kgStatsOrigins(d, id, resp)
	}
	cut, ann := needsFilter(d, t), s.annotatorFor(d, t)
	if !cut && ann == nil {
		return s.unopenedOrAsItCame(d, id, resp), nil
	}
	m, kind, err := answerText(resp)
	if err == nil && kind == answerToolError && !unopenedPalace(membersOf(m)) {
		err = errUnknownShape // a tool's own error of another shape, as before
	}
	if err != nil && !cut && d.Trusts == nil {
		return resp, nil // as before origins: nothing to cut, and every record is trusted
	}
	if err != nil {
		return nil, err
	}
	if kind == answerRPCError {
		return resp, nil
	}
	if m.IsArray() && (cut || !t.Records.IsList()) {
		return nil, errUnknownShape
	}
	ms := membersOf(m)
	if (cut || !d.Admin) && unopenedPalace(ms) {
		return s.unopenedAnswer(d, kind, id, m.Raw) // its paths cut, whatever the tool (attack109 F2)
	}
	if _, cli := memberOf(ms, "cli_output"); cli && d.Trusts != nil {
		return nil, errCLIUntrusted
	}
	if !cut {
		text, err := ann.answer(m, ms)
		if err != nil {
			return nil, err
		}
		return rewrap(id, text), nil
	}
	if key, odd := oddKey(ms, knownKeys[t.Filter]); odd {
		return nil, fmt.Errorf("%w (%q unknown, or there twice)", errUnknownShape, key)
	}
	var text []byte
	if t.Filter == catalogue.FilterByID {
		text, err = cutByID(d, dec, m.Raw, ms, ann)
	} else if key, ok := listKey[t.Filter]; ok {
		text, err = cutList(d, t.Filter, dec, ms, len(m.Raw), key, ann)
	} else if text, err = s.filterObject(ctx, d, t, dec, m.Raw); err == nil && ann != nil {
		filtered := gjson.ParseBytes(text)
		text, err = ann.answer(filtered, membersOf(filtered))
	}
	if err != nil {
		return nil, err
	}
	return rewrap(id, text), nil
}

// unopenedPalace reports whether ms is MemPalace's answer to any drawer
// read while it cannot open the palace's drawers (3.11,
// mcp_server/_session.py): "Chroma database missing" before the first
// drawer is filed (an empty room), "Backend open failed" (after a search
// of that empty palace, or a broken one), "No palace found"; with at most
// its details, hint and backend, all text. It names no wing's data.
func unopenedPalace(ms []member) bool {
	if _, odd := oddKey(ms, []string{"error", "details", "hint", "backend"}); odd {
		return false
	}
	for _, m := range ms {
		if m.v.Type != gjson.String {
			return false
		}
	}
	e, _ := memberOf(ms, "error")
	return slices.Contains(unopenedErrors[:], e.Str)
}

// unopenedErrors are MemPalace 3.11's errors for a palace it cannot open
// the drawers of (unopenedPalace, and the byte scan before it): a table,
// read only.
var unopenedErrors = [...]string{"Chroma database missing", "Backend open failed", "No palace found"}

// unopenedOrAsItCame is an answer the filter passes whole to d: as it
// came, unless it is MemPalace's unopenedPalace answer and d is not
// admin: then its paths are cut (unopenedAnswer), whatever the tool
// (attack109 F2: list_rooms, graph_stats, find_tunnels, traverse and
// follow_tunnels named the palace to a device reading every wing). A scan
// of the answer's bytes for the answer's words decides whether to read it.
func (s *Server) unopenedOrAsItCame(d *Device, id json.RawMessage, resp []byte) []byte {
	if d.Admin || !slices.ContainsFunc(unopenedErrors[:], func(e string) bool { return bytes.Contains(resp, []byte(e)) }) {
		return resp
	}
	m, kind, err := answerText(resp)
	if err != nil || kind == answerRPCError || !unopenedPalace(membersOf(m)) {
		return resp
	}
	if out, err := s.unopenedAnswer(d, kind, id, m.Raw); err == nil {
		return out
	}
	return resp // MemPalace's answer of an unopened palace that would not re-encode: passed as before
}

// unopenedAnswer is MemPalace's unopenedPalace answer text for a device
// d whose answers are cut, under id: the primary's paths cut for a
// device that is not admin, "filtered": true, and isError as MemPalace
// marked it. The edge reads "Chroma database missing" as nothing there
// (refused here as an unknown shape, it held a fresh primary's first
// queued diary entry: attack102 F1).
func (s *Server) unopenedAnswer(d *Device, kind answerKind, id json.RawMessage, text string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("%w: %w", errUnknownShape, err)
	}
	if !d.Admin {
		s.cutTopology(m)
	}
	m["filtered"] = true
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnknownShape, err)
	}
	if out = rewrap(id, out); kind == answerToolError {
		out = append(out[:len(out)-2], `,"isError":true}}`...) // after its content
	}
	return out, nil
}

// rewrap puts an answer's text in MemPalace's envelope, answering id.
func rewrap(id json.RawMessage, text []byte) []byte {
	out := make([]byte, 0, len(text)+len(text)/4+64) // quoting MemPalace's indented text adds about a tenth, its origins more
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, cmp.Or(string(id), "null")...)
	out = append(out, `,"result":{"content":[{"type":"text","text":`...)
	out = appendQuoted(out, text)
	return append(out, `}]}}`...)
}

// listKey names, per filter, the one list of objects it cuts item by item.
var listKey = map[catalogue.Filter]string{catalogue.FilterHits: "results", catalogue.FilterMatches: "matches", catalogue.FilterDrawers: "drawers", catalogue.FilterEvents: "events"}

// cutList keeps the items of the list named key the device may see (each
// with its origin, those it withholds left out: ann) and rebuilds the
// answer (of members ms, size bytes) around them from MemPalace's own
// bytes: every other member as it came, in its order, with the counts
// that would reveal what was cut recomputed or removed, and "filtered":
// true. A missing list becomes an empty one; anything but a list of
// objects there is an unknown shape.
func cutList(d *Device, f catalogue.Filter, dec Decision, ms []member, size int, key string, ann *annotator) ([]byte, error) {
	if _, cli := memberOf(ms, "cli_output"); cli && (dec.Wing == "" || !d.reads(dec.Wing)) {
		return nil, errUnknownShape // the CLI's text over more than one readable wing
	}
	list, listed := memberOf(ms, key)
	if listed && !list.IsArray() {
		return nil, errUnknownShape
	}
	keep := func(r record) (bool, bool) { return visible(d, f, r) }
	alsoIn := func(r record, raw []byte) ([]byte, bool) {
		if f != catalogue.FilterHits || r.alsoIn == 0 {
			return raw, true
		}
		// folded copies, possibly in other wings (twice: one would stay);
		// it cannot fail on an object gjson validated, and a failure
		// keeps the hit whole
		cut, err := sjson.DeleteBytes(raw, "also_in")
		return cut, err == nil && r.alsoIn == 1
	}
	kept, n, err := ann.walk(list, keep, alsoIn)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1, size+len(kept)-len(list.Raw)+64)
	out[0] = '{'
	add := func(k string, raw []byte) {
		if len(out) > 1 {
			out = append(out, ", "...)
		}
		out = append(append(appendQuoted(out, []byte(k)), ": "...), raw...)
	}
	count := []byte(strconv.Itoa(n))
	for _, m := range ms {
		switch name := m.name; {
		case name == key:
			add(name, kept)
		case name == "count" && f != catalogue.FilterMatches:
			add(name, count)
		case name == "is_duplicate" && f == catalogue.FilterMatches:
			add(name, strconv.AppendBool(nil, n > 0))
		case name == "total" && (f != catalogue.FilterDrawers || dec.Wing == ""), name == "total_before_filter" && f == catalogue.FilterHits:
			// a total counting other wings (or other agents' events)
		default:
			add(name, []byte(m.v.Raw))
		}
	}
	if !listed {
		add(key, kept)
	}
	if _, ok := memberOf(ms, "count"); f == catalogue.FilterDrawers && !ok {
		add("count", count)
	}
	if _, ok := memberOf(ms, "is_duplicate"); f == catalogue.FilterMatches && !ok {
		add("is_duplicate", strconv.AppendBool(nil, n > 0))
	}
	add("filtered", []byte("true"))
	return ann.closeAnswer(out), nil
}

// cutByID is get_drawers' answer (raw, of members ms) for a device that
// reads only some wings: results[i] answers dec.asked[i], and a drawer of
// a wing the device cannot read becomes what MemPalace answers for an id
// that names none, {"drawer_id", "error": "Drawer not found: <id>"},
// counted in errors. Every such item, MemPalace's own included, is
// written by notFoundItem, so no byte tells a cut drawer from a missing
// one; an item saying another failure (an id MemPalace could not read)
// could be of any wing, and refuses the answer. The device's drawers
// carry their origins, and those it withholds are left out as from a
// device that reads every wing (count recounted, untrusted_withheld). An
// answer without results (MemPalace's refusal of the list, or a palace
// it cannot open) passes as it is.
func cutByID(d *Device, dec Decision, raw string, ms []member, ann *annotator) ([]byte, error) {
	list, listed := memberOf(ms, "results")
	if !listed {
		return []byte(raw), nil
	}
	items := list.Array()
	if !list.IsArray() || len(items) != len(dec.asked) {
		return nil, errUnknownShape
	}
	names := ann.keyNames()
	out := make([]byte, 1, len(list.Raw)+len(list.Raw)/4+64)
	out[0] = '['
	kept, cut := 0, 0
	for i, it := range items {
		if !it.IsObject() {
			return nil, errUnknownShape
		}
		r := readRecord(it, names)
		id, _ := dec.asked[i].(string)
		mark := len(out)
		if kept > 0 {
			out = append(out, ", "...)
		}
		missing := r.failed || !d.reads(r.wing)
		switch {
		case r.twice, missing && id == "":
			return nil, errUnknownShape
		case r.failed && (it.Get("drawer_id").Str != id || it.Get("error").Str != "Drawer not found: "+id):
			return nil, errUnknownShape // another failure, of a drawer whose wing nothing says
		case missing:
			out = notFoundItem(out, id)
			if !r.failed {
				cut++
			}
		case ann == nil:
			out = append(out, it.Raw...)
		default:
			var keep bool
			var err error
			if out, keep, err = ann.item(out, it, r); err != nil {
				return nil, err
			} else if !keep {
				ann.withheld++
				out = out[:mark]
				continue
			}
		}
		kept++
	}
	out = append(out, ']')
	return byIDAnswer(raw, ms, out, len(list.Raw), kept, cut, ann)
}

// byIDAnswer is cutByID's answer: ms with results, kept items of which
// the answer still holds (the count, when some were withheld) and cut more
// errors (a drawer of an unreadable wing, answered as missing).
func byIDAnswer(raw string, ms []member, results []byte, listLen, kept, cut int, ann *annotator) ([]byte, error) {
	answer := make([]byte, 1, len(raw)+len(results)-listLen+64)
	answer[0] = '{'
	for _, m := range ms {
		v := []byte(m.v.Raw)
		switch m.name {
		case "results":
			v = results
		case "count":
			if ann != nil && ann.withheld > 0 {
				v = strconv.AppendInt(nil, int64(kept), 10)
			}
		case "errors":
			if m.v.Type != gjson.Number {
				return nil, errUnknownShape
			}
			v = strconv.AppendInt(nil, m.v.Int()+int64(cut), 10)
		}
		if len(answer) > 1 {
			answer = append(answer, ", "...)
		}
		answer = append(append(appendQuoted(answer, []byte(m.name)), ": "...), v...)
	}
	answer = append(answer, `, "filtered": true`...)
	return ann.closeAnswer(answer), nil
}

// notFoundItem appends get_drawers' item for an id that names no drawer.
func notFoundItem(dst []byte, id string) []byte {
	dst = appendQuoted(append(dst, `{"drawer_id": `...), []byte(id))
	dst = appendQuoted(append(dst, `, "error": `...), []byte("Drawer not found: "+id))
	return append(dst, '}')
}

// visible reports whether the device may see an item of a cut list (r):
// a hit, match or drawer of a readable wing, an event eventVisible keeps.
// ok is false when a member it decides by appears twice (gjson reads the
// first, a client's parser may read the last).
func visible(d *Device, f catalogue.Filter, r record) (keep, ok bool) {
	if r.twice {
		return false, false
	}
	if f == catalogue.FilterEvents {
		return eventVisible(d, r.to, r.from), true
	}
	return d.reads(r.wing), true
}

// cutTopology drops from a status answer what names the primary's host,
// for a device that is not admin: the palace's directory and database
// (sqlite_integrity's palace and sqlite_path) and the embedder
// (embedding_device, embedder: an openai-compat one is described by its
// endpoint's URL), and cuts the URLs and paths out of every other string
// in it (cutPaths): a palace that did not open says why, naming
// its paths, and so do sqlite_integrity's reason (attack69 F1: "no
// quick_check ran: /srv/.../chroma.sqlite3 does not exist"), check_error
// and errors, and library_versions' unreadable. The palace's directory
// is learnt from the answer first, so that it is cut whole; an answer
// naming a path it does not hold is cut by what is known now (a path
// not known is cut up to its first space) while the primary is asked in
// the background (relearnPalace), for the answers after it.
func (s *Server) cutTopology(m map[string]any) {
	delete(m, "embedding_device")
	delete(m, "embedder")
	if integrity, ok := m["sqlite_integrity"].(map[string]any); ok {
		s.learnPalace(integrity)
		delete(integrity, "palace")
		delete(integrity, "sqlite_path")
	}
	// A string naming a path or URL but not the palace directory known
	// (or with none known): the primary may have started after the
	// gateway, or again on another palace (attack75 F2).
	dir := s.palace.Load()
	other := false
	cutStrings(m, func(text string) string {
		cut := s.cutPaths(text)
		if cut != text && (dir == nil || !strings.Contains(text, strings.TrimRight(*dir, "/"))) {
			other = true
		}
		return cut
	})
	if other {
		s.relearnPalace()
	}
}

// learnPalace keeps the palace directory a sqlite_integrity names (its
// palace: MemPalace 3.11's status and /statusz), for cutPaths.
func (s *Server) learnPalace(integrity map[string]any) {
	if dir, ok := integrity["palace"].(string); ok && dir != "" {
		s.palace.Store(&dir)
	}
}

// cutPaths is text without the primary's URLs and paths
// (redact.Topology), its palace directory, when known, cut whole.
func (s *Server) cutPaths(text string) string {
	if dir := s.palace.Load(); dir != nil {
		return redact.Topology(text, *dir)
	}
	return redact.Topology(text)
}

// cutStrings is v with every string in it, at any depth, cut; object keys
// (wings, rooms) are kept.
func cutStrings(v any, cut func(string) string) any {
	switch x := v.(type) {
	case string:
		return cut(x)
	case map[string]any:
		for k, e := range x {
			x[k] = cutStrings(e, cut)
		}
	case []any:
		for i, e := range x {
			x[i] = cutStrings(e, cut)
		}
	}
	return v
}

// cutErrorTopology cuts the primary's URLs and paths (cut) from what an
// answer says of its failures: its error, details, hint and message, and
// each of its errors' (a checkpoint's item whose embedding failed names
// the embedder's URL).
func cutErrorTopology(m map[string]any, cut func(string) string) {
	for _, k := range []string{"error", "details", "hint", "message"} {
		if v, ok := m[k].(string); ok {
			m[k] = cut(v)
		}
	}
	errs, _ := m["errors"].([]any)
	for _, e := range errs {
		if em, ok := e.(map[string]any); ok {
			cutErrorTopology(em, cut)
		}
	}
}

// cutWingCounts cuts a wing-counts answer (status, list_wings,
// get_taxonomy) to what d may see: the primary's topology for a device
// that is not admin, and the counts of the wings it does not read.
func (s *Server) cutWingCounts(ctx context.Context, d *Device, m map[string]any) {
	if !d.Admin {
		s.cutTopology(m)
	}
	if d.readsAll() {
		return
	}
	total := 0.0
	for _, key := range []string{"wings", "taxonomy"} {
		if ws, ok := m[key].(map[string]any); ok {
			for w, n := range ws {
				if !d.reads(w) {
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
}

// filterObject is the filter step for the answers that are not one list:
// wing counts (and a status's topology), room counts, a diary, a
// checkpoint's duplicates.
func (s *Server) filterObject(ctx context.Context, d *Device, t catalogue.Tool, dec Decision, text string) ([]byte, error) {
	var m map[string]any
	if json.Unmarshal([]byte(text), &m) != nil {
		return nil, errUnknownShape
	}
	readable := func(w any) bool { s, _ := w.(string); return d.reads(s) }
	byWing := func(h map[string]any) bool { return readable(h["wing"]) }
	switch t.Filter {
	case catalogue.FilterWingCounts:
		s.cutWingCounts(ctx, d, m)
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
		if !d.Admin {
			cutErrorTopology(m, s.cutPaths)
		}
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
	default:
		return nil, errUnknownShape
	}
	m["filtered"] = true
	return json.MarshalIndent(m, "", "  ")
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
func eventVisible(d *Device, to, from string) bool {
	if d.Coordinator {
		return true
	}
	return to == "*" || (to != "" && slices.Contains(d.Agents, to)) || (from != "" && slices.Contains(d.Agents, from))
}

// readableRooms recomputes room counts over the wings a device may read,
// from the upstream's wing -> room -> count taxonomy.
func (s *Server) readableRooms(ctx context.Context, d *Device) map[string]any {
	tax, _ := s.upstreamResult(ctx, "mempalace_get_taxonomy", map[string]any{})["taxonomy"].(map[string]any)
	rooms := map[string]any{}
	for wing, rs := range tax {
		if !d.reads(wing) {
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
