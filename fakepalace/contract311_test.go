package fakepalace_test

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	. "github.com/joakimp/devbox-config/fakepalace"
)

// contract311 is the part of the contract written against MemPalace
// 3.11.0 itself (testbed/realpalace): behaviour the double had wrong, or
// did not have, until the real server showed it.
func contract311(t *testing.T, open opener) {
	t.Run("knowledge graph: closing what is not open, supersede, buckets, timeline", func(t *testing.T) {
		c := open(t)
		inv := call(t, c, "mempalace_kg_invalidate", map[string]any{"subject": "edge", "predicate": "uses", "object": "nothing", "ended": "2026-03-01"})
		if inv["success"] != true || inv["ended"] != "2026-03-01" {
			t.Fatalf("closing a fact that is not open succeeds, closing nothing: %v", inv)
		}
		if st := call(t, c, "mempalace_kg_stats", nil); st["triples"] != 0.0 {
			t.Fatalf("the no-op close made a fact: %v", st)
		}
		sup := map[string]any{"subject": "edge", "predicate": "runs_on", "old_object": "laptop", "new_object": "desktop", "at": "2026-04-01"}
		s1 := call(t, c, "mempalace_kg_supersede", sup)
		if s1["success"] != true || s1["superseded"] != "laptop" || s1["fact"] != "edge → runs_on → desktop" {
			t.Fatalf("supersede with nothing open degrades to an add: %v", s1)
		}
		if s2 := call(t, c, "mempalace_kg_supersede", sup); s2["triple_id"] != s1["triple_id"] {
			t.Fatalf("a second supersede keeps the open new fact: %v then %v", s1, s2)
		}
		call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "hosts", "object": "site", "valid_from": "2026-05-01"})
		r := rpc(t, c, "tools/call", map[string]any{"name": "mempalace_kg_invalidate", "arguments": map[string]any{"subject": "edge", "predicate": "hosts", "object": "site", "ended": "2026-04-01"}})
		var data struct {
			ErrorClass string `json:"error_class"`
			Message    string `json:"message"`
		}
		if r.Error == nil || r.Error.Code != -32000 || json.Unmarshal(r.Error.Data, &data) != nil || data.ErrorClass != "ValueError" || !strings.Contains(data.Message, "inverted interval") {
			t.Fatalf("an end before the start is a JSON-RPC -32000 ValueError: %s", r.Result)
		}
		call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "used", "object": "bolt", "valid_from": "2026-01-01", "valid_to": "2026-02-01"})
		call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "plans", "object": "rust", "valid_from": "2999-01-01"})
		call(t, c, "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "likes", "object": "tea"})
		q := call(t, c, "mempalace_kg_query", map[string]any{"entity": "edge"})
		if objects(q["active_facts"]) != "desktop,site,tea" || objects(q["historical_facts"]) != "bolt" || objects(q["future_facts"]) != "rust" || q["count"] != 5.0 {
			t.Fatalf("kg_query buckets: active %s, historical %s, future %s", objects(q["active_facts"]), objects(q["historical_facts"]), objects(q["future_facts"]))
		}
		for _, f := range q["facts"].([]any) {
			if f := f.(map[string]any); f["object"] == "desktop" && (f["valid_from"] != "2026-04-01T00:00:00Z" || f["current"] != true) {
				t.Fatalf("supersede at a date opens at its midnight UTC: %v", f)
			}
		}
		tl := call(t, c, "mempalace_kg_timeline", map[string]any{"entity": "edge"})
		if objects(tl["timeline"]) != "bolt,desktop,site,rust,tea" || tl["total"] != 5.0 {
			t.Fatalf("timeline by valid_from, none last: %s (total %v)", objects(tl["timeline"]), tl["total"])
		}
		if p := call(t, c, "mempalace_kg_timeline", map[string]any{"entity": "edge", "limit": 2, "offset": 1}); objects(p["timeline"]) != "desktop,site" || p["count"] != 2.0 || p["total"] != 5.0 {
			t.Fatalf("timeline page: %v", p)
		}
	})
	t.Run("event reads: newest first without a cursor, writer filters, from_agent does not", func(t *testing.T) {
		c := open(t)
		add := func(typ, from, to, topic string) string {
			a := map[string]any{"type": typ, "stream": "s", "room": "r", "from_agent": from, "to_agent": to}
			if topic != "" {
				a["topic"] = topic
			}
			return call(t, c, "mempalace_event_append", a)["event"].(map[string]any)["id"].(string)
		}
		a, b, d := add("task.request", "pi@a", "opencode@b", "build"), add("note", "opencode@b", "*", ""), add("note", "pi@a", "*", "")
		list := func(args map[string]any) (string, map[string]any) {
			r := call(t, c, "mempalace_event_list", args)
			var ids []string
			for _, e := range r["events"].([]any) {
				ids = append(ids, map[string]string{a: "a", b: "b", d: "d"}[e.(map[string]any)["id"].(string)])
			}
			return strings.Join(ids, ","), r
		}
		for _, tc := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{}, "d,b,a"},
			{map[string]any{"since_event_id": a}, "b,d"},
			{map[string]any{"order": "asc"}, "a,b,d"},
			{map[string]any{"before_event_id": d, "order": "ASC"}, "a,b"},
			{map[string]any{"writer": "pi@a", "order": "asc"}, "a,d"},
			{map[string]any{"topic": "build"}, "a"},
			{map[string]any{"from_agent": "pi@a"}, "d,b,a"},
		} {
			got, r := list(tc.args)
			if got != tc.want {
				t.Errorf("event_list %v: %s, want %s", tc.args, got, tc.want)
			}
			if _, noted := r["note"]; noted != (tc.args["from_agent"] != nil) {
				t.Errorf("event_list %v: a note only when from_agent is given without writer: %v", tc.args, r["note"])
			}
		}
		_, r := list(map[string]any{"order": "asc"})
		evs := r["events"].([]any)
		if topic, ok := evs[1].(map[string]any)["topic"]; evs[0].(map[string]any)["topic"] != "build" || !ok || topic != nil {
			t.Errorf("every event carries its topic, null when none: %v", evs)
		}
		if r := call(t, c, "mempalace_event_list", map[string]any{"order": "sideways"}); !strings.Contains(fmt.Sprint(r["error"]), "order") {
			t.Errorf("a bad order: %v", r)
		}
		w := call(t, c, "mempalace_event_wait", map[string]any{"writer": "opencode@b", "timeout_ms": 50})
		if w["count"] != 1.0 || w["events"].([]any)[0].(map[string]any)["id"] != b {
			t.Errorf("event_wait by writer: %v", w)
		}
		ack := call(t, c, "mempalace_event_ack", map[string]any{"event_id": a, "from_agent": "opencode@b", "status": "applied", "topic": "build"})
		if ack["event"].(map[string]any)["topic"] != "build" {
			t.Errorf("an ack carries its topic: %v", ack)
		}
	})
	t.Run("search distances are the embedder's cosine distances", func(t *testing.T) {
		c := open(t)
		texts := []string{"the edge proxy keeps the local palace writable", "bananas are yellow fruit", "a palace of memory for agents"}
		for _, x := range texts {
			call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": x})
		}
		const q = "local palace proxy"
		s := call(t, c, "mempalace_search", map[string]any{"query": q, "limit": 5, "max_distance": 0})
		hits := s["results"].([]any)
		if len(hits) != len(texts) {
			t.Fatalf("hits: %v", s)
		}
		for _, h := range hits {
			h := h.(map[string]any)
			want := 1 - dot(Embed("minilm", q), Embed("minilm", h["text"].(string)))
			if d := h["distance"].(float64); math.Abs(d-want) > 1e-4 {
				t.Errorf("%q: distance %v, the embedding says %.4f", h["text"], d, want)
			}
			for _, k := range []string{"filed_at", "authored_at", "authored_at_source", "content_date", "content_date_source", "closet_boost", "created_at", "effective_distance", "source_path"} {
				if _, ok := h[k]; !ok {
					t.Errorf("a hit lacks %s: %v", k, h)
				}
			}
			if h["source_file"] != "?" {
				t.Errorf("a hit without a source file names it %q, not \"?\"", h["source_file"])
			}
		}
		if f := s["filters"].(map[string]any); !hasKeys(f, "wing", "room", "source_file", "since", "before") {
			t.Errorf("filters: %v", f)
		}
	})
	t.Run("drawer metadata, checkpoint diary topic, delete hint, status", func(t *testing.T) {
		c := open(t)
		id := call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "short note"})["drawer_id"]
		long := call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": strings.Repeat("abcdefghij", 170)})["drawer_id"]
		meta := func() map[any]map[string]any {
			out := map[any]map[string]any{}
			for _, d := range call(t, c, "mempalace_list_drawers", map[string]any{"wing": "w"})["drawers"].([]any) {
				out[d.(map[string]any)["drawer_id"]] = d.(map[string]any)["metadata"].(map[string]any)
			}
			return out
		}
		m := meta()
		if m[id]["last_modified"] != m[id]["filed_at"] || m[long]["parent_drawer_id"] != long {
			t.Fatalf("metadata: %v / %v", m[id], m[long])
		}
		call(t, c, "mempalace_update_drawer", map[string]any{"drawer_id": id, "room": "moved"})
		if m := meta(); m[id]["last_modified"] == m[id]["filed_at"] || m[id]["room"] != "moved" {
			t.Fatalf("an update stamps last_modified: %v", m[id])
		}
		cp := call(t, c, "mempalace_checkpoint", map[string]any{"items": []any{map[string]any{"wing": "w", "room": "r", "content": "checkpointed item"}}, "diary": map[string]any{"agent_name": "pi", "entry": "done"}})
		if cp["diary"].(map[string]any)["topic"] != "session-checkpoint" {
			t.Fatalf("a checkpoint's diary topic: %v", cp["diary"])
		}
		if d := call(t, c, "mempalace_delete_by_source", map[string]any{"source_file": "nowhere.md"}); d["hint"] != "No drawers match this source_file." || d["dry_run"] != true {
			t.Fatalf("delete_by_source: %v", d)
		}
		// status on a palace with drawers: exactly 3.11.0's keys, no
		// embedder name (3.11 reports none; doctor no longer asks).
		if st := call(t, c, "mempalace_status", nil); strings.Join(keys(st), ",") != "aaak_dialect,backend,embedding_device,library_versions,protocol,rooms,sqlite_integrity,total_drawers,updates,wings" {
			t.Fatalf("status keys: %v", keys(st))
		}
	})
}

