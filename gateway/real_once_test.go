package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// realWrite is one write of every type the outbox replays, as an agent
// made it, and how to count its record on real serve.
type realWrite struct {
	tool string
	args map[string]any
	// count is how many copies of the record serve holds.
	count func(t *testing.T, c *realCounter) int
	want  int
	// inDoubt: no look-up can tell whether the write landed (no tool lists
	// what it makes, no argument carries an op id): without a ledger that
	// recorded the answer, the op must end in doubt, never re-sent.
	inDoubt bool
}

// realCounter reads real serve: through its tools, and its coordination
// log's file read-only (no MemPalace tool lists artifacts).
type realCounter struct {
	srv *realpalace.Server
	log *sql.DB
}

func (c *realCounter) rows(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := c.log.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (c *realCounter) drawers(t *testing.T, wing, content string) int {
	t.Helper()
	page := c.srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": wing, "limit": 100})
	n := 0
	ds, _ := page["drawers"].([]any)
	for _, x := range ds {
		d := c.srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": x.(map[string]any)["drawer_id"]})
		if d["content"] == content {
			n++
		}
	}
	return n
}

func (c *realCounter) facts(t *testing.T, entity, predicate, object string, closed bool) int {
	t.Helper()
	q := c.srv.MustCall(t, "mempalace_kg_query", map[string]any{"entity": entity})
	n := 0
	fs, _ := q["facts"].([]any)
	for _, x := range fs {
		f := x.(map[string]any)
		if f["subject"] == entity && f["predicate"] == predicate && f["object"] == object && (f["valid_to"] != nil) == closed {
			n++
		}
	}
	return n
}

// realWrites are the writes, with serve seeded for them (an ask to ack,
// facts to close and supersede).
func realWrites(t *testing.T, srv *realpalace.Server) []realWrite {
	ask := srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "oc@lab", "to_agent": "pi@lab", "body": "the ask"})
	target := ask["event"].(map[string]any)["id"]
	srv.Seed(t, realpalace.Fact("ada", "works_at", "acme", "", ""), realpalace.Fact("bob", "works_at", "acme", "", ""))
	body := func(b string) func(*testing.T, *realCounter) int {
		return func(t *testing.T, c *realCounter) int {
			return c.rows(t, `SELECT count(*) FROM events WHERE body = ?`, b)
		}
	}
	return []realWrite{
		{tool: "mempalace_add_drawer", args: map[string]any{"wing": "w", "room": "r", "content": "one drawer"}, want: 1,
			count: func(t *testing.T, c *realCounter) int { return c.drawers(t, "w", "one drawer") }},
		{tool: "mempalace_checkpoint", args: map[string]any{"items": []any{map[string]any{"wing": "w", "room": "cp", "content": "one checkpoint item about zebras"}},
			"diary": map[string]any{"agent_name": "pi", "entry": "one checkpoint diary"}}, want: 2,
			count: func(t *testing.T, c *realCounter) int {
				return c.drawers(t, "w", "one checkpoint item about zebras") + c.drawers(t, "wing_pi", "one checkpoint diary")
			}},
		{tool: "mempalace_diary_write", args: map[string]any{"agent_name": "pi", "entry": "one diary entry"}, want: 1,
			count: func(t *testing.T, c *realCounter) int { return c.drawers(t, "wing_pi", "one diary entry") }},
		{tool: "mempalace_kg_add", args: map[string]any{"subject": "ada", "predicate": "likes", "object": "go"}, want: 1,
			count: func(t *testing.T, c *realCounter) int { return c.facts(t, "ada", "likes", "go", false) }},
		{tool: "mempalace_kg_add", args: map[string]any{"subject": "ada", "predicate": "worked_at", "object": "initech", "valid_from": "2020-01-01", "valid_to": "2021-01-01"}, want: 1,
			count: func(t *testing.T, c *realCounter) int { return c.facts(t, "ada", "worked_at", "initech", true) }},
		{tool: "mempalace_kg_invalidate", args: map[string]any{"subject": "ada", "predicate": "works_at", "object": "acme", "ended": "2026-01-01"}, want: 1,
			count: func(t *testing.T, c *realCounter) int {
				return c.facts(t, "ada", "works_at", "acme", true) - c.facts(t, "ada", "works_at", "acme", false)
			}},
		{tool: "mempalace_kg_supersede", args: map[string]any{"subject": "bob", "predicate": "works_at", "old_object": "acme", "new_object": "globex", "at": "2026-01-01"}, want: 2,
			count: func(t *testing.T, c *realCounter) int {
				return c.facts(t, "bob", "works_at", "acme", true) + c.facts(t, "bob", "works_at", "globex", false) - c.facts(t, "bob", "works_at", "acme", false)
			}},
		{tool: "mempalace_event_append", args: map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "one event"}, want: 1, count: body("one event")},
		{tool: "mempalace_event_ack", args: map[string]any{"event_id": target, "from_agent": "pi@lab", "status": "applied", "body": "one ack"}, want: 1, count: body("one ack")},
		{tool: "mempalace_patch_submit", args: map[string]any{"content": "diff --git a/one b/one\n", "from_agent": "pi@lab", "stream": "s", "body": "one patch"}, want: 2,
			count: func(t *testing.T, c *realCounter) int {
				return body("one patch")(t, c) + c.rows(t, `SELECT count(*) FROM artifacts WHERE content = ?`, "diff --git a/one b/one\n")
			}},
		{tool: "mempalace_artifact_put", args: map[string]any{"kind": "note", "content": "one artifact", "created_by": "pi@lab"}, want: 1, inDoubt: true,
			count: func(t *testing.T, c *realCounter) int {
				return c.rows(t, `SELECT count(*) FROM artifacts WHERE content = ?`, "one artifact")
			}},
		{tool: "mempalace_task_create", args: map[string]any{"project": "p", "from_agent": "pi@lab", "to_agent": "oc@lab", "goal": "one task", "branch": "main", "base_commit": "0123456789abcdef", "done": "tests pass"}, want: 1, inDoubt: true,
			count: func(t *testing.T, c *realCounter) int {
				return c.rows(t, `SELECT count(*) FROM events WHERE type = 'task.request' AND body LIKE 'Goal:' || char(10) || 'one task' || char(10) || '%'`)
			}},
	}
}

