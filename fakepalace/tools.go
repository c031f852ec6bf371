package fakepalace

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/catalogue"
)

type prop struct {
	name, typ string
	extra     map[string]any
	since     string // the first release that has it ("": all)
}

func p(name, typ string) prop { return prop{name: name, typ: typ} }

func pe(name, typ string, extra map[string]any) prop { return prop{name: name, typ: typ, extra: extra} }

// from marks props that a release added.
func from(release string, ps ...prop) []prop {
	for i := range ps {
		ps[i].since = release
	}
	return ps
}

type tool struct {
	name     string
	desc     string
	props    []prop
	required []string
	mutating bool   // refused with -32003 in read-only mode
	since    string // the first release that serves it ("": all)
	handler  func(pl *Palace, a args) any
}

func (t tool) schema() map[string]any {
	props := map[string]any{}
	for _, pr := range t.props {
		m := map[string]any{"type": pr.typ}
		maps.Copy(m, pr.extra)
		props[pr.name] = m
	}
	return map[string]any{"type": "object", "properties": props, "required": append([]string{}, t.required...)}
}

func (t tool) prop(name string) (prop, bool) {
	i := slices.IndexFunc(t.props, func(pr prop) bool { return pr.name == name })
	if i < 0 {
		return prop{}, false
	}
	return t.props[i], true
}

// tools is the surface the double serves (33 tools; see the contract's
// doubleLacks for the rest of 3.11.0's), schemas per mempalace-surface.md
// §1.1 and §1.3 and 3.11.0's own tools/list, for release version: a tool
// or a prop a later release added is left out.
func tools(version string) []tool {
	ts := slices.DeleteFunc(allTools(), func(t tool) bool { return t.since != "" && !atLeast(version, t.since) })
	for i := range ts {
		ts[i].props = slices.DeleteFunc(ts[i].props, func(pr prop) bool { return pr.since != "" && !atLeast(version, pr.since) })
	}
	return ts
}

// atLeast reports release v >= min (the catalogue's order of releases).
func atLeast(v, min string) bool { return !catalogue.ReleaseAfter(min, v) }

