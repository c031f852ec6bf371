package catalogue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Lane is the outbox's sending line a write takes: palace writes one at
// a time to the single-writer primary, coordination writes on their own
// line (MemPalace serves the logstream tools without its write lock), so
// an event never waits behind a slow drawer.
type Lane string

const (
	PalaceLane       Lane = "palace"
	CoordinationLane Lane = "coordination"
)

func (l Lane) String() string { return string(l) }

// Lane is the record's sending line.
func (t Tool) Lane() Lane {
	if t.Route == CoordinationWrite {
		return CoordinationLane
	}
	return PalaceLane
}

// CausalKeys are the objects a write touches, as keys: the outbox sends
// the writes of one key in the order they were made, and a write that
// cannot be sent (dead, in doubt, backing off) holds back only the writes
// that share a key with it. Writes with no key in common are independent.
//
//	add_drawer        drawer:<its id, as MemPalace computes it>, source:<source_file>
//	update_drawer     drawer:<drawer_id>
//	delete_drawer     drawer:<drawer_id>
//	delete_drawers    drawer:<each of drawer_ids>
//	delete_by_source  source:<source_file>  (orders with every drawer of that source)
//	checkpoint        each item's drawer (and source) key, and its diary's key
//	diary_write       diary:<wing>  (one wing's entries in order: look-ups count them)
//	kg_add, kg_invalidate, kg_supersede
//	                  fact:<subject>/<predicate>, normalised as MemPalace ids them
//	create_tunnel     tunnel:<source wing/room>/<target wing/room>
//	event_append, patch_submit
//	                  event:<correlation_id> (a reply orders after what it answers);
//	                  none without one
//	event_ack         event:<event_id> (after the event's other replies)
//	artifact_put, task_create
//	                  none: each stands alone
//	a tool the catalogue does not know
//	                  tool:<name> (all its calls in order: nothing is known of them)
func (t Tool) CausalKeys(args map[string]any) []string {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	var keys []string
	add := func(prefix, v string) {
		if v != "" {
			keys = append(keys, prefix+":"+v)
		}
	}
	drawer := func(a map[string]any) {
		add("drawer", DrawerID(str(a, "wing"), str(a, "room"), str(a, "content")))
		add("source", str(a, "source_file"))
	}
	switch t.Name {
	case "add_drawer":
		drawer(args)
	case "update_drawer", "delete_drawer":
		add("drawer", str(args, "drawer_id"))
		add("diary", DiaryEntryWing(str(args, "drawer_id")))
	case "delete_drawers":
		ids, _ := args["drawer_ids"].([]any)
		for _, id := range ids {
			s, _ := id.(string)
			add("drawer", s)
			add("diary", DiaryEntryWing(s))
		}
	case "delete_by_source":
		add("source", str(args, "source_file"))
	case "checkpoint":
		items, _ := args["items"].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				drawer(m)
			}
		}
		if d, ok := args["diary"].(map[string]any); ok {
			add("diary", DiaryWingFor(d))
		}
	case "diary_write":
		add("diary", DiaryWingFor(args))
	case "kg_add", "kg_invalidate", "kg_supersede":
		add("fact", EntityID(str(args, "subject"))+"/"+PredicateID(str(args, "predicate")))
	case "create_tunnel":
		add("tunnel", str(args, "source_wing")+"/"+str(args, "source_room")+"/"+str(args, "target_wing")+"/"+str(args, "target_room"))
	case "event_append", "patch_submit":
		add("event", str(args, "correlation_id"))
	case "event_ack":
		add("event", str(args, "event_id"))
	case "artifact_put", "task_create":
	default:
		if !t.Known() {
			add("tool", t.Name)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// DrawerID is the id MemPalace gives a drawer filed over MCP (ids.py
// make_drawer_id_from_content, recipe v3): drawer_<wing>_<room>_ and the
// first 24 hex digits of the length-prefixed sha256 of wing, room and
// content (lengths in code points, the bytes hashed UTF-8).
func DrawerID(wing, room, content string) string {
	return fmt.Sprintf("drawer_%s_%s_%s", wing, room, IDHash(wing, room, content)[:24])
}

// DrawerOfRow is the drawer a duplicate match's id names: MemPalace
// matches rows, and a drawer longer than one chunk is one row per chunk,
// {drawer_id}_chunk_{index:06d} (3.11.0's tools_write.py). Drawer ids end
// in a hex hash, never in that suffix; any other id is returned as it is.
func DrawerOfRow(id string) string {
	i := strings.LastIndex(id, "_chunk_")
	if i <= 0 {
		return id
	}
	if n := id[i+len("_chunk_"):]; len(n) < 6 || len(n) >= 24 || strings.Trim(n, "0123456789") != "" { // 24: a drawer's own hash in a room named chunk
		return id
	}
	return id[:i]
}

// TunnelID is the id MemPalace gives a tunnel between two rooms
// (palace_graph.py _canonical_tunnel_id): the first 16 hex digits of the
// sha256 of the two "wing/room" endpoints (names stripped), sorted,
// joined by "↔"; the same for either direction.
func TunnelID(sourceWing, sourceRoom, targetWing, targetRoom string) string {
	ends := []string{SanitizedName(sourceWing) + "/" + SanitizedName(sourceRoom), SanitizedName(targetWing) + "/" + SanitizedName(targetRoom)}
	slices.Sort(ends)
	sum := sha256.Sum256([]byte(ends[0] + "↔" + ends[1]))
	return hex.EncodeToString(sum[:])[:16]
}

// IDHash is MemPalace's id hash (ids.py): the hex sha256 of
// "".join(f"{len(p)}:{p}"), lengths in code points.
func IDHash(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%d:%s", utf8.RuneCountInString(p), p)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// EntityID is how MemPalace's knowledge graph ids a subject or object:
// stripped (sanitize_kg_value), lower-cased (PythonLower), spaces to
// underscores, apostrophes dropped.
func EntityID(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(PythonLower(SanitizedName(name)), " ", "_"), "'", "")
}

// PredicateID is how it ids a predicate: stripped (sanitize_name),
// lower-cased (PythonLower), spaces to underscores.
func PredicateID(p string) string {
	return strings.ReplaceAll(PythonLower(SanitizedName(p)), " ", "_")
}

// PythonLower is Python's str.lower(): Go's strings.ToLower but for the
// two cases Python takes from SpecialCasing.txt (no language's rules):
// İ (U+0130) lowers to i and a combining dot above (U+0307), and Σ to
// the final ς at the end of a word (Final_Sigma: after a cased letter,
// and not before one, case-ignorable characters skipped both ways).
func PythonLower(s string) string {
	if !strings.Contains(s, "\u0130") && !strings.Contains(s, "\u03a3") { // ContainsAny reads s rune by rune: 0.6 µs a 55-byte predicate, over ten times this
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch r {
		case '\u0130':
			b.WriteString("i\u0307")
		case '\u03a3':
			if cased(rs[:i], -1) && !cased(rs[i+1:], 1) {
				b.WriteRune('\u03c2')
			} else {
				b.WriteRune('\u03c3')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// cased reports whether the first character of rs, read in direction dir
// (1 forward, -1 backward) and past case-ignorable ones, is cased.
func cased(rs []rune, dir int) bool {
	i, end := 0, len(rs)
	if dir < 0 {
		i, end = len(rs)-1, -1
	}
	for ; i != end; i += dir {
		r := rs[i]
		if !caseIgnorable(r) {
			return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
		}
	}
	return false
}

// caseIgnorable is Unicode's Case_Ignorable: Mn, Me, Cf, Lm, Sk, and
// Word_Break MidLetter, MidNumLet and Single_Quote.
func caseIgnorable(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) ||
		strings.ContainsRune(":\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a.\u2018\u2019\u2024\ufe52\uff07\uff0e'", r)
}

// EntrySuffix is the content half of a diary entry's id: the first 12 hex
// digits of sha256(entry), not length-prefixed (RFC 001 §7.6).
func EntrySuffix(entry string) string {
	sum := sha256.Sum256([]byte(entry))
	return hex.EncodeToString(sum[:])[:12]
}

// previewLen is the most characters of a drawer's text list_drawers'
// content_preview holds whole (a longer text is cut to it and "...").
const previewLen = 200

// ListedEntrySuffix is EntrySuffix of the text of the diary entry a
// list_drawers row lists, by which equal entries are counted (known
// false: its text must be read whole, get_drawer). The row's preview is
// the whole text when it holds 200 characters or fewer; a longer text's
// hash is its id's suffix, unless an update_drawer changed the text (its
// metadata's last_modified is not its filed_at): MemPalace keeps an
// entry's first id, whose suffix hashes the text it was filed with
// (attack99 F9). ok is false for a row that is no diary entry.
func ListedEntrySuffix(row map[string]any) (suffix string, known, ok bool) {
	id, _ := row["drawer_id"].(string)
	_, idSuffix, ok := DiaryEntryID(id)
	preview, _ := row["content_preview"].(string)
	meta, _ := row["metadata"].(map[string]any)
	modified, _ := meta["last_modified"].(string)
	filed, _ := meta["filed_at"].(string)
	switch {
	case !ok:
		return "", false, false
	case preview != "" && utf8.RuneCountInString(preview) <= previewLen:
		return EntrySuffix(preview), true, true
	case modified == "" || modified == filed:
		return idSuffix, true, true
	}
	return "", false, true
}

// DiaryEntryWing is the wing a diary entry's id names ("" for any other
// id): an edit or delete of the entry waits behind the writes of that
// wing's diary (the entry's own, whose answer names its copy on the
// primary, among them).
func DiaryEntryWing(id string) string {
	if _, _, ok := DiaryEntryID(id); !ok {
		return ""
	}
	return id[len("diary_") : len(id)-len("20060102_150405000000")-12-2]
}

// DiaryEntryID splits a diary entry's id (diary_<wing>_<YYYYmmdd_HHMMSSffffff>_<suffix>)
// into its timestamp, on the primary's own clock and in an order that
// sorts as text, and its content suffix. ok is false for any other id.
func DiaryEntryID(id string) (stamp, suffix string, ok bool) {
	const stampLen, suffixLen = len("20060102_150405000000"), 12
	n := len(id)
	if n < stampLen+suffixLen+2 || id[n-suffixLen-1] != '_' || id[n-suffixLen-stampLen-2] != '_' || !strings.HasPrefix(id, "diary_") {
		return "", "", false
	}
	stamp, suffix = id[n-suffixLen-stampLen-1:n-suffixLen-1], id[n-suffixLen:]
	for i := 0; i < len(stamp); i++ {
		if c := stamp[i]; !(c >= '0' && c <= '9' || i == 8 && c == '_') {
			return "", "", false
		}
	}
	for i := 0; i < len(suffix); i++ {
		if c := suffix[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", "", false
		}
	}
	return stamp, suffix, true
}

// MaxBulkIDs is the most ids one get_drawers or delete_drawers call
// carries (MemPalace 3.11.0's cap): callers send longer lists in batches
// of it.
const MaxBulkIDs = 500

// BulkIDsRefusal is MemPalace 3.11.0's refusal of a bulk call's
// drawer_ids (mcp_server/tools_write.py, _bulk_ids_error; verb: "fetch"
// for get_drawers, "delete" for delete_drawers), "" for a list it takes:
// 1 to MaxBulkIDs ids.
func BulkIDsRefusal(ids any, verb string) string {
	l, ok := ids.([]any)
	switch {
	case !ok:
		return "drawer_ids must be a list of drawer IDs"
	case len(l) == 0:
		return "drawer_ids must not be empty"
	case len(l) > MaxBulkIDs:
		return fmt.Sprintf("drawer_ids holds %d ids, but the bulk %s accepts at most %d per call", len(l), verb, MaxBulkIDs)
	}
	return ""
}

// EventFound is how the edge's outbox and the gateway find on the primary
// the event a coordination write made when its answer was lost (t.Replay
// EventLookup or AckLookup): the event_list filter, the sender's events
// since a quarter hour before made (when the write was made; the primary
// stamps created_at itself, so with room for clock skew), and
// whether a listed event is it. An EventLookup write's event carries its
// op id as metadata.edge_op_id; an ack has no metadata to carry one, so it
// is this sender's ack of the same event with the same status and body
// (a sender may ack one event more than once). The sender is checked on
// each event: MemPalace 3.11 lists every sender's events whatever
// from_agent says. ok false: nothing can find it (no op id, another
// tool).
func EventFound(t Tool, args map[string]any, opID string, made time.Time) (filter map[string]any, is func(ev map[string]any) bool, ok bool) {
	arg := func(k string) string { s, _ := args[k].(string); return s }
	from := arg("from_agent")
	since := made.Add(-15 * time.Minute).UTC().Format("2006-01-02T15:04:05Z")
	filter = map[string]any{"from_agent": from, "since_created_at": since, "limit": 500}
	var match func(ev, meta map[string]any) bool
	switch {
	case t.Replay == AckLookup:
		filter["type"] = "event.ack"
		match = func(ev, meta map[string]any) bool {
			return meta["ack_of"] == arg("event_id") && (arg("status") == "" || ev["status"] == arg("status")) && (arg("body") == "" || ev["body"] == arg("body"))
		}
	case t.Replay == EventLookup && opID != "":
		filter["stream"] = arg("stream")
		match = func(_, meta map[string]any) bool { return meta["edge_op_id"] == opID }
	default:
		return nil, nil, false
	}
	return filter, func(ev map[string]any) bool {
		meta, _ := ev["metadata"].(map[string]any)
		return meta != nil && ev["from_agent"] == from && match(ev, meta)
	}, true
}
