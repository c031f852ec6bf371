package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/strictjson"
)

// The parse step alone: what is refused, with which code, and what the
// upstream would receive.
func TestParseStep(t *testing.T) {
	t.Parallel()
	for body, code := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`:                                            0,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`:                              0,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status"}}`: 0,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`: 0, // unknown tools are the authorizer's
		`{not json`: -32700,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`:                                                              -32600,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} {}`:                                                             -32600,
		`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`:                                          -32600,
		`{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`:                                                      -32600,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`:                                                               -32600,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`:                                                                -32600,
		`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`:                                                      -32601,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status","arguments":[]}}`:      -32602,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status","cursor":"x"}}`:        -32602,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`:                                -32602,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":1,"k":2}}}`:          -32600,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":{"x":1,"X":2}}}}`:    -32600,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"\u212a":1,"k":2}}}`:     -32600, // KELVIN SIGN folds to k
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":"` + "\xff" + `"}}}`: -32600,
		`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`:                                         -32600,
	} {
		req, bad := parseRequest([]byte(body))
		switch {
		case code == 0 && bad != nil:
			t.Errorf("%s: refused %v", body, bad.msg)
		case code != 0 && (bad == nil || bad.code != code):
			t.Errorf("%s: %+v, want code %d", body, bad, code)
		case code == 0:
			if again, bad := parseRequest(req.encode()); bad != nil || again.Method != req.Method || again.Tool != req.Tool {
				t.Errorf("%s: its re-encoding %s parses differently", body, req.encode())
			}
		}
	}
	// A number keeps its literal; HTML characters are not escaped.
	req, _ := parseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"<a&b>","limit":1.50}}}`))
	if got := string(req.encode()); !strings.Contains(got, `"limit":1.50`) || !strings.Contains(got, `"query":"<a&b>"`) {
		t.Errorf("re-encoding: %s", got)
	}
}

func TestArgumentStep(t *testing.T) {
	t.Parallel()
	search, _ := catalogue.Lookup("mempalace_search")
	checkpoint, _ := catalogue.Lookup("mempalace_checkpoint")
	for _, c := range []struct {
		t    catalogue.Tool
		args string
		want string
	}{
		{search, `{"query":"q","wing":"shared"}`, ""},
		{search, `{"query":"q","min_similarity":0.5}`, "'min_similarity'"},
		{search, `{"query":"q","b":1,"a":2}`, "'a', 'b'"},
		{search, `{"query":"q","wing":5}`, "'wing': must be a string"},
		{checkpoint, `{"items":[{"wing":["x"]}]}`, "items[0].wing"},
		{checkpoint, `{"items":{}}`, "'items': must be an array"},
		{checkpoint, `{"items":[],"diary":{"agent_name":1}}`, "diary.agent_name"},
	} {
		v, _ := strictjson.Decode([]byte(c.args))
		bad := checkArgs(c.t, v.(map[string]any))
		if (c.want == "") != (bad == nil) || (bad != nil && !strings.Contains(bad.msg, c.want)) {
			t.Errorf("%s %s: %v, want %q", c.t.Name, c.args, bad, c.want)
		}
	}
}

func TestQueryStep(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"to_agent=a%40b&room=r":   "room=r&to_agent=a%40b",
		"to_agent=a&status=":      "to_agent=a",
		"to_agent=a&to_agent=b":   "error",
		"to_agent=a&TO_AGENT=b":   "error", // not a parameter of the route
		"to_agent=a;room=b":       "error",
		"to_agent=a&room=%zz":     "error",
		"to_agent=a+b&room=x%20y": "room=x+y&to_agent=a+b",
	} {
		q, err := parseQuery(raw, streamQuery)
		got := "error"
		if err == nil {
			got = rebuildQuery(q)
		}
		if got != want {
			t.Errorf("%q: %q, want %q", raw, got, want)
		}
	}
}

// Issue 12's behaviour changes, decided by the catalogue.
func TestCatalogueDecisions(t *testing.T) {
	t.Parallel()
	laptop, desk, admin := &devices[0], &devices[1], &devices[2]
	for _, c := range []struct {
		d     *Device
		tool  string
		allow bool
	}{
		{admin, "mempalace_frobnicate", false}, // unknown: denied even for admin
		{admin, "frobnicate", false},
		{laptop, "mempalace_traverse", false}, // graph reads: read "*" only
		{desk, "mempalace_traverse", true},
		{desk, "mempalace_find_tunnels", true},
		{desk, "mempalace_graph_stats", true},
		{desk, "mempalace_list_tunnels", true},
		{desk, "mempalace_list_hallways", true},
		{desk, "mempalace_follow_tunnels", true},
		{desk, "mempalace_find_duplicates", true},
		{laptop, "mempalace_find_duplicates", false},
		{laptop, "mempalace_get_aaak_spec", true}, // static: any read scope
		{&Device{ID: "no-read"}, "mempalace_get_aaak_spec", false},
		{desk, "mempalace_sync", false},
		{admin, "mempalace_sync", false}, // issue 27: never on the primary
		{admin, "mempalace_mine", false},
		{admin, "mempalace_delete_drawer", true},
	} {
		if got := Authorize(c.d, c.tool, map[string]any{}, "").Allow; got != c.allow {
			t.Errorf("%s %s: allowed=%v, want %v", c.d.ID, c.tool, got, c.allow)
		}
	}
	// mempalace-light-mcp's query language: refused to every device, with
	// the reason, and unknown to the catalogue (the edge writes them).
	for _, tool := range catalogue.QueryLanguage {
		if _, known := catalogue.Lookup(tool); known {
			t.Errorf("%s has a catalogue record: the edge would route it as that record says", tool)
		}
		for _, d := range []*Device{laptop, desk, admin, {ID: "all", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true}} {
			if dec := Authorize(d, tool, map[string]any{"query": "STATUS"}, ""); dec.Allow || dec.Rule != ruleQueryLanguage {
				t.Errorf("%s for %s: %+v", tool, d.ID, dec)
			}
		}
	}
	// Through the gateway: the graph reads are rate-limited as reads, so a
	// device with a tiny write rate is not held back by it.
	d := devices[1]
	d.WriteRate = 0.001
	g := newGW(t, []Device{d})
	for i := range 30 {
		if _, rpc, _ := g.call(g.tokens[d.ID], "list_tunnels", nil); rpc != nil && rpc["code"] == float64(CodeRateLimited) {
			t.Fatalf("read %d of list_tunnels limited as a write: %v", i, rpc)
		}
	}
	if _, rpc, _ := g.call(g.tokens[d.ID], "frobnicate", nil); rpc == nil || rpc["code"] != float64(CodeDenied) {
		t.Fatalf("an unknown tool: %v", rpc)
	}
}

// The write queue alone: a device over its share is refused while others
// are queued, and the slot passes between devices in turn. Each write is
// queued before the next is sent (waited for in the queue, not slept).
func TestWriteQueueTurns(t *testing.T) {
	t.Parallel()
	q := newWriteQueue(2, time.Minute)
	ctx := context.Background()
	if q.acquire(ctx, "a") != nil {
		t.Fatal("the free slot was refused")
	}
	order := make(chan string, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(dev string, queued int) {
		wg.Go(func() {
			if q.acquire(ctx, dev) != nil {
				order <- dev + ":refused"
				return
			}
			order <- dev
			q.release()
		})
		waitUntil(t, dev+"'s write queued", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.waiting[dev]) == queued
		})
	}
	start("a", 1)
	start("a", 2)
	start("a", 2) // over a's share of two
	if got := <-order; got != "a:refused" {
		t.Fatalf("over its share: %s", got)
	}
	start("b", 1)
	q.release()
	var got []string
	for range 3 {
		got = append(got, <-order)
	}
	if strings.Join(got, ",") != "a,b,a" {
		t.Fatalf("turns: %v, want a,b,a", got)
	}
}

// The filter step alone: a search answer holding another wing's hit and
// totals, for a device that reads only "shared", and for one that reads
// every wing.
func TestFilterStep(t *testing.T) {
	t.Parallel()
	s := &Server{}
	search, _ := catalogue.Lookup("mempalace_search")
	text := `{"query":"q","filters":{},"total_before_filter":9,"results":[{"wing":"shared","text":"a"},{"wing":"private_desk","text":"b","also_in":[{"wing":"private_desk"}]}]}`
	env := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}})
	out, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true}, []byte("1"), env)
	if err != nil {
		t.Fatal(err)
	}
	m := resultOf(out)
	if hits := m["results"].([]any); len(hits) != 1 || m["total_before_filter"] != nil || m["filtered"] != true {
		t.Fatalf("filtered: %v", m)
	}
	if out, _ := s.filterAnswer(context.Background(), &devices[1], search, Decision{Allow: true}, []byte("1"), env); string(out) != string(env) {
		t.Fatalf("a read-* device's answer was changed: %s", out)
	}
	for _, bad := range []string{
		`{"query":"q","cli_output":"x"}`, // the CLI's text, no wing named
		`{"query":"q","surprise":"x"}`,   // an unknown key
		`{"results":{"wing":"shared"}}`,  // results not a list
		`{"results":["private_desk"]}`,   // hits not objects
		`{"results":[{"wing":"shared","also_in":[],"also_in":[{"wing":"private_desk"}]}]}`, // folded copies twice: one would stay
		`{"results":[{"wing":"shared","wing":"private_desk"}]}`,                            // a wing twice: a client may read either
		`{"results":[{"wing":null,"wing":"shared"}]}`,                                      // the same, the first not a string
		`{"results":[{"wing":"","wing":"shared"}]}`,                                        // the same, the first empty
	} {
		env := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": bad}}}})
		if _, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true}, []byte("1"), env); err == nil {
			t.Errorf("%s: passed", bad)
		}
	}
	folded := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": `{"results":[{"wing":"shared","text":"a","also_in":[{"wing":"private_desk"}]}]}`}}}})
	if out, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true}, []byte("1"), folded); err != nil || strings.Contains(string(out), "also_in") {
		t.Errorf("a readable hit's folded copies in other wings: %s, %v", out, err)
	}
	cli := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": `{"query":"q","cli_output":"x"}`}}}})
	if _, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true, Wing: "shared"}, []byte("1"), cli); err != nil {
		t.Errorf("the CLI's text for one readable wing: %v", err)
	}
	two := encodeJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "text", "text": "{}"}}}})
	if _, err := s.filterAnswer(context.Background(), &devices[0], search, Decision{Allow: true}, []byte("1"), two); err == nil {
		t.Error("two content blocks passed")
	}
}

// TestPaddedNames: a name argument with whitespace at either end, as
// Python's str.strip() sees whitespace, is refused wherever it sits; the
// characters Python does not strip are not.
func TestPaddedNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r      rune
		strips bool
	}{
		{' ', true}, {'\t', true}, {'\n', true}, {'\v', true}, {'\f', true}, {'\r', true},
		{0x1c, true}, {0x1d, true}, {0x1e, true}, {0x1f, true}, // Python only
		{0x85, true}, {0xa0, true}, {0x1680, true}, {0x2000, true}, {0x2003, true}, {0x200a, true},
		{0x2028, true}, {0x2029, true}, {0x202f, true}, {0x205f, true}, {0x3000, true},
		{0x200b, false}, {0x180e, false}, {0xfeff, false}, {0x00, false}, {'_', false}, {'x', false},
	} {
		if catalogue.PythonSpace(c.r) != c.strips {
			t.Errorf("catalogue.PythonSpace(%U) = %v, Python's str.isspace says %v", c.r, !c.strips, c.strips)
		}
	}
	add, _ := catalogue.Lookup("mempalace_add_drawer")
	checkpoint, _ := catalogue.Lookup("mempalace_checkpoint")
	tunnel, _ := catalogue.Lookup("mempalace_create_tunnel")
	for _, c := range []struct {
		t    catalogue.Tool
		args map[string]any
		want string
	}{
		{add, map[string]any{"wing": "wing_instructions ", "room": "r"}, `'wing': "wing_instructions " has whitespace`},
		{add, map[string]any{"wing": "shared", "room": "\u3000r"}, `'room'`},
		{add, map[string]any{"wing": "shared", "room": "r r"}, ""},
		{add, map[string]any{"wing": "", "room": "r"}, ""}, // MemPalace refuses it itself
		{checkpoint, map[string]any{"items": []any{map[string]any{"wing": "ok"}, map[string]any{"wing": "w\u0085"}}}, "'items[1].wing'"},
		{checkpoint, map[string]any{"items": []any{}, "diary": map[string]any{"agent_name": "\u00a0pi"}}, "'diary.agent_name'"},
		{tunnel, map[string]any{"source_wing": "a", "target_wing": "b", "target_room": "r\x1f"}, "'target_room'"},
	} {
		bad := checkArgs(c.t, c.args)
		if (c.want == "") != (bad == nil) || (bad != nil && !strings.Contains(bad.msg, c.want)) {
			t.Errorf("%s %q: %v, want %q", c.t.Name, c.args, bad, c.want)
		}
	}
}

// attack69 F3: a write that waited out its time for the slot while
// another device's long write held it was refused as if this device's
// own share of the queue were full. Each refusal now says which it was.
func TestWriteQueueRefusalSaysWhy(t *testing.T) {
	t.Parallel()
	q := newWriteQueue(1, 300*time.Millisecond)
	ctx := context.Background()
	if q.acquire(ctx, "ci") != nil {
		t.Fatal("the free slot was refused")
	}
	waited := make(chan error, 1)
	go func() { waited <- q.acquire(ctx, "desk") }()
	for queued := false; !queued; { // desk's first write waits (not by the clock: CI 94's load)
		time.Sleep(time.Millisecond)
		q.mu.Lock()
		queued = len(q.waiting["desk"]) == 1
		q.mu.Unlock()
	}
	if err := q.acquire(ctx, "desk"); err == nil || !strings.Contains(err.Error(), "this device has 1 writes waiting") {
		t.Errorf("over desk's share: %v", err)
	}
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "held by another device's long write") || strings.Contains(err.Error(), "share") {
		t.Errorf("desk's write behind ci's: %v", err)
	}
	if err := q.acquire(ctx, "ci"); err == nil || !strings.Contains(err.Error(), "this device's own earlier write") {
		t.Errorf("ci's write behind its own: %v", err)
	}
}