// TestRealExactlyOnce: every write type the edge's outbox replays, each
// with its answer lost after real MemPalace 3.11.0 applied it (a proxy in
// front of serve makes the call, then drops the connection), sent by the
// outbox's own flusher: directly to serve, through the gateway with the
// proxy behind it (the gateway's upstream answer lost), and through the
// gateway with the proxy before it (the gateway's answer lost). Every
// record is on serve exactly once; a write no look-up can find
// (artifact_put, task_create) is never sent again silently: without a
// ledger that recorded its answer it ends in doubt.
func TestRealExactlyOnce(t *testing.T) {
	for _, path := range []string{"serve", "gateway, answer lost behind it", "gateway, answer lost before it"} {
		t.Run(path, func(t *testing.T) {
			srv := realpalace.New(t).Serve(t, upstreamToken)
			writes := realWrites(t, srv)
			var target, token string
			var proxy *realpalace.Proxy
			dev := Device{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@lab"}, Coordinator: true, ReadRate: 1e9, WriteRate: 1e9}
			switch path {
			case "serve":
				proxy = realpalace.NewProxy(t, srv.URL)
				target, token = proxy.URL, upstreamToken
			case "gateway, answer lost behind it":
				proxy = realpalace.NewProxy(t, srv.URL)
				g := newGWAt(t, []Device{dev}, &upstream{name: "proxy", url: proxy.URL})
				g.withLedger()
				target, token = g.http.URL+"/mcp", g.tokens["dev1"]
			default:
				g := newGWAt(t, []Device{dev}, &upstream{name: "serve", url: srv.URL})
				g.withLedger()
				proxy = realpalace.NewProxy(t, g.http.URL)
				target, token = proxy.URL, g.tokens["dev1"]
			}
			for _, w := range writes {
				proxy.Drop(w.tool)
			}
			st, p, f := edgeOutbox(t, target, token)
			ctx := context.Background()
			ops := make([]string, len(writes)) // op ids, by write
			for i, w := range writes {
				b, _ := json.Marshal(w.args)
				op, err := st.Enqueue(ctx, outbox.Write{Name: w.tool, Payload: b})
				if err != nil {
					t.Fatal(err)
				}
				ops[i] = op.ID
			}
			if s := drain(t, st, p, f, 90*time.Second); s.ByState[outbox.Queued]+s.ByState[outbox.Inflight] != 0 {
				t.Fatalf("the outbox did not drain: %+v", s)
			}
			if lost := proxy.Lost(); len(lost) != len(writes) {
				t.Errorf("answers lost: %v, want one per write", lost)
			}

			db, err := sql.Open("sqlite", "file:"+filepath.Join(srv.Palace().Dir, "logstream.sqlite3")+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			c := &realCounter{srv: srv, log: db}
			for i, w := range writes {
				name := strings.TrimPrefix(w.tool, "mempalace_")
				if w.tool == "mempalace_kg_add" && w.args["valid_to"] != nil {
					name += " (closed)"
				}
				t.Run(name, func(t *testing.T) {
					if n := w.count(t, c); n != w.want {
						t.Errorf("%d on serve, want %d", n, w.want)
					}
					want := outbox.Done
					if w.inDoubt && path != "gateway, answer lost before it" {
						want = outbox.InDoubt // nothing can look it up and no ledger recorded its answer
					}
					op, err := st.GetByID(ctx, ops[i])
					if err != nil || op.State != want {
						t.Errorf("op %+v, %v: want %s", op, err, want)
					}
				})
			}
		})
	}
}

// A fleet's first write to a primary that holds nothing yet may be a
// diary entry. Real MemPalace 3.11.0 answers the look-up made before it is
// sent (list_drawers) with "Chroma database missing" until some drawer
// exists; that means nothing is there, and the entry goes, sent straight
// to serve or through the gateway by a device that reads only its own
// wings. (It waited in the outbox until another device filed a drawer:
// found by outside testers, attack102 F1 through the gateway, which
// refused that answer as a shape it does not know.)
func TestRealDiaryIsTheFirstWriteToAnEmptyPrimary(t *testing.T) {
	for _, via := range []string{"serve", "gateway"} {
		t.Run(via, func(t *testing.T) {
			srv := realpalace.New(t).Serve(t, upstreamToken)
			url, token := srv.URL, upstreamToken
			if via == "gateway" {
				g := newGWAt(t, []Device{{ID: "dev1", Label: "dev1", Read: []string{"wing_pi"}, Write: []string{"wing_pi"}, Agents: []string{"pi@dev1"}, ReadRate: 1e9, WriteRate: 1e9}},
					&upstream{name: "mempalace " + realpalace.Version, url: srv.URL})
				url, token = g.http.URL+"/mcp", g.tokens["dev1"]
			}
			st, p, f := edgeOutbox(t, url, token)
			ctx := context.Background()
			b, _ := json.Marshal(map[string]any{"agent_name": "pi", "entry": "the first entry on a new primary"})
			if _, err := st.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: b}); err != nil {
				t.Fatal(err)
			}
			if s := drain(t, st, p, f, 30*time.Second); s.ByState[outbox.Done] != 1 {
				ops, _ := st.List(ctx, 10)
				for _, o := range ops {
					t.Logf("op %s attempts %d: %s", o.State, o.Attempts, o.Error)
				}
				t.Fatalf("the entry was not sent: %+v", s)
			}
			read, err := srv.Client.Call("mempalace_diary_read", map[string]any{"agent_name": "pi"})
			if err != nil || !strings.Contains(fmt.Sprint(read), "the first entry on a new primary") {
				t.Fatalf("diary on the primary: %v %v", read, err)
			}
		})
	}
}