// doubleLacks is what MemPalace 3.11.0 advertises that the double does
// not serve: whole tools (nil) and parameters. The double implements the
// tools the project's guarantees exercise; these others the edge and the
// gateway route by their catalogue records, and their real answers are
// tested against real MemPalace. The parameters ask for behaviour the
// double cannot give honestly (BM25 candidates, the CLI's ranking,
// EmbeddingGemma media search, mining), so it refuses them as unknown
// parameters rather than accept and ignore them.
var doubleLacks = map[string][]string{
	"mempalace_get_aaak_spec": nil, "mempalace_traverse": nil, "mempalace_find_tunnels": nil, "mempalace_graph_stats": nil,
	"mempalace_mesh_peers": nil, "mempalace_create_tunnel": nil, "mempalace_list_tunnels": nil, "mempalace_delete_tunnel": nil,
	"mempalace_list_hallways": nil, "mempalace_delete_hallway": nil, "mempalace_follow_tunnels": nil,
	"mempalace_memories_filed_away": nil, "mempalace_task_create": nil,
	"mempalace_search": {"candidate_strategy", "cli_compatible", "include_media", "query_task"},
	"mempalace_mine":   {"include_ignored", "include_subagents"},
}

// recordedDifferences asserts, for each difference the double keeps on
// purpose, each side's own behaviour, so that a change on either side
// fails here and the record is looked at again.
func recordedDifferences(t *testing.T, open opener, real bool) {
	t.Run("recorded differences", func(t *testing.T) {
		c := open(t)
		// A palace that holds no drawers yet. MemPalace answers a drawer
		// read with an error ("Chroma database missing"; "No palace
		// found" from search, which creates chroma.sqlite3 without a
		// collection; "Backend open failed", isError set, after that),
		// as a broken backend does; the double answers an empty list.
		// The edge, join and doctor tell an empty palace from a broken
		// one by its files (palacefiles), which the double does not
		// write, so their real tests cover it (edge:
		// TestRealAFreshDeviceReadsTheFleet).
		if l := call(t, c, "mempalace_list_drawers", nil); real != (l["error"] == "Chroma database missing") || !real && l["count"] != 0.0 {
			t.Errorf("list_drawers of an empty palace: %v", l)
		}
		if s := call(t, c, "mempalace_search", map[string]any{"query": "anything"}); real != (s["error"] == "No palace found") {
			t.Errorf("search of an empty palace: %v", s)
		}
		if d := rpc(t, c, "tools/call", map[string]any{"name": "mempalace_diary_read", "arguments": map[string]any{"agent_name": "pi"}}); real != (strings.Contains(string(d.Result), "Backend open failed") && strings.Contains(string(d.Result), `"isError": true`)) {
			t.Errorf("diary_read of an empty palace after a search: %s", d.Result)
		}
		// Byte form. MemPalace writes json.dumps's default form (", " and
		// ": " separators, keys in insertion order); the double writes
		// compact JSON with sorted keys. The values are the same, and
		// every reader in this project parses JSON (encoding/json, gjson),
		// none compares bytes.
		if raw := string(c.send(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)); real != (raw == `{"jsonrpc": "2.0", "id": 7, "result": {}}`) || !real && raw != `{"id":7,"jsonrpc":"2.0","result":{}}` {
			t.Errorf("ping's bytes: %s", raw)
		}
		// Tool surface: see doubleLacks.
		var list struct {
			Tools []struct {
				Name        string
				InputSchema struct{ Properties map[string]any }
			}
		}
		json.Unmarshal(rpc(t, c, "tools/list", map[string]any{}).Result, &list)
		served := map[string]map[string]any{}
		for _, tl := range list.Tools {
			served[tl.Name] = tl.InputSchema.Properties
		}
		for name, params := range doubleLacks {
			props, has := served[name]
			if params == nil && has != real {
				t.Errorf("%s: served %v (real %v)", name, has, real)
			}
			for _, p := range params {
				if _, ok := props[p]; ok != real {
					t.Errorf("%s.%s: advertised %v (real %v)", name, p, ok, real)
				}
			}
		}
		// Search: MemPalace re-ranks vector candidates with BM25 lexical
		// scores (bm25_score on each hit, and the order of hits at equal
		// distance); the double ranks by vector distance alone.
		call(t, c, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "local palace"})
		h := call(t, c, "mempalace_search", map[string]any{"query": "local palace"})["results"].([]any)[0].(map[string]any)
		if _, ok := h["bm25_score"]; ok != real {
			t.Errorf("bm25_score on a hit: %v", h)
		}
		// Maintenance answers (sync, reconnect) are the double's own small
		// shapes: they are never proxied, and the project passes them on
		// without reading them.
		if s := call(t, c, "mempalace_sync", nil); hasKeys(s, "scanned", "no_source") != real || hasKeys(s, "deleted") == real {
			t.Errorf("sync: %v", s)
		}
		if r := call(t, c, "mempalace_reconnect", nil); hasKeys(r, "drawers", "vector_disabled") != real {
			t.Errorf("reconnect: %v", r)
		}
	})
}

// objects lists the "object" of each fact in a list, comma-separated.
func objects(v any) string {
	l, _ := v.([]any)
	var out []string
	for _, f := range l {
		out = append(out, fmt.Sprint(f.(map[string]any)["object"]))
	}
	return strings.Join(out, ",")
}

func hasKeys(m map[string]any, ks ...string) bool {
	for _, k := range ks {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