func allTools() []tool {
	str := func(n string) prop { return p(n, "string") }
	obj := func(n string) prop { return p(n, "object") }
	return []tool{
		{name: "mempalace_status", desc: "Palace overview: drawer totals, wing/room counts.", handler: (*Palace).status},
		{name: "mempalace_list_wings", desc: "Wings with drawer counts.", handler: (*Palace).listWings},
		{name: "mempalace_list_rooms", desc: "Rooms (optionally within a wing) with counts.", props: []prop{str("wing")}, handler: (*Palace).listRooms},
		{name: "mempalace_get_taxonomy", desc: "Wing -> room -> count tree.", handler: (*Palace).taxonomy},
		{name: "mempalace_search", desc: "Search drawers by meaning.", props: []prop{
			pe("query", "string", map[string]any{"maxLength": 250}), pe("limit", "integer", map[string]any{"minimum": 1, "maximum": 100}),
			str("wing"), str("room"), str("source_file"), str("since"), str("before"), p("max_distance", "number"), str("context"),
		}, required: []string{"query"}, handler: (*Palace).search},
		{name: "mempalace_check_duplicate", desc: "Near-duplicate check before filing.", props: []prop{str("content"), p("threshold", "number")}, required: []string{"content"}, handler: (*Palace).checkDuplicate},
		{name: "mempalace_add_drawer", desc: "File verbatim content (idempotent by content hash).", props: []prop{str("wing"), str("room"), str("content"), str("source_file"), str("added_by")}, required: []string{"wing", "room", "content"}, mutating: true, handler: (*Palace).addDrawer},
		{name: "mempalace_get_drawer", desc: "Fetch one logical drawer.", props: []prop{str("drawer_id")}, required: []string{"drawer_id"}, handler: (*Palace).getDrawer},
		{name: "mempalace_get_drawers", desc: "Fetch many logical drawers by ID in one call.", props: []prop{pe("drawer_ids", "array", map[string]any{"items": map[string]any{"type": "string"}})}, required: []string{"drawer_ids"}, since: "3.11.0", handler: (*Palace).getDrawers},
		{name: "mempalace_list_drawers", desc: "Page logical drawers.", props: []prop{
			str("wing"), str("room"), str("since"), str("before"), pe("limit", "integer", map[string]any{"minimum": 1, "maximum": 100}), pe("offset", "integer", map[string]any{"minimum": 0}),
		}, handler: (*Palace).listDrawers},
		{name: "mempalace_update_drawer", desc: "Change content and/or wing/room.", props: []prop{str("drawer_id"), str("content"), str("wing"), str("room")}, required: []string{"drawer_id"}, mutating: true, handler: (*Palace).updateDrawer},
		{name: "mempalace_delete_drawer", desc: "Delete one logical drawer (all chunks).", props: []prop{str("drawer_id")}, required: []string{"drawer_id"}, mutating: true, handler: (*Palace).deleteDrawer},
		{name: "mempalace_delete_drawers", desc: "Delete many drawers by ID in one call. Irreversible.", props: []prop{pe("drawer_ids", "array", map[string]any{"items": map[string]any{"type": "string"}})}, required: []string{"drawer_ids"}, mutating: true, since: "3.11.0", handler: (*Palace).deleteDrawers},
		{name: "mempalace_delete_by_source", desc: "Bulk delete by exact source_file (dry-run default).", props: []prop{str("source_file"), p("dry_run", "boolean")}, required: []string{"source_file"}, mutating: true, handler: (*Palace).deleteBySource},
		{name: "mempalace_checkpoint", desc: "Dedup and file many items, then one diary entry.", props: []prop{
			pe("items", "array", map[string]any{"items": map[string]any{"type": "object"}}), obj("diary"), p("dedup_threshold", "number"), str("added_by"),
		}, required: []string{"items"}, mutating: true, handler: (*Palace).checkpoint},
		{name: "mempalace_diary_write", desc: "Append an agent diary entry.", props: []prop{str("agent_name"), str("entry"), str("topic"), str("wing"), str("content")}, required: []string{"agent_name"}, mutating: true, handler: (*Palace).diaryWrite},
		{name: "mempalace_diary_read", desc: "Read the newest diary entries.", props: []prop{str("agent_name"), p("last_n", "integer"), str("wing")}, required: []string{"agent_name"}, handler: (*Palace).diaryRead},
		{name: "mempalace_kg_add", desc: "Add a knowledge-graph triple.", props: []prop{str("subject"), str("predicate"), str("object"), str("valid_from"), str("valid_to"), str("source_closet"), str("source_file"), str("source_drawer_id")}, required: []string{"subject", "predicate", "object"}, mutating: true, handler: (*Palace).kgAdd},
		{name: "mempalace_kg_query", desc: "Facts about an entity.", props: []prop{str("entity"), str("as_of"), str("direction")}, required: []string{"entity"}, handler: (*Palace).kgQuery},
		{name: "mempalace_kg_invalidate", desc: "Close (end-date) a triple.", props: []prop{str("subject"), str("predicate"), str("object"), str("ended")}, required: []string{"subject", "predicate", "object"}, mutating: true, handler: (*Palace).kgInvalidate},
		{name: "mempalace_kg_supersede", desc: "Close the old object and open a new one.", props: []prop{str("subject"), str("predicate"), str("old_object"), str("new_object"), str("at")}, required: []string{"subject", "predicate", "old_object", "new_object"}, mutating: true, handler: (*Palace).kgSupersede},
		{name: "mempalace_kg_timeline", desc: "Chronological facts, paged.", props: append([]prop{str("entity")}, from("3.10.0", pe("limit", "integer", map[string]any{"minimum": 1}), pe("offset", "integer", map[string]any{"minimum": 0}))...), handler: (*Palace).kgTimeline},
		{name: "mempalace_kg_stats", desc: "Knowledge-graph counts.", handler: (*Palace).kgStats},
		{name: "mempalace_mine", desc: "Run a miner in-process.", props: []prop{
			str("source"), pe("mode", "string", map[string]any{"enum": []string{"projects", "convos", "extract"}}), str("wing"), str("agent"), p("limit", "integer"), p("dry_run", "boolean"), pe("extract", "string", map[string]any{"enum": []string{"exchange", "general"}}),
		}, required: []string{"source"}, mutating: true, handler: (*Palace).mine},
		{name: "mempalace_sync", desc: "Prune drawers whose sources vanished (dry-run default).", props: []prop{str("project_dir"), str("wing"), p("apply", "boolean")}, mutating: true, handler: (*Palace).sync},
		{name: "mempalace_reconnect", desc: "Drop caches, reopen the palace.", handler: func(pl *Palace, a args) any { return map[string]any{"success": true, "message": "reconnected"} }},
		{name: "mempalace_hook_settings", desc: "Get or set hook settings.", props: []prop{p("silent_save", "boolean"), p("desktop_toast", "boolean")}, handler: (*Palace).hookSettings},
		{name: "mempalace_event_append", desc: "Append a logstream event (RFC 003).", props: []prop{
			str("type"), str("stream"), str("room"), str("from_agent"), str("to_agent"), str("correlation_id"), str("branch"), str("base_commit"), str("status"), str("body"), obj("metadata"), pe("artifact_ids", "array", map[string]any{"items": map[string]any{"type": "string"}}), str("topic"),
		}, required: []string{"type", "stream", "room", "from_agent"}, mutating: true, handler: (*Palace).eventAppend},
		{name: "mempalace_event_list", desc: "List logstream events (3.10+: newest first without a cursor).", props: slices.Concat([]prop{
			str("stream"), str("room"), str("type"), str("to_agent"), str("from_agent"), str("correlation_id"), str("status"), str("since_event_id"), str("since_created_at"), p("limit", "integer"), p("preview", "boolean"), str("topic"),
		}, from("3.10.0", str("before_event_id"), str("order")), from("3.11.0", str("writer"))), handler: (*Palace).eventList},
		{name: "mempalace_event_wait", desc: "Long-poll for events (<= 300 s).", props: append([]prop{
			str("stream"), str("room"), str("type"), str("to_agent"), str("from_agent"), str("correlation_id"), str("status"), str("since_event_id"), str("since_created_at"), p("timeout_ms", "integer"), p("limit", "integer"), str("topic"),
		}, from("3.11.0", str("writer"))...), handler: (*Palace).eventWait},
		{name: "mempalace_event_ack", desc: "Append an event.ack for an event.", props: []prop{str("event_id"), str("from_agent"), str("status"), str("body"), str("topic")}, required: []string{"event_id", "from_agent"}, mutating: true, handler: (*Palace).eventAck},
		{name: "mempalace_artifact_put", desc: "Store a text artifact (<= 4 MiB).", props: []prop{str("kind"), str("content"), str("created_by"), obj("metadata")}, required: []string{"kind", "content", "created_by"}, mutating: true, handler: (*Palace).artifactPut},
		{name: "mempalace_artifact_get", desc: "Fetch an artifact with content.", props: []prop{str("artifact_id")}, required: []string{"artifact_id"}, handler: (*Palace).artifactGet},
		{name: "mempalace_patch_submit", desc: "artifact_put(kind=patch) + patch.ready event.", props: []prop{
			str("content"), str("from_agent"), str("stream"), str("room"), str("to_agent"), str("correlation_id"), str("branch"), str("base_commit"), str("body"), obj("metadata"), str("topic"),
		}, required: []string{"content", "from_agent", "stream"}, mutating: true, handler: (*Palace).patchSubmit},
	}
}

