package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// realEdge is an edge whose child is real mempalace-mcp on its own palace
// and whose primary is real mempalace serve behind a proxy that counts
// what reaches it (and can lose answers, or be down).
type realEdge struct {
	*harness
	local *realpalace.Palace
	srv   *realpalace.Server
	proxy *realpalace.Proxy
}

// startRealEdge starts it; a localModel other than "" is the local
// palace's embedding model (realpalace.Palace.Model).
func startRealEdge(t *testing.T, o harnessOpts, localModel string) *realEdge {
	t.Helper()
	r := &realEdge{local: realpalace.New(t)}
	if localModel != "" {
		r.local.Model = localModel
	}
	r.srv = realpalace.New(t).Serve(t, testToken)
	r.proxy = realpalace.NewProxy(t, r.srv.URL)
	o.realLocal, o.primaryURL = r.local, r.proxy.URL
	if o.timeout == 0 {
		o.timeout = 30 * time.Second
	}
	r.harness = start(t, o)
	return r
}

// callRaw runs a tool by its full name through the edge.
func (h *harness) callRaw(name string, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	var m map[string]any
	if len(res.Content) > 0 {
		json.Unmarshal([]byte(res.Content[len(res.Content)-1].(*mcp.TextContent).Text), &m)
	}
	return m, res
}

// waitFor polls cond for up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// onServe lists the drawers of wing on the primary, by content.
func (r *realEdge) onServe(t *testing.T, wing string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	page := r.srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": wing, "limit": 100})
	ds, _ := page["drawers"].([]any)
	for _, x := range ds {
		d := x.(map[string]any)
		full := r.srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": d["drawer_id"]})
		out[fmt.Sprint(full["content"])] = full
	}
	return out
}

func hitsOf(t *testing.T, m map[string]any) []map[string]any {
	t.Helper()
	xs, ok := m["results"].([]any)
	if !ok {
		t.Fatalf("no results: %v", m)
	}
	out := make([]map[string]any, len(xs))
	for i, x := range xs {
		out[i] = x.(map[string]any)
	}
	return out
}