// The diary write of a palace sharing its device with another, whose
// upstream answer the gateway loses, against real serve: settled by the
// gateway (TestDiaryWriteWhoseUpstreamAnswerWasLostIsSettledByTheGateway).
func TestRealDiaryWriteWhoseUpstreamAnswerWasLost(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	diaryLostAnswer(t, srv.URL, "mempalace_diary_write", realEntries(t, srv))
}

// The same for a checkpoint carrying the entry as its diary
// (TestCheckpointWhoseUpstreamAnswerWasLostIsSettledByTheGateway).
func TestRealCheckpointWhoseUpstreamAnswerWasLost(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	diaryLostAnswer(t, srv.URL, "mempalace_checkpoint", realEntries(t, srv))
}

// realEntries is the ids of the entries in serve's wing_pi diary holding a text.
func realEntries(t *testing.T, srv *realpalace.Server) func(text string) map[string]bool {
	return func(text string) map[string]bool {
		ids := map[string]bool{}
		page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "wing_pi", "room": "diary", "limit": 100})
		ds, _ := page["drawers"].([]any)
		for _, x := range ds {
			id, _ := x.(map[string]any)["drawer_id"].(string)
			if d := srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": id}); d["content"] == text {
				ids[id] = true
			}
		}
		return ids
	}
}