// args are a call's arguments after validation and coercion.
type args map[string]any

func (a args) str(k string) string {
	s, _ := a[k].(string)
	return s
}

// object is an object argument, {} when absent.
func (a args) object(k string) map[string]any {
	if m, ok := a[k].(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func (a args) has(k string) bool { _, ok := a[k]; return ok }

func (a args) int(k string, def int) int {
	switch v := a[k].(type) {
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return def
}

func (a args) num(k string, def float64) float64 {
	switch v := a[k].(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return def
}

func (a args) boolean(k string, def bool) bool {
	if b, ok := a[k].(bool); ok {
		return b
	}
	return def
}

func fail(format string, v ...any) map[string]any {
	return map[string]any{"success": false, "error": fmt.Sprintf(format, v...)}
}

func (pl *Palace) isoNow() string { return pl.timestamp(pl.now()) }

// ---- drawers ----

func (pl *Palace) storeDrawer(d *Drawer) {
	pl.st.NextSeq++
	d.Seq = pl.st.NextSeq
	pl.st.Drawers[d.ID] = d
}

func (pl *Palace) addDrawer(a args) any {
	wing, room, content := a.str("wing"), a.str("room"), a.str("content")
	if err := sanitizeName("wing", wing); err != nil {
		return fail("%v", err)
	}
	if err := sanitizeName("room", room); err != nil {
		return fail("%v", err)
	}
	if strings.TrimSpace(content) == "" {
		return fail("content must be a non-empty string")
	}
	if utf8.RuneCountInString(content) > MaxContent {
		return fail("content exceeds maximum length of %d characters", MaxContent)
	}
	id := DrawerID(wing, room, content)
	if _, ok := pl.st.Drawers[id]; ok {
		return map[string]any{"success": true, "reason": "already_exists", "drawer_id": id}
	}
	d := &Drawer{ID: id, Wing: wing, Room: room, Content: content, SourceFile: a.str("source_file"), AddedBy: cmp.Or(a.str("added_by"), "mcp"), FiledAt: pl.isoNow()}
	pl.storeDrawer(d)
	out := map[string]any{"success": true, "drawer_id": id, "wing": wing, "room": room, "chunks": len(chunks(content))}
	if ids := d.ChunkIDs(); ids != nil {
		out["chunk_ids"] = ids
	}
	return out
}

func (pl *Palace) drawerPayload(d *Drawer) map[string]any {
	meta := map[string]any{"wing": d.Wing, "room": d.Room, "source_file": baseName(d.SourceFile), "added_by": d.AddedBy, "filed_at": d.FiledAt, "id_recipe": "v3", "chunk_index": 0,
		"last_modified": cmp.Or(d.Modified, d.FiledAt)}
	if d.Diary {
		meta["hall"], meta["type"], meta["agent"], meta["date"], meta["topic"] = "hall_diary", "diary_entry", d.Agent, d.Date, d.Topic
	}
	out := map[string]any{"drawer_id": d.ID, "content": d.Content, "wing": d.Wing, "room": d.Room, "metadata": meta}
	if ids := d.ChunkIDs(); ids != nil {
		out["chunks"], out["chunk_ids"] = len(ids), ids
		meta["chunks"], meta["chunk_ids"], meta["parent_drawer_id"] = len(ids), ids, d.ID
	}
	return out
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

func (pl *Palace) getDrawer(a args) any {
	id := a.str("drawer_id")
	if d, ok := pl.st.Drawers[id]; ok {
		return pl.drawerPayload(d)
	}
	// A chunk id resolves to its logical drawer, as upstream's get does.
	if i := strings.LastIndex(id, "_chunk_"); i > 0 {
		if d, ok := pl.st.Drawers[id[:i]]; ok {
			return pl.drawerPayload(d)
		}
	}
	return map[string]any{"error": "Drawer not found: " + id}
}

// bulkIDs is a bulk call's drawer_ids as 3.11.0 checks them (1 to 500),
// or the error it answers.
func bulkIDs(a args, verb string) ([]any, any) {
	if refusal := catalogue.BulkIDsRefusal(a["drawer_ids"], verb); refusal != "" {
		return nil, map[string]any{"error": refusal}
	}
	return a["drawer_ids"].([]any), nil
}

// getDrawers is get_drawer for each id, in order (3.11.0): an id that
// does not resolve is an item with its error; the list is 1 to 500 ids.
func (pl *Palace) getDrawers(a args) any {
	ids, bad := bulkIDs(a, "fetch")
	if bad != nil {
		return bad
	}
	results, errs := []any{}, 0
	for _, x := range ids {
		id, _ := x.(string)
		r := pl.getDrawer(args{"drawer_id": id}).(map[string]any)
		if r["error"] != nil {
			errs++
			r = map[string]any{"drawer_id": id, "error": r["error"]}
		}
		results = append(results, r)
	}
	return map[string]any{"results": results, "count": len(results), "errors": errs}
}

func (pl *Palace) listDrawers(a args) any {
	limit := clamp(a.int("limit", 20), 1, 100)
	offset := max(a.int("offset", 0), 0)
	var hits []*Drawer // every match counts in total; only the page's rows are built
	for _, d := range pl.st.SortedDrawers() {
		if (a.str("wing") != "" && d.Wing != a.str("wing")) || (a.str("room") != "" && d.Room != a.str("room")) {
			continue
		}
		if (a.str("since") != "" && d.FiledAt < a.str("since")) || (a.str("before") != "" && d.FiledAt >= a.str("before")) {
			continue
		}
		hits = append(hits, d)
	}
	total := len(hits)
	page := []map[string]any{}
	for _, d := range hits[min(offset, total):min(offset+limit, total)] {
		row := map[string]any{"drawer_id": d.ID, "wing": d.Wing, "room": d.Room, "content_preview": preview(d.Content), "metadata": pl.drawerPayload(d)["metadata"]}
		if ids := d.ChunkIDs(); ids != nil {
			row["chunks"], row["chunk_ids"] = len(ids), ids
		}
		page = append(page, row)
	}
	return map[string]any{"drawers": page, "total": total, "count": len(page), "offset": offset, "limit": limit}
}

func (pl *Palace) updateDrawer(a args) any {
	id := a.str("drawer_id")
	if !a.has("content") && !a.has("wing") && !a.has("room") {
		// MemPalace's only no-op, answered before the id is looked up; an
		// update sending the drawer's own text is an update like any other.
		return map[string]any{"success": true, "drawer_id": id, "noop": true}
	}
	d, ok := pl.st.Drawers[id]
	if !ok {
		return fail("Drawer not found: %s", id)
	}
	nd := *d
	if a.has("content") {
		if strings.TrimSpace(a.str("content")) == "" {
			return fail("content must be a non-empty string")
		}
		nd.Content = a.str("content")
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"wing", &nd.Wing}, {"room", &nd.Room}} {
		if !a.has(f.name) {
			continue
		}
		if err := sanitizeName(f.name, a.str(f.name)); err != nil {
			return fail("%v", err)
		}
		*f.to = a.str(f.name)
	}
	nd.Modified = pl.isoNow()
	*d = nd // the id does not change when the content does
	out := map[string]any{"success": true, "drawer_id": id, "wing": d.Wing, "room": d.Room}
	if ids := d.ChunkIDs(); ids != nil {
		out["chunks"], out["chunk_ids"] = len(ids), ids
	}
	return out
}

func (pl *Palace) deleteDrawer(a args) any {
	id := a.str("drawer_id")
	d, ok := pl.st.Drawers[id]
	if !ok {
		return fail("Drawer not found: %s", id)
	}
	ids := d.ChunkIDs()
	if ids == nil {
		ids = []string{id}
	}
	delete(pl.st.Drawers, id)
	return map[string]any{"success": true, "drawer_id": id, "deleted_ids": ids, "chunks_deleted": len(ids)}
}

// deleteDrawers is 3.11.0's bulk delete: each id as delete_drawer, in
// order, a missing one an error item; 1 to 500 ids.
func (pl *Palace) deleteDrawers(a args) any {
	ids, bad := bulkIDs(a, "delete")
	if bad != nil {
		return bad
	}
	results, deleted, errs := []any{}, 0, 0
	for _, x := range ids {
		id, _ := x.(string)
		r := pl.deleteDrawer(args{"drawer_id": id}).(map[string]any)
		if r["success"] != true {
			errs++
			results = append(results, map[string]any{"drawer_id": id, "error": r["error"]})
			continue
		}
		deleted++
		results = append(results, map[string]any{"drawer_id": id, "deleted_ids": r["deleted_ids"], "chunks_deleted": r["chunks_deleted"], "closets_deleted": 0})
	}
	return map[string]any{"results": results, "count": len(results), "deleted": deleted, "errors": errs}
}

func (pl *Palace) deleteBySource(a args) any {
	src := a.str("source_file")
	var match []*Drawer
	for _, d := range pl.st.SortedDrawers() {
		if d.SourceFile == src {
			match = append(match, d)
		}
	}
	if a.boolean("dry_run", true) {
		sample := []map[string]any{} // distinct (wing, room) pairs, at most five, as MemPalace's
		seen := map[[2]string]bool{}
		for _, d := range match {
			if pair := [2]string{d.Wing, d.Room}; !seen[pair] && len(sample) < 5 {
				seen[pair] = true
				sample = append(sample, map[string]any{"wing": d.Wing, "room": d.Room})
			}
		}
		hint := "No drawers match this source_file." // 3.11's words
		if len(match) > 0 {
			hint = fmt.Sprintf("No drawers were deleted. Re-run with dry_run=false to remove these %d drawer(s) and 0 index entr(y/ies).", len(match))
		}
		return map[string]any{"success": true, "dry_run": true, "source_file": src, "match_count": len(match), "closet_match_count": 0, "sample": sample, "hint": hint}
	}
	for _, d := range match {
		delete(pl.st.Drawers, d.ID)
	}
	return map[string]any{"success": true, "dry_run": false, "source_file": src, "deleted": len(match), "closets_deleted": 0}
}

func (pl *Palace) checkpoint(a args) any {
	items, _ := a["items"].([]any)
	threshold := a.num("dedup_threshold", 0.9)
	added, dups, errs := []any{}, []any{}, []any{}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			errs = append(errs, "item is not an object")
			continue
		}
		ia := args(m)
		// Similarity is at most 1: above it nothing is a duplicate, and the
		// double skips the ranking (the cost of a test's large checkpoint).
		if threshold <= 1 {
			if dup := pl.duplicates(ia.str("content"), threshold); len(dup) > 0 {
				dups = append(dups, map[string]any{"room": ia.str("room"), "matches": dup})
				continue
			}
		}
		ia = args{"wing": m["wing"], "room": m["room"], "content": m["content"], "source_file": m["source_file"], "added_by": a["added_by"]}
		if ia["added_by"] == nil {
			ia["added_by"] = "checkpoint"
		}
		r := pl.addDrawer(ia).(map[string]any)
		if r["success"] == false {
			errs = append(errs, r["error"])
			continue
		}
		added = append(added, r)
	}
	out := map[string]any{"added": added, "duplicates": dups, "errors": errs}
	if d, ok := a["diary"].(map[string]any); ok {
		d = maps.Clone(d)
		if _, ok := d["topic"]; !ok {
			d["topic"] = "session-checkpoint"
		}
		out["diary"] = pl.diaryWrite(args(d))
	}
	return out
}

// ---- search ----

type hit struct {
	d     *Drawer
	text  string
	dist  float64
	chunk int
}

func (pl *Palace) rank(query string, keep func(*Drawer) bool) []hit {
	q := Embed(pl.opts.Embedder, query)
	var hits []hit
	for _, d := range pl.st.SortedDrawers() {
		if keep != nil && !keep(d) {
			continue
		}
		for i, c := range chunks(d.Content) {
			v, ok := pl.vectors[c]
			if !ok {
				v = Embed(pl.opts.Embedder, c)
				pl.vectors[c] = v
			}
			hits = append(hits, hit{d, c, cosineDistance(q, v), i})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].dist < hits[j].dist })
	return hits
}

func (pl *Palace) search(a args) any {
	query := a.str("query")
	if utf8.RuneCountInString(query) > 250 {
		return map[string]any{"error": "query exceeds maximum length of 250 characters", "results": []any{}}
	}
	limit := clamp(a.int("limit", 5), 1, 100)
	maxDist := a.num("max_distance", 1.5)
	if maxDist == 0 {
		maxDist = math.Inf(1) // 0 disables the threshold
	}
	wing, room, src := a.str("wing"), a.str("room"), a.str("source_file")
	hits := pl.rank(query, func(d *Drawer) bool {
		return (wing == "" || d.Wing == wing) && (room == "" || d.Room == room) && (src == "" || baseName(d.SourceFile) == src || d.SourceFile == src)
	})
	results := []map[string]any{}
	for _, h := range hits {
		if h.dist > maxDist || len(results) == limit {
			continue
		}
		r := map[string]any{
			"text": h.text, "wing": h.d.Wing, "room": h.d.Room, "source_file": cmp.Or(baseName(h.d.SourceFile), "?"), "source_path": h.d.SourceFile,
			"created_at": h.d.FiledAt, "similarity": round(max(0, 1-h.dist), 3), "distance": round(h.dist, 4), "effective_distance": round(h.dist, 4),
			"matched_via": "drawer", "filed_at": h.d.FiledAt, "authored_at": h.d.FiledAt, "authored_at_source": "filed_at",
			"content_date": nil, "content_date_source": "unknown", "closet_boost": 0,
		}
		if !pl.opts.OmitDrawerID {
			r["drawer_id"] = h.d.ID
		}
		results = append(results, r)
	}
	filters := map[string]any{"wing": ptr(wing), "room": ptr(room), "source_file": ptr(src), "since": ptr(a.str("since")), "before": ptr(a.str("before"))}
	return map[string]any{"query": query, "filters": filters, "total_before_filter": len(hits), "results": results}
}

func (pl *Palace) duplicates(content string, threshold float64) []map[string]any {
	out := []map[string]any{}
	for _, h := range pl.rank(content, nil) {
		if len(out) == 5 {
			break
		}
		sim := round(max(0, 1-h.dist), 3)
		if sim < threshold {
			continue
		}
		out = append(out, map[string]any{"id": h.d.ID, "wing": h.d.Wing, "room": h.d.Room, "similarity": sim, "content": preview(h.d.Content)})
	}
	return out
}

func (pl *Palace) checkDuplicate(a args) any {
	m := pl.duplicates(a.str("content"), a.num("threshold", 0.9))
	return map[string]any{"is_duplicate": len(m) > 0, "matches": m}
}

// ---- overview ----

func (pl *Palace) counts() (total int, wings map[string]int, rooms map[string]int, tax map[string]map[string]int) {
	wings, rooms, tax = map[string]int{}, map[string]int{}, map[string]map[string]int{}
	for _, d := range pl.st.Drawers {
		n := len(chunks(d.Content)) // status counts chunk rows, not logical drawers
		total += n
		wings[d.Wing] += n
		rooms[d.Room] += n
		if tax[d.Wing] == nil {
			tax[d.Wing] = map[string]int{}
		}
		tax[d.Wing][d.Room] += n
	}
	return
}

// status has the keys of 3.11.0's mempalace_status on a palace with
// drawers (tools_read.py tool_status, and the MCP layer's
// sqlite_integrity, library_versions, updates): no embedder name, which
// 3.11.0 does not report (its embedding_device is "cpu" or a description
// of the embedder's endpoint).
func (pl *Palace) status(a args) any {
	total, wings, rooms, _ := pl.counts()
	return map[string]any{
		"total_drawers": total, "wings": wings, "rooms": rooms, "protocol": "MemPalace protocol (test double)", "aaak_dialect": "AAAK (test double)",
		"backend": "fakepalace", "embedding_device": pl.opts.Embedder + " (test double)",
		"sqlite_integrity": map[string]any{"checked": true, "ok": true, "sqlite_version": "", "palace": pl.opts.Dir, "sqlite_path": "", "error_count": 0, "errors": []any{}},
		"library_versions": map[string]any{"stale": false, "serving": map[string]any{"mempalace": pl.opts.Version}, "packages": []any{}},
		"updates":          map[string]any{"server": map[string]any{"enabled": false, "installed": pl.opts.Version}},
	}
}

func (pl *Palace) listWings(a args) any {
	_, wings, _, _ := pl.counts()
	return map[string]any{"wings": wings}
}

func (pl *Palace) listRooms(a args) any {
	_, _, rooms, tax := pl.counts()
	if w := a.str("wing"); w != "" {
		rooms = tax[w]
		if rooms == nil {
			rooms = map[string]int{}
		}
		return map[string]any{"wing": w, "rooms": rooms}
	}
	return map[string]any{"wing": "all", "rooms": rooms}
}

func (pl *Palace) taxonomy(a args) any {
	_, _, _, tax := pl.counts()
	return map[string]any{"taxonomy": tax}
}

// ---- diary ----

func (pl *Palace) diaryWrite(a args) any {
	agent, entry := a.str("agent_name"), cmp.Or(a.str("entry"), a.str("content"))
	if err := sanitizeName("agent_name", agent); err != nil {
		return fail("%v", err)
	}
	if strings.TrimSpace(entry) == "" {
		return fail("entry must be a non-empty string")
	}
	topic, agentL, wing := cmp.Or(a.str("topic"), "general"), strings.ToLower(agent), cmp.Or(a.str("wing"), catalogue.DiaryWingOf(agent))
	if err := sanitizeName("wing", wing); err != nil {
		return fail("%v", err)
	}
	now := pl.now()
	id := DiaryID(wing, now, entry)
	for pl.st.Drawers[id] != nil { // two writes in one microsecond
		now = now.Add(time.Microsecond)
		id = DiaryID(wing, now, entry)
	}
	d := &Drawer{ID: id, Wing: wing, Room: "diary", Content: entry, AddedBy: agentL, FiledAt: pl.timestamp(now), Diary: true, Agent: agentL, Topic: topic, Date: now.Format("2006-01-02")}
	pl.storeDrawer(d) // no probe: the same entry twice is stored twice (RFC 001 §7.6)
	out := map[string]any{"success": true, "entry_id": id, "agent": agentL, "topic": topic, "timestamp": d.FiledAt, "chunks": len(chunks(entry))}
	if ids := d.ChunkIDs(); ids != nil {
		out["chunk_ids"] = ids
	}
	return out
}

func (pl *Palace) diaryRead(a args) any {
	agent := strings.ToLower(a.str("agent_name"))
	n := clamp(a.int("last_n", 10), 1, 100)
	var ds []*Drawer
	for _, d := range pl.st.Drawers {
		if d.Diary && d.Agent == agent && (a.str("wing") == "" || d.Wing == a.str("wing")) {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return map[string]any{"agent": agent, "entries": []any{}, "message": "No diary entries yet."}
	}
	sort.Slice(ds, func(i, j int) bool {
		return ds[i].FiledAt > ds[j].FiledAt || (ds[i].FiledAt == ds[j].FiledAt && ds[i].Seq > ds[j].Seq)
	})
	entries := []map[string]any{}
	for _, d := range ds {
		for _, c := range chunks(d.Content) { // chunks are not re-joined
			if len(entries) < n {
				entries = append(entries, map[string]any{"date": d.Date, "timestamp": d.FiledAt, "topic": d.Topic, "content": c})
			}
		}
	}
	return map[string]any{"agent": agent, "entries": entries, "total": len(ds), "showing": len(entries)}
}

// ---- knowledge graph ----

func (pl *Palace) newTriple(s, pr, o string, from, to *string) *Triple {
	rec := pl.now().Format(time.RFC3339Nano)
	vf := ""
	if from != nil {
		vf = *from
	}
	id := fmt.Sprintf("t_%s_%s_%s_%s", catalogue.EntityID(s), strings.ReplaceAll(strings.ToLower(pr), " ", "_"), catalogue.EntityID(o), catalogue.IDHash(vf, rec+randHex(4))[:12])
	return &Triple{ID: id, Subject: s, Predicate: pr, Object: o, ValidFrom: from, ValidTo: to, Confidence: 1.0, RecordedAt: rec}
}

func fact(s, p, o string) string { return s + " → " + p + " → " + o }

func (pl *Palace) kgAdd(a args) any {
	s, pr, o := a.str("subject"), a.str("predicate"), a.str("object")
	if strings.TrimSpace(s) == "" || strings.TrimSpace(o) == "" {
		return fail("subject and object must be non-empty")
	}
	if err := sanitizeName("predicate", pr); err != nil {
		return fail("%v", err)
	}
	from, err := kgDate("valid_from", a.str("valid_from"))
	if err != nil {
		return fail("%v", err)
	}
	to, err := kgDate("valid_to", a.str("valid_to"))
	if err != nil {
		return fail("%v", err)
	}
	// The guard: an identical OPEN fact returns its existing id, whatever
	// the new fact's dates (3.11: a closed copy of an open fact is not
	// stored). It finds open facts only (RFC 001 §3.2): with none open a
	// closed fact is always inserted, so replaying one duplicates it.
	for _, t := range pl.st.Triples {
		if t.Subject == s && t.Predicate == pr && t.Object == o && t.ValidTo == nil {
			return map[string]any{"success": true, "triple_id": t.ID, "fact": fact(s, pr, o)}
		}
	}
	t := pl.newTriple(s, pr, o, ptr(from), ptr(to))
	t.SourceCloset, t.SourceFile, t.SourceDrawerID = ptr(a.str("source_closet")), ptr(a.str("source_file")), ptr(a.str("source_drawer_id"))
	pl.st.Triples = append(pl.st.Triples, t)
	return map[string]any{"success": true, "triple_id": t.ID, "fact": fact(s, pr, o)}
}

// ptr is s's address, nil for "" (JSON null).
func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// kgInvalidate closes every open (subject, predicate, object) fact; with
// none open it closes nothing and answers success all the same (3.11).
func (pl *Palace) kgInvalidate(a args) any {
	s, pr, o := a.str("subject"), a.str("predicate"), a.str("object")
	ended, err := kgDate("ended", a.str("ended"))
	if err != nil {
		return fail("%v", err)
	}
	if ended == "" {
		ended = pl.now().Format("2006-01-02")
	}
	if e := pl.inverted(s, pr, o, ended, "valid_to"); e != nil {
		return e
	}
	for _, t := range pl.st.Triples {
		if t.Subject == s && t.Predicate == pr && t.Object == o && t.ValidTo == nil {
			t.ValidTo = ptr(ended)
		}
	}
	return map[string]any{"success": true, "fact": fact(s, pr, o), "ended": ended}
}

// inverted refuses to close an open (s, pr, o) fact at an end before its
// start, as 3.11 does: a ValueError its dispatcher answers as JSON-RPC
// -32000 (an interval no query would ever see).
func (pl *Palace) inverted(s, pr, o, end, field string) *rpcError {
	for _, t := range pl.st.Triples {
		if t.Subject == s && t.Predicate == pr && t.Object == o && t.ValidTo == nil && t.ValidFrom != nil && boundKey(end, true) < boundKey(*t.ValidFrom, false) {
			msg := fmt.Sprintf("%s='%s' is before valid_from='%s'; an inverted interval would be invisible to every KG query", field, end, *t.ValidFrom)
			return &rpcError{Code: -32000, Message: "Internal tool error", Data: map[string]any{"error_class": "ValueError", "message": msg}}
		}
	}
	return nil
}

// kgSupersede closes the open old fact (if any) and opens the new one at
// one instant: "at" (a date means its midnight UTC), else now. With no
// open old fact it degrades to an add; an open new fact is kept (3.11).
func (pl *Palace) kgSupersede(a args) any {
	s, pr, old, nw := a.str("subject"), a.str("predicate"), a.str("old_object"), a.str("new_object")
	at, err := kgDate("at", a.str("at"))
	if err != nil {
		return fail("%v", err)
	}
	switch {
	case at == "":
		at = pl.now().UTC().Format("2006-01-02T15:04:05Z")
	case len(at) == len("2006-01-02"):
		at += "T00:00:00Z"
	}
	if e := pl.inverted(s, pr, old, at, "at"); e != nil {
		return e
	}
	var open *Triple
	for _, t := range pl.st.Triples {
		if t.Subject == s && t.Predicate == pr && t.Object == old && t.ValidTo == nil {
			t.ValidTo = ptr(at)
		}
		if t.Subject == s && t.Predicate == pr && t.Object == nw && t.ValidTo == nil {
			open = t
		}
	}
	if open == nil {
		open = pl.newTriple(s, pr, nw, ptr(at), nil)
		pl.st.Triples = append(pl.st.Triples, open)
	}
	return map[string]any{"success": true, "triple_id": open.ID, "fact": fact(s, pr, nw), "superseded": old}
}

func factMap(t *Triple, direction string) map[string]any {
	m := map[string]any{"subject": t.Subject, "predicate": t.Predicate, "object": t.Object, "valid_from": t.ValidFrom, "valid_to": t.ValidTo, "current": t.ValidTo == nil}
	if direction != "" {
		m["direction"], m["confidence"], m["source_closet"] = direction, t.Confidence, t.SourceCloset
	}
	return m
}

func (pl *Palace) kgQuery(a args) any {
	e, dir, asOf := a.str("entity"), cmp.Or(a.str("direction"), "both"), a.str("as_of")
	facts := []map[string]any{}
	for _, t := range pl.st.Triples {
		if asOf != "" && ((t.ValidFrom != nil && *t.ValidFrom > asOf) || (t.ValidTo != nil && *t.ValidTo < asOf)) {
			continue
		}
		if (dir == "both" || dir == "outgoing") && strings.EqualFold(t.Subject, e) {
			facts = append(facts, factMap(t, "outgoing"))
		} else if (dir == "both" || dir == "incoming") && strings.EqualFold(t.Object, e) {
			facts = append(facts, factMap(t, "incoming"))
		}
	}
	// 3.11 also sorts the facts into active, historical and future ones
	// (only without as_of: then every fact is active).
	active, historical, future := facts, []map[string]any{}, []map[string]any{}
	if asOf == "" {
		now := pl.now().UTC().Format("2006-01-02T15:04:05Z")
		active = []map[string]any{}
		for _, f := range facts {
			from, _ := f["valid_from"].(*string)
			to, _ := f["valid_to"].(*string)
			switch {
			case from != nil && boundKey(*from, false) > now:
				future = append(future, f)
			case to != nil && boundKey(*to, true) < now:
				historical = append(historical, f)
			default:
				active = append(active, f)
			}
		}
	}
	return map[string]any{"entity": e, "as_of": ptr(asOf), "facts": facts, "count": len(facts),
		"active_facts": active, "historical_facts": historical, "future_facts": future}
}

// boundKey is a fact bound as a UTC instant: a date starts at its
// midnight and ends at its last second.
func boundKey(v string, end bool) string {
	if strings.Contains(v, "T") {
		return v
	}
	if end {
		return v + "T23:59:59Z"
	}
	return v + "T00:00:00Z"
}

// kgTimeline pages the facts ordered by valid_from, those without one
// last, then by id (3.11's ORDER BY valid_from ASC NULLS LAST, id ASC).
func (pl *Palace) kgTimeline(a args) any {
	e := a.str("entity")
	var ts []*Triple
	for _, t := range pl.st.Triples {
		if e == "" || strings.EqualFold(t.Subject, e) || strings.EqualFold(t.Object, e) {
			ts = append(ts, t)
		}
	}
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i].ValidFrom, ts[j].ValidFrom
		if (a == nil) != (b == nil) {
			return b == nil
		}
		if a != nil && *a != *b {
			return *a < *b
		}
		return ts[i].ID < ts[j].ID
	})
	limit, offset := clamp(a.int("limit", 100), 1, 100), max(a.int("offset", 0), 0)
	out := []map[string]any{}
	for _, t := range ts[min(offset, len(ts)):min(offset+limit, len(ts))] {
		out = append(out, factMap(t, ""))
	}
	return map[string]any{"entity": cmp.Or(e, "all"), "timeline": out, "count": len(out), "total": len(ts), "offset": offset, "limit": limit}
}