// TestRealRoutingTable is the routing table with a real mempalace-mcp as
// the local palace and real mempalace serve as the primary: local-first
// writes replicated with provenance on the primary only, merged search
// over both palaces' real distances (deduplicated by drawer_id, re-sorted,
// each hit's distance the one its own palace gave), the knowledge graph
// primary-first, by-id reads, sync, mine and deletes never sent to the
// primary.
func TestRealRoutingTable(t *testing.T) {
	r := startRealEdge(t, harnessOpts{policy: `{"version":1,"wings":{"private":{"replicate":"local"}}}`, device: "dev-7f3a"}, "")
	h := r.harness

	res, _ := h.call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "we chose sqlite for the outbox"})
	if res["success"] != true || res["edge"].(map[string]any)["replication"] != "queued" {
		t.Fatalf("add_drawer: %v", res)
	}
	both := fmt.Sprint(res["drawer_id"])
	// Local first: the local palace has it before the primary is asked.
	if got, _ := h.call("get_drawer", map[string]any{"drawer_id": both}); got["content"] != "we chose sqlite for the outbox" || got["edge"] != nil {
		t.Fatalf("get_drawer of a local write, from the local palace: %v", got)
	}
	waitFor(t, 30*time.Second, "the write on the primary", func() bool {
		_, ok := r.onServe(t, "shared")["we chose sqlite for the outbox"]
		return ok
	})
	onPrimary := r.onServe(t, "shared")["we chose sqlite for the outbox"]
	if onPrimary["drawer_id"] != both {
		t.Errorf("the drawer's id on the primary %v, locally %s: merged reads dedupe by it", onPrimary["drawer_id"], both)
	}
	if by := fmt.Sprint(onPrimary["metadata"].(map[string]any)["added_by"]); by != "opencode/-/dev-7f3a" {
		t.Errorf("provenance on the primary: added_by %q", by)
	}
	if got, _ := h.call("get_drawer", map[string]any{"drawer_id": both}); fmt.Sprint(got["metadata"].(map[string]any)["added_by"]) == "opencode/-/dev-7f3a" {
		t.Errorf("the local palace was stamped: %v", got["metadata"])
	}

	res, _ = h.call("add_drawer", map[string]any{"wing": "private", "room": "notes", "content": "my private outbox thoughts"})
	if !strings.Contains(fmt.Sprint(res["edge"]), "local only") {
		t.Fatalf("local wing: %v", res)
	}
	r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "the outbox flushes in order"})
	r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "bananas are a yellow fruit"})

	merged, _ := h.call("search", map[string]any{"query": "outbox", "limit": 10})
	hits := hitsOf(t, merged)
	own := map[string]float64{} // the primary's own distances
	for _, x := range hitsOf(t, r.srv.MustCall(t, "mempalace_search", map[string]any{"query": "outbox", "limit": 10})) {
		own[fmt.Sprint(x["drawer_id"])] = x["distance"].(float64)
	}
	origins, ids, last := map[string]string{}, map[string]int{}, -1.0
	for _, x := range hits {
		origins[fmt.Sprint(x["text"])] = palaceOf(x)
		ids[fmt.Sprint(x["drawer_id"])]++
		d, ok := x["distance"].(float64)
		if !ok || d < last {
			t.Errorf("not sorted by distance: %v", hits)
		}
		last = d
		if p, ok := own[fmt.Sprint(x["drawer_id"])]; ok && palaceOf(x) != "local" && math.Abs(p-d) > canaryTolerance {
			t.Errorf("hit %v: distance %v, the primary's own %v", x["text"], d, p)
		}
	}
	want := map[string]string{"we chose sqlite for the outbox": "both", "my private outbox thoughts": "local", "the outbox flushes in order": "primary"}
	for text, o := range want {
		if origins[text] != o {
			t.Errorf("hit %q: origin %q, want %q (all %v)", text, origins[text], o, origins)
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("drawer %s is %d hits", id, n)
		}
	}
	if merged["degraded"] != nil || merged["embedder_mismatch"] != nil {
		t.Fatalf("merged search: %v", merged)
	}
	if two, _ := h.call("search", map[string]any{"query": "outbox", "limit": 2}); len(hitsOf(t, two)) != 2 {
		t.Fatalf("limit not applied to the merged list: %v", two)
	}

	// Primary first: a fact only the primary has.
	r.srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "fleet", "predicate": "uses", "object": "edge"})
	if q, _ := h.call("kg_query", map[string]any{"entity": "fleet"}); q["count"] != 1.0 || q["edge"].(map[string]any)["source"] != "primary" {
		t.Fatalf("kg_query: %v", q)
	}
	// By id: a drawer the local palace lacks comes from the primary.
	onlyThere := r.onServe(t, "shared")["the outbox flushes in order"]["drawer_id"]
	if got, _ := h.call("get_drawer", map[string]any{"drawer_id": onlyThere}); got["content"] != "the outbox flushes in order" || got["edge"].(map[string]any)["source"] != "primary" {
		t.Fatalf("get_drawer of a primary-only drawer: %v", got)
	}

	// Never sent to the primary: sync, mine, reconnect, hook_settings,
	// deletes. Each is answered by the local palace.
	src := filepath.Join(t.TempDir(), "project")
	os.MkdirAll(src, 0o700)
	os.WriteFile(filepath.Join(src, "notes.md"), []byte("# notes\n\nthe edge mines locally\n"), 0o600)
	for tool, args := range map[string]map[string]any{
		"sync":          {},
		"mine":          {"source": src, "dry_run": true},
		"reconnect":     {},
		"hook_settings": {},
		"delete_drawer": {"drawer_id": both},
	} {
		got, res := h.call(tool, args)
		if res.IsError && got["local"] == "down" {
			t.Errorf("%s: the local palace did not answer: %v", tool, got)
		}
		if n := r.proxy.Calls("mempalace_" + tool); n != 0 {
			t.Errorf("%s reached the primary %d times", tool, n)
		}
	}
	if _, ok := r.onServe(t, "shared")["we chose sqlite for the outbox"]; !ok {
		t.Fatal("a local delete removed the primary's copy")
	}
	// the delete left a tombstone: the primary's copy is not read back
	// (issue 27; the device is no admin here, so it stays on the primary)
	if got, _ := h.call("get_drawer", map[string]any{"drawer_id": both}); got["content"] != nil || !strings.HasPrefix(fmt.Sprint(got["error"]), "hidden by this device's own delete") {
		t.Fatalf("after the local delete the primary's copy is read back: %v", got)
	}

	// The edge's mailbox reads the real coordination log: an ask to this
	// agent is owed until its ack (queued through the edge) is on serve.
	ask := r.srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "task.request", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@edge-test", "status": "open", "body": "review"})["event"].(map[string]any)["id"]
	if box, _ := h.call("mailbox", nil); box["count"] != 1.0 || fmt.Sprint(box["owed"].([]any)[0].(map[string]any)["id"]) != ask {
		t.Fatalf("the mailbox: %v", box)
	}
	h.call("event_ack", map[string]any{"event_id": ask, "from_agent": "opencode@edge-test", "status": "applied"})
	waitFor(t, 30*time.Second, "the ack on serve", func() bool { return r.proxy.Calls("mempalace_event_ack") >= 1 })
	if box, _ := h.call("mailbox", nil); box["count"] != 0.0 {
		t.Fatalf("the mailbox after the ack: %v", box)
	}
}