func (pl *Palace) kgStats(a args) any {
	ents, rels := map[string]bool{}, map[string]bool{}
	cur := 0
	for _, t := range pl.st.Triples {
		ents[catalogue.EntityID(t.Subject)], ents[catalogue.EntityID(t.Object)], rels[t.Predicate] = true, true, true
		if t.ValidTo == nil {
			cur++
		}
	}
	rt := append([]string{}, slices.Sorted(maps.Keys(rels))...) // [] when empty, not null
	return map[string]any{"entities": len(ents), "triples": len(pl.st.Triples), "current_facts": cur, "expired_facts": len(pl.st.Triples) - cur, "relationship_types": rt}
}

// ---- maintenance ----

func (pl *Palace) mine(a args) any {
	return map[string]any{"success": true, "mode": cmp.Or(a.str("mode"), "projects"), "dry_run": a.boolean("dry_run", false), "output": "test double: nothing mined from " + a.str("source")}
}

func (pl *Palace) sync(a args) any {
	return map[string]any{"success": true, "dry_run": !a.boolean("apply", false), "missing": 0, "kept": len(pl.st.Drawers), "deleted": 0}
}

func (pl *Palace) hookSettings(a args) any {
	var updated []string
	for _, k := range []string{"silent_save", "desktop_toast"} {
		if b, ok := a[k].(bool); ok {
			pl.st.Hooks[k] = b
			updated = append(updated, k)
		}
	}
	out := map[string]any{"success": true, "settings": map[string]any{"silent_save": pl.st.Hooks["silent_save"], "desktop_toast": pl.st.Hooks["desktop_toast"]}}
	if updated != nil {
		out["updated"] = updated
	}
	return out
}

// ---- helpers ----

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// preview is s cut to 200 characters, "..." marking a cut.
func preview(s string) string {
	if utf8.RuneCountInString(s) <= 200 {
		return s
	}
	return string([]rune(s)[:200]) + "..."
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