// TestRealDegradedThenRecovers: with real serve killed, reads answer from
// the real local palace marked degraded (search, list_drawers, the
// knowledge graph), writes land locally and queue, coordination reads say
// the primary is unreachable; when serve comes back on the same port the
// queued writes arrive once each.
func TestRealDegradedThenRecovers(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written while online"})
	h.call("kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite"})
	waitFor(t, 30*time.Second, "replication", func() bool { return r.proxy.Calls("mempalace_kg_add") == 1 && len(r.onServe(t, "w")) == 1 })
	// serve seen the call is not the edge having its answer: until the
	// outbox is empty the fact counts as unsent and kg_query stays local
	// without trying the primary (CI 31 met that window).
	h.drained()

	if err := r.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	got, _ := h.call("search", map[string]any{"query": "online"})
	if got["degraded"] != true || len(hitsOf(t, got)) != 1 || hitsOf(t, got)[0]["text"] != "written while online" {
		t.Fatalf("search with the primary down: %v", got)
	}
	if got, _ := h.call("list_drawers", map[string]any{"wing": "w"}); got["degraded"] != true || got["count"] != 1.0 {
		t.Fatalf("list_drawers with the primary down: %v", got)
	}
	if got, _ := h.call("kg_query", map[string]any{"entity": "edge"}); got["degraded"] != true || got["count"] != 1.0 || got["edge"].(map[string]any)["source"] != "local" {
		t.Fatalf("kg_query with the primary down: %v", got)
	}
	if got, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": "offline, still writing"}); got["success"] != true || got["edge"].(map[string]any)["replication"] != "queued" {
		t.Fatalf("offline write: %v", got)
	}
	h.call("kg_invalidate", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite", "ended": "2026-06-30"})
	if got, res := h.call("event_list", map[string]any{}); !res.IsError || !strings.Contains(fmt.Sprint(got["error"]), "primary is unreachable") {
		t.Fatalf("offline coordination read: %v", got)
	}

	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the queued writes on the primary", func() bool {
		return len(r.onServe(t, "wing_opencode")) == 1 && r.proxy.Calls("mempalace_kg_invalidate") >= 1
	})
	time.Sleep(500 * time.Millisecond)
	if n := len(r.onServe(t, "wing_opencode")); n != 1 {
		t.Fatalf("the diary arrived %d times", n)
	}
	q := r.srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": "edge"})
	if facts, _ := q["facts"].([]any); len(facts) != 1 || facts[0].(map[string]any)["valid_to"] != "2026-06-30" {
		t.Fatalf("the fact closed offline, on the primary: %v", q)
	}
	if got, _ := h.call("search", map[string]any{"query": "online"}); got["degraded"] != nil {
		t.Fatalf("still degraded after recovery: %v", got)
	}
}

// TestRealKGReadIsLocalOnlyForTheEntityOfAnUnsentFact: with this device's
// fact held in the outbox (its policy.json does not parse, so no write is
// sent), a kg_query about another entity answers with what the fleet
// knows, from serve, and one about the held fact's entity (as MemPalace
// ids it) answers from the local mempalace-mcp, which has it.
func TestRealKGReadIsLocalOnlyForTheEntityOfAnUnsentFact(t *testing.T) {
	r := startRealEdge(t, harnessOpts{policy: `{"version": 1, "wings": {`}, "") // cut off mid-edit
	h := r.harness
	r.srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "Gateway", "predicate": "guards", "object": "serve"}) // another device's
	if got, _ := h.call("kg_add", map[string]any{"subject": "Edge Router", "predicate": "uses", "object": "outbox"}); got["edge"].(map[string]any)["replication"] != "held" {
		t.Fatalf("kg_add with the policy broken: %v, want it held", got)
	}
	got, _ := h.call("kg_query", map[string]any{"entity": "gateway"})
	if ed, _ := got["edge"].(map[string]any); got["count"] != 1.0 || ed["source"] != "primary" {
		t.Errorf("kg_query of an entity no unsent fact names: %v, want serve's fact", got)
	}
	got, _ = h.call("kg_query", map[string]any{"entity": "edge router"})
	if ed, _ := got["edge"].(map[string]any); got["count"] != 1.0 || ed["source"] != "local" || !strings.Contains(asString(ed["why"]), "not on the primary yet") {
		t.Errorf("kg_query of the held fact's entity: %v, want it from the local palace, saying why", got)
	}
	if n := r.proxy.Calls("mempalace_kg_add"); n != 0 {
		t.Errorf("the held kg_add reached serve %d times", n)
	}
}

// TestRealEmbedderCanary: the local palace embeds with another model than
// the primary, and real MemPalace 3.11 records the same identity for both
// (the bare "openai-compat" in each palace's mempalace_embedder.json), so
// only the distances can tell. A drawer on both sides with different
// distances stops merging: the answer is the primary's ranking alone,
// marked, and the mismatch is recorded for edge status.
func TestRealEmbedderCanary(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "embeddinggemma")
	h := r.harness
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the same drawer on both sides"})
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "a drawer about the same sides"})
	waitFor(t, 30*time.Second, "replication", func() bool { return len(r.onServe(t, "w")) == 2 })
	for _, dir := range []string{r.local.Dir, r.srv.Palace().Dir} {
		b, err := os.ReadFile(filepath.Join(dir, "mempalace_embedder.json"))
		if err != nil || !strings.Contains(string(b), `"openai-compat"`) {
			t.Fatalf("%s: MemPalace's recorded embedder: %s %v", dir, b, err)
		}
	}
	got, _ := h.call("search", map[string]any{"query": "same drawer sides", "limit": 5})
	if got["embedder_mismatch"] != true {
		t.Fatalf("the canary did not fire: %v", got)
	}
	own := r.srv.MustCall(t, "mempalace_search", map[string]any{"query": "same drawer sides", "limit": 5})
	hits, ownHits := hitsOf(t, got), hitsOf(t, own)
	if len(hits) != len(ownHits) {
		t.Fatalf("not the primary's ranking: %v, the primary's %v", hits, ownHits)
	}
	for i := range hits {
		if hits[i]["drawer_id"] != ownHits[i]["drawer_id"] || palaceOf(hits[i]) != "primary" {
			t.Errorf("hit %d: %v, the primary's %v", i, hits[i], ownHits[i])
		}
	}
	if h.edge.mismatchDetail() == "" {
		t.Error("the mismatch was not recorded")
	}
}

// TestRealEmbedderCanaryComparesOnlyTheSameText: both palaces embed with
// one model; a drawer whose text differs between them (updated on the
// primary by another device, not here yet) and a drawer of two chunks
// give two distances under one drawer_id, which say nothing about the
// embedders: real MemPalace 3.11's hits are merged, nothing recorded.
func TestRealEmbedderCanaryComparesOnlyTheSameText(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	res, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "alpha bravo charlie delta"})
	long := strings.Repeat("alpha bravo charlie ", 40) + strings.Repeat("zulu yankee alpha ", 40)
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": long})
	waitFor(t, 30*time.Second, "replication", func() bool { return len(r.onServe(t, "w")) == 2 })
	r.srv.MustCall(t, "mempalace_update_drawer", map[string]any{"drawer_id": res["drawer_id"], "content": "alpha bravo zulu yankee"})
	got, _ := h.call("search", map[string]any{"query": "alpha bravo yankee", "limit": 10})
	if ed, _ := got["edge"].(map[string]any); got["embedder_mismatch"] != nil || ed["merged"] != true {
		t.Fatalf("one model, merged search off: %v", got)
	}
	if d := h.edge.mismatchDetail(); d != "" {
		t.Fatalf("recorded as an embedder mismatch: %s", d)
	}
}

// TestRealLightServerToolsAreUnknownWrites: with mempalace-light-mcp as
// the local server, its query-language tools (palace_query, palace_exec,
// palace_coordinate) are tools the catalogue does not know, and the edge
// treats them as every such tool: a write, answered by the local palace
// first, then queued for the primary. One query string can carry a write
// (palace_exec's add_drawer here), so nothing about it can be read as
// harmless; the primary (which has no such tool) never executes it.
func TestRealLightServerToolsAreUnknownWrites(t *testing.T) {
	local := realpalace.New(t)
	srv := realpalace.New(t).Serve(t, testToken)
	srv.Seed(t, realpalace.Drawer("elsewhere", "r", "the primary's own drawer"))
	proxy := realpalace.NewProxy(t, srv.URL)
	h := start(t, harnessOpts{realLocal: local, primaryURL: proxy.URL, timeout: 30 * time.Second,
		child: []string{local.Bin("mempalace-light-mcp"), "--palace", local.Dir}})
	for _, tool := range []string{"palace_query", "palace_exec", "palace_coordinate"} {
		if rec, known := catalogue.Lookup(tool); known || rec.Reads {
			t.Fatalf("%s: the catalogue knows it (%+v)", tool, rec)
		}
	}
	got, res := h.callRaw("palace_exec", map[string]any{"action": "add_drawer", "wing": "shared", "room": "notes", "content": "filed through the query language"})
	if res.IsError || got["success"] != true || !strings.HasPrefix(fmt.Sprint(got["drawer_id"]), "drawer_shared_notes_") || got["edge"].(map[string]any)["replication"] != "queued" {
		t.Fatalf("palace_exec through the edge: not filed locally first, then queued: %v", got)
	}
	if q, _ := h.callRaw("palace_query", map[string]any{"query": "STATUS"}); q["edge"].(map[string]any)["replication"] != "queued" {
		t.Fatalf("palace_query through the edge: not treated as a write: %v", q)
	}
	// The primary has no such tool: the op is refused as a permanent
	// error, retried a few times, then dead for an operator; the
	// palace_query op waits behind it, in order. Nothing is executed on
	// the primary, nothing is lost from the outbox.
	var ops []outbox.Op
	waitFor(t, 60*time.Second, "the palace_exec op dead after the primary refused it", func() bool {
		var err error
		if ops, err = h.edge.outbox.List(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
		return len(ops) == 2 && ops[0].State == outbox.Dead
	})
	if ops[0].Tool != "palace_exec" || ops[1].Tool != "palace_query" || !strings.Contains(string(ops[0].Error), "Unknown tool") || proxy.Calls("palace_exec") < 1 {
		t.Fatalf("the ops: %+v (primary calls %v)", ops, proxy.Tools())
	}
	if page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "shared"}); page["count"] != 0.0 {
		t.Fatalf("the primary executed a query-language write: %v", page)
	}

}

// TestRealEdgeAndItsMemPalaceShareOnePalace: on a fresh HOME (no
// ~/.mempalace install, MEMPALACE_PALACE_PATH unset), an edge configured
// from its environment as `devbox-config edge` is keeps its outbox in the
// palace where its real mempalace-mcp keeps chroma.sqlite3. The edge used
// to keep it in ~/.mempalace/palace/edge while MemPalace 3.11 wrote
// ~/.config/mempalace/palace: the outbox and the palace in two places.
func TestRealEdgeAndItsMemPalaceShareOnePalace(t *testing.T) {
	p := realpalace.New(t)
	var env []string
	for _, kv := range p.Env() { // HOME's rules, not the testbed's config directory
		if !strings.HasPrefix(kv, "MEMPALACE_CONFIG_DIR=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	h := start(t, harnessOpts{env: append(env, "MEMPALACE_EDGE_CHILD="+p.Bin("mempalace-mcp")), timeout: 30 * time.Second})
	if res, _ := h.call("add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "one palace for the edge and MemPalace"}); res["success"] != true {
		t.Fatalf("add_drawer: %v", res)
	}
	var palaces []string // where real MemPalace keeps chroma.sqlite3
	filepath.WalkDir(p.Home, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "chroma.sqlite3" {
			palaces = append(palaces, filepath.Dir(path))
		}
		return nil
	})
	if want := filepath.Join(p.Home, ".config", "mempalace", "palace"); len(palaces) != 1 || palaces[0] != want {
		t.Fatalf("real MemPalace's palace: %v, want %s (3.11's on a fresh HOME)", palaces, want)
	}
	if _, err := os.Stat(filepath.Join(palaces[0], "edge", outbox.FileName)); err != nil {
		t.Errorf("the edge's outbox is not in MemPalace's palace %s: %v", palaces[0], err)
	}
}

// attack71 F4 with real MemPalace 3.11: an add_drawer whose source_file
// is a number, which the local mempalace-mcp answered "Internal tool
// error" (a TypeError), is refused by the edge as the gateway refuses it,
// and nothing is written or queued; the same drawer with a file's name
// is written.
func TestRealAWronglyTypedWriteIsRefusedBeforeThePalaces(t *testing.T) {
	r := startRealEdge(t, harnessOpts{}, "")
	h := r.harness
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_add_drawer", Arguments: map[string]any{"wing": "w", "room": "typed", "content": "typed, refused", "source_file": 123}})
	if err == nil || !strings.Contains(err.Error(), "parameter 'source_file': must be a string, not a number") {
		t.Fatalf("add_drawer with source_file 123: %v, want refused naming source_file", err)
	}
	if ops, err := h.edge.outbox.List(ctx, 10, outbox.Queued, outbox.Inflight, outbox.Done, outbox.Dead); err != nil || len(ops) != 0 {
		t.Errorf("the outbox holds %d ops (%v)", len(ops), err)
	}
	if got, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "typed", "content": "typed, taken", "source_file": "notes.md"}); got["success"] != true {
		t.Fatalf("add_drawer with source_file notes.md: %v", got)
	}
	got, _ := h.call("list_drawers", map[string]any{"wing": "w", "room": "typed"})
	if got["count"] != 1.0 || strings.Contains(fmt.Sprint(got), "refused") {
		t.Errorf("list_drawers after the refused and the taken add_drawer: %v, want the taken one alone", got)
	}
	if n := r.proxy.Calls("mempalace_add_drawer"); n > 1 {
		t.Errorf("serve got %d add_drawer calls, want the taken one at most", n)
	}
}
