package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/edge/wire"
)

// emptyLocal answers as real MemPalace 3.11 does for a palace without a
// drawer collection: search "No palace found", every other call "Backend
// open failed" with isError (the double answers empty lists instead); or,
// missing, as before its first search (no database file): "Chroma
// database missing", without isError.
type emptyLocal struct{ missing bool }

func (l emptyLocal) Call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if p.Name == "mempalace_search" {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"error": "No palace found", "hint": "Run: mempalace init <dir> && mempalace mine <dir>"}`}}}, nil
	}
	if p.Name == "mempalace_reconnect" { // 3.11's answer when it cannot open the drawers after it
		msg := map[bool]string{true: "Chroma database missing", false: "Backend open failed: collection missing"}[l.missing]
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"success": false, "message": "` + msg + `", "drawers": 0, "vector_disabled": false, "details": "Could not open /p/chroma.sqlite3.", "hint": "Run: mempalace status or mempalace repair-status for diagnostics."}`}}}, nil
	}
	if l.missing {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"error": "Chroma database missing", "details": "Could not open missing database at /p/chroma.sqlite3.", "hint": "Run: mempalace status or mempalace repair-status for diagnostics."}`}}}, nil
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: `{"error": "Backend open failed: collection missing", "hint": "Run: mempalace status or mempalace repair-status"}`}}}, nil
}

func (emptyLocal) Relay(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error, error) {
	return nil, nil, ErrLocalDown
}

// refusing is a primary that refuses diary_read as a gateway does (a
// JSON-RPC error), and answers everything else.
type refusing struct{ inProcessPrimary }

func (s refusing) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	if p.Name == "mempalace_diary_read" {
		return nil, &jsonrpc.Error{Code: -32001, Message: `devbox-config gateway: agent_name "boss" is not one of this device's agents`}
	}
	return s.inProcessPrimary.Call(ctx, p, retry)
}

// sharedDrawer files content on the primary and returns its id.
func sharedDrawer(t *testing.T, primary *inProcess, wing, content string) string {
	t.Helper()
	return primaryTool(t, primary, "mempalace_add_drawer", map[string]any{"wing": wing, "room": "r", "content": content})["drawer_id"].(string)
}

// primaryTool is the in-process primary's answer to a call of tool.
func primaryTool(t *testing.T, primary *inProcess, tool string, args map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	line, err := primary.pl.Handle(wire.Request("x", "tools/call", b))
	if err != nil {
		t.Fatal(err)
	}
	raw, _, _ := wire.SplitAnswer(line)
	res, _ := wire.DecodeResult(raw)
	text, _ := objectText(res)
	return objectMap(text)
}

func edgeOf(m map[string]any) map[string]any { e, _ := m["edge"].(map[string]any); return e }

// A new device with the primary down answers each merged read with the
// empty answer of its shape, degraded, never MemPalace's "repair your
// palace" errors; get_drawer answers that the id is not here and the
// primary did not answer for it (not "Drawer not found": it may hold it).
func TestAnEmptyPalaceOfflineAnswersEmpty(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer, primary.down = emptyLocal{}, true
	for _, c := range []struct {
		tool  string
		args  map[string]any
		check func(m map[string]any) bool
	}{
		{"mempalace_search", map[string]any{"query": "zebra"}, func(m map[string]any) bool { l, ok := m["results"].([]any); return ok && len(l) == 0 }},
		{"mempalace_list_drawers", map[string]any{}, func(m map[string]any) bool {
			l, ok := m["drawers"].([]any)
			return ok && len(l) == 0 && m["count"] == 0.0
		}},
		{"mempalace_diary_read", map[string]any{"agent_name": "me"}, func(m map[string]any) bool { l, ok := m["entries"].([]any); return ok && len(l) == 0 }},
		{"mempalace_check_duplicate", map[string]any{"content": "zebra"}, func(m map[string]any) bool {
			l, ok := m["matches"].([]any)
			return ok && len(l) == 0 && m["is_duplicate"] == false
		}},
	} {
		m := routed(t, e, c.tool, c.args)
		if !c.check(m) || m["error"] != nil || m["degraded"] != true || edgeOf(m)["local"] != noDrawersYet || edgeOf(m)["primary"] == nil {
			t.Errorf("%s on an empty palace, the primary down: %v", c.tool, m)
		}
	}
	g := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": "drawer_x_y_1"})
	if msg, _ := g["error"].(string); !strings.HasPrefix(msg, notAnsweredPrefix+"drawer_x_y_1") || g["degraded"] != true || edgeOf(g)["local"] != noDrawersYet {
		t.Errorf("get_drawer on an empty palace, the primary down: %v", g)
	}
}

// A new device with the primary down answers the overview reads
// (status, list_wings, list_rooms, get_taxonomy) with a palace of no
// drawers, in MemPalace's shapes, degraded; never MemPalace's advice to
// repair a palace that is merely new, before its first search or after.
func TestAnEmptyPalaceOfflineAnswersEmptyOverviews(t *testing.T) {
	t.Parallel()
	for _, missing := range []bool{true, false} {
		e, _, primary, _ := routerUnderTest(t)
		e.localServer, primary.down = emptyLocal{missing: missing}, true
		for _, c := range []struct {
			tool string
			args map[string]any
			want map[string]any
		}{
			{"mempalace_list_wings", map[string]any{}, map[string]any{"wings": map[string]any{}}},
			{"mempalace_list_rooms", map[string]any{}, map[string]any{"wing": "all", "rooms": map[string]any{}}},
			{"mempalace_list_rooms", map[string]any{"wing": "notes"}, map[string]any{"wing": "notes", "rooms": map[string]any{}}},
			{"mempalace_get_taxonomy", map[string]any{}, map[string]any{"taxonomy": map[string]any{}}},
			{"mempalace_status", map[string]any{}, map[string]any{"total_drawers": 0.0, "wings": map[string]any{}, "rooms": map[string]any{}}},
		} {
			m := routed(t, e, c.tool, c.args)
			ok := m["error"] == nil && m["degraded"] == true && edgeOf(m)["local"] == noDrawersYet && edgeOf(m)["primary"] != nil
			for k, v := range c.want {
				ok = ok && reflect.DeepEqual(m[k], v)
			}
			if !ok {
				t.Errorf("missing %v: %s %v on an empty palace, the primary down: %v", missing, c.tool, c.args, m)
			}
		}
	}
}

// On a new device the primary's refusal is the answer, not the empty
// local palace's error.
func TestAnEmptyPalaceAnswersThePrimarysRefusal(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer, e.remote = emptyLocal{}, refusing{inProcessPrimary{primary}}
	_, err := e.route(context.Background(), newCall(&mcp.CallToolParams{Name: "mempalace_diary_read", Arguments: json.RawMessage(`{"agent_name":"boss"}`)}))
	if rpcErr := peerError(err); rpcErr == nil || !strings.Contains(rpcErr.Message, "not one of this device's agents") {
		t.Errorf("diary_read the gateway refuses, on an empty palace: %v", err)
	}
}

// A deleted shared drawer is no duplicate, on an empty palace and on a
// populated one; get_drawer of it answers it is hidden by this device's
// own delete on both.
func TestATombstonedMatchIsNoDuplicate(t *testing.T) {
	t.Parallel()
	for _, populated := range []bool{false, true} {
		e, _, primary, ob := routerUnderTest(t)
		if populated {
			// Files that cannot tell are not empty.
			e.cfg.Palace = t.TempDir()
			os.WriteFile(filepath.Join(e.cfg.Palace, "chroma.sqlite3"), []byte("not a database"), 0o600)
		} else {
			e.localServer = emptyLocal{}
		}
		id := sharedDrawer(t, primary, "notes", "shared kiwi note")
		if err := ob.AddTombstones(context.Background(), []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: id}}); err != nil {
			t.Fatal(err)
		}
		m := routed(t, e, "mempalace_check_duplicate", map[string]any{"content": "shared kiwi note"})
		if l, _ := m["matches"].([]any); len(l) != 0 || m["is_duplicate"] != false {
			t.Errorf("populated %v: check_duplicate of a deleted shared drawer: %v", populated, m)
		}
		g := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": id})
		if g["error"] != hiddenByDelete(id) {
			t.Errorf("populated %v: get_drawer of a deleted shared drawer: %v", populated, g)
		}
	}
}

// update_drawer of a shared drawer (on the primary, not here) is queued
// for the primary, in its wing; one the policy keeps local, one this
// device deleted, and one nowhere are not.
func TestAnUpdateOfASharedDrawerIsQueued(t *testing.T) {
	t.Parallel()
	for _, empty := range []bool{false, true} {
		e, _, primary, ob := routerUnderTest(t)
		if empty {
			e.localServer = emptyLocal{}
		}
		ctx := context.Background()
		id := sharedDrawer(t, primary, "notes", "shared drawer to fix (typo)")
		u := routed(t, e, "mempalace_update_drawer", map[string]any{"drawer_id": id, "content": "shared drawer to fix (fixed)"})
		if u["success"] != true || edgeOf(u)["replication"] != "queued (not in the local palace)" || edgeOf(u)["op_id"] == nil {
			t.Errorf("empty %v: update_drawer of a shared drawer: %v", empty, u)
		}
		ops, _ := ob.List(ctx, 10)
		if len(ops) != 1 || ops[0].Tool != "mempalace_update_drawer" || ops[0].Wing != "notes" {
			t.Errorf("empty %v: queued: %+v", empty, ops)
		}
		priv := sharedDrawer(t, primary, "private", "kept local by policy")
		gone := sharedDrawer(t, primary, "notes", "deleted here")
		ob.AddTombstones(ctx, []outbox.Tombstone{{Kind: outbox.TombDrawer, Key: gone}})
		for _, other := range []string{priv, gone, "drawer_notes_r_nowhere"} {
			u := routed(t, e, "mempalace_update_drawer", map[string]any{"drawer_id": other, "content": "changed"})
			if u["success"] == true || !strings.HasPrefix(asString(u["error"]), "Drawer not found") {
				t.Errorf("empty %v: update_drawer of %s: %v", empty, other, u)
			}
		}
		if ops, _ := ob.List(ctx, 10); len(ops) != 1 {
			t.Errorf("empty %v: queued: %+v", empty, ops)
		}
	}
}

// On a device whose palace holds no drawers yet, delete_by_source of a
// source only the primary holds hides its drawers and says so, as
// delete_drawer does; not MemPalace's advice to repair the empty palace
// (outside tester, attack18 d3).
func TestAnEmptyPalaceDeletesBySource(t *testing.T) {
	t.Parallel()
	for _, missing := range []bool{false, true} {
		e, _, primary, _ := routerUnderTest(t)
		e.localServer, e.cfg.Palace = emptyLocal{missing: missing}, t.TempDir()
		const src = "/fleet/d3/NOTES.md"
		aroundTheEdge(t, primary, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "src", "content": "fleet mined notes", "source_file": src})
		m := routed(t, e, "mempalace_delete_by_source", map[string]any{"source_file": src, "dry_run": false})
		if s := mustJSON(m); m["success"] != true || m["edge"] == nil || strings.Contains(s, "repair") || strings.Contains(s, "missing") {
			t.Errorf("missing %v: delete_by_source: %s", missing, s)
		}
		if m := routed(t, e, "mempalace_list_drawers", map[string]any{"wing": "shared"}); strings.Contains(mustJSON(m), "fleet mined") {
			t.Errorf("missing %v: list_drawers shows the deleted source's drawer: %s", missing, mustJSON(m))
		}
	}
}

// A coordination write answered while the edge's link to the primary is
// failing says what the edge knows: no answer yet, sent once, looked up
// first if an answer was lost; not that the primary has not taken it (an
// earlier attempt's answer may have been lost after it landed: outside
// tester, attack18 c1).
func TestAQueuedEventSaysWhatTheEdgeKnows(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	primary.down = true
	m := routed(t, e, "mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@ops", "body": "b"})
	msg, _ := m["message"].(string)
	if m["queued"] != true || strings.Contains(msg, "has not taken") || !strings.Contains(msg, "lost") || !strings.Contains(msg, "once") {
		t.Errorf("queued event: %s", mustJSON(m))
	}
}

// An artifact over MemPalace's 4 MiB, or an event body over its 256 KiB, is
// refused when it is made, with
// MemPalace's words, never queued to be refused five times and die
// (outside tester, attack18).
func TestAnArtifactOverMemPalacesCapIsRefusedUpFront(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := routerUnderTest(t)
	primary.down = true // queued, not sent: what the edge answers is its own
	m := routed(t, e, "mempalace_artifact_put", map[string]any{"kind": "note", "content": strings.Repeat("é", 2<<20) + "x", "created_by": "pi@ops"})
	if s := mustJSON(m); !strings.Contains(s, "4194305 bytes; maximum is 4194304") || m["queued"] == true {
		t.Errorf("artifact_put over 4 MiB: %.300s", s)
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("%d ops queued", len(ops))
	}
	m = routed(t, e, "mempalace_artifact_put", map[string]any{"kind": "note", "content": strings.Repeat("é", 2<<20), "created_by": "pi@ops"})
	if m["queued"] != true {
		t.Errorf("artifact_put of 4 MiB: %.300s", mustJSON(m))
	}
	// An event's body over MemPalace's 256 KiB the same (attack37 A3: it
	// was queued, refused five times, and dead with advice to ask for a
	// grant).
	event := map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@ops", "to_agent": "*", "body": strings.Repeat("b", 256<<10) + "é"}
	m = routed(t, e, "mempalace_event_append", event)
	if s := mustJSON(m); !strings.Contains(s, "body is 262146 bytes; maximum is 262144") || !strings.Contains(s, "shorten it") || m["queued"] == true {
		t.Errorf("event_append over 256 KiB: %.300s", s)
	}
	if ops := pending(t, ob); len(ops) != 1 {
		t.Errorf("%d ops queued, want the 4 MiB artifact only", len(ops))
	}
	event["body"] = strings.Repeat("b", 256<<10)
	if m = routed(t, e, "mempalace_event_append", event); m["queued"] != true {
		t.Errorf("event_append of 256 KiB: %.300s", mustJSON(m))
	}
}

// An artifact whose arguments are over the primary's request cap (its
// content under MemPalace's 4 MiB, written as \u escapes) is stored
// nowhere: artifacts live on the primary only. The answer says nothing
// was written and to send it smaller, not that it stays in the local
// palace (an agent told so never sends it again: attack74 F1), and it
// names the size the agent sent, not only the size with the op id the
// edge splices in.
func TestAnArtifactOverTheRequestCapIsToldNothingWasWritten(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := routerUnderTest(t)
	primary.down = true
	for _, size := range []int{outbox.MaxPayload + 50, outbox.MaxPayload - 8} {
		head := `{"kind":"note","created_by":"pi@ops","content":"`
		body := head + strings.Repeat(`\u0041`, (size-len(head)-2)/6)
		args := []byte(body + strings.Repeat(" ", size-len(body)-2) + `"}`)
		m := routedRaw(t, e, "mempalace_artifact_put", args)
		s, _ := m["error"].(string)
		if !strings.Contains(s, "nothing was written") || !strings.Contains(s, "primary only") || !strings.Contains(s, "smaller") ||
			strings.Contains(s, "local palace") || !strings.Contains(s, fmt.Sprintf(": %d bytes of arguments", len(args))) {
			t.Errorf("artifact_put of %d bytes of arguments (cap %d): %.400s", len(args), outbox.MaxPayload, mustJSON(m))
		}
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("%d ops queued", len(ops))
	}
}

// A coordination write MemPalace refuses for its arguments (a stream name
// over 256 characters, a NUL in the body) is
// dead at its first refusal, told so, not kept to be refused four more
// times with advice that a grant lets it through (outside tester attack38
// B3).
func TestAWriteMemPalaceRefusesAsWrittenIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	event := func(k string, v any) map[string]any {
		m := map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@ops", "to_agent": "*", "body": "b"}
		m[k] = v
		return m
	}
	for _, c := range []struct {
		args  map[string]any
		words string
	}{
		{event("stream", strings.Repeat("s", 257)), "stream exceeds maximum length of 256 characters"},
		{event("body", "a\x00b"), "body contains null bytes"},
	} {
		_, res := h.call("event_append", c.args)
		if s := refusalText(res); !res.IsError || !strings.Contains(s, c.words) || !strings.Contains(s, "not tried again") || strings.Contains(s, "grant the gateway") {
			t.Errorf("%s: %.400s", c.words, s)
		}
	}
	// Metadata over MemPalace's 64 KiB is refused by the edge before it
	// is queued (TestEventMetadataIsMeasuredAsMemPalaceCountsIt).
	if _, res := h.call("event_append", event("metadata", map[string]any{"pad": strings.Repeat("m", 64<<10)})); !res.IsError || !strings.Contains(refusalText(res), "metadata is 65629 bytes as MemPalace counts it") {
		t.Errorf("metadata over 64 KiB: %.400s", refusalText(res))
	}
	if dead := h.deadOps(); len(dead) != 2 {
		t.Errorf("%d dead ops, want the 2 refused writes", len(dead))
	}
}

// attack100 F1: an event's metadata is measured as MemPalace counts it
// (json.dumps with ", " and ": ", with the edge_op_id the edge adds) and
// refused when it is made, naming that size, never queued ("reaches the
// primary once") to die at the primary: 5,100 small keys are 56,101 bytes
// as written, 66,300 as MemPalace counts them (66,382 with the op id).
// At the cap exactly it is queued; a byte over, refused; an artifact's
// metadata alike.
func TestEventMetadataIsMeasuredAsMemPalaceCountsIt(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := routerUnderTest(t)
	primary.down = true // queued, not sent: what the edge answers is its own
	meta := map[string]any{}
	for i := range 5100 {
		meta[fmt.Sprintf("k%05d", i)] = 1
	}
	event := map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@ops", "to_agent": "*", "body": "b", "metadata": meta}
	m := routed(t, e, "mempalace_event_append", event)
	if s := mustJSON(m); !strings.Contains(s, "metadata is 66382 bytes as MemPalace counts it (56101 as written)") || !strings.Contains(s, "maximum is 65536") || m["queued"] == true {
		t.Errorf("event_append of metadata 56,101 bytes as written: %.400s", s)
	}
	// {"edge_op_id": "<64 hex>", "k": "x…"}: 91 bytes and the x's
	event["metadata"] = map[string]any{"k": strings.Repeat("x", 65536-91)}
	if m = routed(t, e, "mempalace_event_append", event); m["queued"] != true {
		t.Errorf("event_append of metadata at the cap as MemPalace counts it: %.300s", mustJSON(m))
	}
	event["metadata"] = map[string]any{"k": strings.Repeat("x", 65536-90)}
	if s := mustJSON(routed(t, e, "mempalace_event_append", event)); !strings.Contains(s, "metadata is 65537 bytes") {
		t.Errorf("event_append of metadata a byte over: %.300s", s)
	}
	art := map[string]any{"kind": "note", "content": "c", "created_by": "pi@ops", "metadata": meta}
	if s := mustJSON(routed(t, e, "mempalace_artifact_put", art)); !strings.Contains(s, "metadata is 66382 bytes") {
		t.Errorf("artifact_put of metadata over the cap: %.300s", s)
	}
	if ops := pending(t, ob); len(ops) != 1 {
		t.Errorf("%d ops queued, want the event at the cap only", len(ops))
	}
}

// attack100 F6: an add_drawer whose arguments are exactly at the
// documented cap (16 MiB less 1 KiB) is over it only with the added_by
// stamp the edge splices in: the answer says so, naming the size the
// agent sent and the size with the stamp, as event_append's names its op
// id. Before, it named only the size with the stamp, which the agent
// never sent. A byte under the cap with the stamp is queued.
func TestAnAddDrawerOverTheCapWithTheStampSaysSo(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := routerUnderTest(t)
	e.cfg.OriginDevice, e.cfg.Agent, e.cfg.OriginLabel = "dev1", "pi", "lab"
	primary.down = true
	stamp := len(`,"added_by":""`) + len(e.cfg.Stamp())
	for _, size := range []int{outbox.MaxPayload, outbox.MaxPayload - stamp} {
		head := `{"wing":"caps","room":"r","content":"at the cap"`
		args := []byte(head + strings.Repeat(" ", size-len(head)-1) + `}`)
		m := routedRaw(t, e, "mempalace_add_drawer", args)
		repl := fmt.Sprint(edgeOf(m)["replication"])
		want := fmt.Sprintf("%d bytes of arguments (%d with the added_by stamp the edge adds), over the %d", size, size+stamp, outbox.MaxPayload)
		if size == outbox.MaxPayload && !strings.Contains(repl, want) {
			t.Errorf("add_drawer of %d bytes: %q, want %q", size, repl, want)
		}
		if size < outbox.MaxPayload && repl != "queued" {
			t.Errorf("add_drawer of %d bytes, at the cap with the stamp: %q, want queued", size, repl)
		}
	}
	if ops := pending(t, ob); len(ops) != 1 {
		t.Errorf("%d ops queued, want the one at the cap with the stamp", len(ops))
	}
}

// freshPrimary answers every drawer read as real MemPalace 3.11 behind a
// gateway does while no device has filed a drawer on the primary yet.
// With searched, as it does after a search there: "Backend open failed"
// (isError), and the search "No palace found".
type freshPrimary struct {
	inProcessPrimary
	searched bool
}

func (f freshPrimary) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	switch {
	case p.Name == "mempalace_search":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"error": "No palace found", "hint": "Run: mempalace init <dir> && mempalace mine <dir>", "filtered": true}`}}}, nil
	case f.searched:
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: `{"error": "Backend open failed", "details": "Could not open the selected backend collection.", "hint": "Run: mempalace status or mempalace repair-status for diagnostics.", "backend": "chroma", "filtered": true}`}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"error": "Chroma database missing", "details": "Could not open missing database at /p/chroma.sqlite3.", "hint": "Run: mempalace status or mempalace repair-status for diagnostics.", "filtered": true}`}}}, nil
}

// A primary no device has filed a drawer on yet is an empty palace, not
// a failed one: a device's merged reads answer from its own palace
// without "degraded", and a device as new as the primary answers each
// read empty, never MemPalace's advice to repair a palace that is merely
// new (attack103: every read of a fleet's first hour was marked degraded).
func TestAFreshPrimaryIsEmptyNotDegraded(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	routed(t, e, "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "written here first"})
	e.remote = freshPrimary{inProcessPrimary: inProcessPrimary{primary}}
	reads := []struct {
		tool string
		args map[string]any
	}{{"mempalace_list_drawers", map[string]any{}}, {"mempalace_diary_read", map[string]any{"agent_name": "me"}}, {"mempalace_check_duplicate", map[string]any{"content": "written here first"}}}
	for _, r := range reads {
		tool, m := r.tool, routed(t, e, r.tool, r.args)
		if m["error"] != nil || m["degraded"] != nil || edgeOf(m)["primary"] != primaryNoDrawers || edgeOf(m)["local"] != "ok" {
			t.Errorf("%s, the primary fresh: %v", tool, m)
		}
	}
	if l, _ := routed(t, e, "mempalace_list_drawers", map[string]any{})["drawers"].([]any); len(l) != 1 {
		t.Errorf("list_drawers, the primary fresh: %d drawers, want the local one", len(l))
	}

	e, _, primary, _ = routerUnderTest(t)
	e.localServer, e.remote = emptyLocal{missing: true}, freshPrimary{inProcessPrimary: inProcessPrimary{primary}}
	for _, r := range reads {
		tool, m := r.tool, routed(t, e, r.tool, r.args)
		if m["error"] != nil || m["degraded"] != nil || edgeOf(m)["primary"] != primaryNoDrawers || edgeOf(m)["local"] != noDrawersYet {
			t.Errorf("%s, both palaces fresh: %v", tool, m)
		}
	}
}

// A fleet new to memory after a search there (attack107 F1): the primary
// answers every drawer read "Backend open failed" and a search "No palace
// found", with MemPalace's advice to repair, or to init and mine. A
// device whose palace is as new answers each read empty, degraded, the
// primary's words in edge.primary, never that advice; a delete_by_source
// dry run there answers as for a source with no drawers (attack107 F2).
func TestAFleetNewToMemoryAfterASearchReadsEmptyAndDegraded(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	e.localServer, e.remote = emptyLocal{}, freshPrimary{inProcessPrimary: inProcessPrimary{primary}, searched: true}
	for _, r := range []struct {
		tool, list string
		args       map[string]any
	}{
		{"mempalace_search", "results", map[string]any{"query": "zebra"}},
		{"mempalace_list_drawers", "drawers", map[string]any{}},
		{"mempalace_diary_read", "entries", map[string]any{"agent_name": "me"}},
		{"mempalace_check_duplicate", "matches", map[string]any{"content": "zebra"}},
	} {
		m := routed(t, e, r.tool, r.args)
		l, ok := m[r.list].([]any)
		if !ok || len(l) != 0 || m["error"] != nil || m["hint"] != nil || m["degraded"] != true || edgeOf(m)["local"] != noDrawersYet || !unopened(fmt.Sprint(edgeOf(m)["primary"])) {
			t.Errorf("%s, both palaces new, after a search: %v", r.tool, m)
		}
	}
	m := routed(t, e, "mempalace_delete_by_source", map[string]any{"source_file": "notes.md"})
	if m["success"] != true || m["dry_run"] != true || m["match_count"] != 0.0 || m["error"] != nil {
		t.Errorf("a delete_by_source dry run on a palace new to the fleet: %v", m)
	}
}

// spanRefusing is a primary that refuses the reads spanning wings as a
// gateway does to a device that does not read every wing (a JSON-RPC
// error), and answers everything else.
type spanRefusing struct{ inProcessPrimary }

func (s spanRefusing) Call(ctx context.Context, p *mcp.CallToolParams, retry bool) (*mcp.CallToolResult, error) {
	switch p.Name {
	case "mempalace_graph_stats", "mempalace_find_tunnels", "mempalace_traverse", "mempalace_follow_tunnels", "mempalace_list_tunnels", "mempalace_list_hallways":
		return nil, &jsonrpc.Error{Code: -32003, Message: "devbox-config gateway: dev1 may not call " + p.Name + " (its answer spans wings)"}
	}
	return s.inProcessPrimary.Call(ctx, p, retry)
}

// A new device whose reads spanning wings answer from its own palace (the
// primary down, or refusing them to a device that does not read every
// wing: attack110 F1) answers each with MemPalace's error alone, degraded,
// edge.local "no drawers yet", never its advice to repair a palace that
// is merely new; before its first search or after.
func TestAnEmptyPalaceAnswersGraphReadsWithoutRepairAdvice(t *testing.T) {
	t.Parallel()
	for _, missing := range []bool{true, false} {
		for _, down := range []bool{true, false} {
			e, _, primary, _ := routerUnderTest(t)
			e.localServer, primary.down = emptyLocal{missing: missing}, down
			if !down {
				e.remote = spanRefusing{inProcessPrimary{primary}}
			}
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"mempalace_graph_stats", map[string]any{}},
				{"mempalace_find_tunnels", map[string]any{}},
				{"mempalace_traverse", map[string]any{"start_room": "r"}},
				{"mempalace_follow_tunnels", map[string]any{"wing": "notes", "room": "r"}},
				{"mempalace_list_tunnels", map[string]any{}},
				{"mempalace_list_hallways", map[string]any{}},
			} {
				m := routed(t, e, c.tool, c.args)
				if !unopened(asString(m["error"])) || m["hint"] != nil || m["details"] != nil || m["degraded"] != true ||
					edgeOf(m)["local"] != noDrawersYet || edgeOf(m)["source"] != "local" || edgeOf(m)["primary"] == nil {
					t.Errorf("missing %v, down %v: %s on an empty palace: %v", missing, down, c.tool, m)
				}
			}
		}
	}
}

// A local palace that is damaged, not new (a database file that is not
// one), keeps MemPalace's error and its advice to repair.
func TestADamagedPalaceKeepsItsRepairAdvice(t *testing.T) {
	t.Parallel()
	for _, missing := range []bool{true, false} {
		e, _, primary, _ := routerUnderTest(t)
		e.localServer, e.cfg.Palace, primary.down = emptyLocal{missing: missing}, t.TempDir(), true
		os.WriteFile(filepath.Join(e.cfg.Palace, "chroma.sqlite3"), []byte("not a database"), 0o600)
		for _, tool := range []string{"mempalace_graph_stats", "mempalace_list_wings"} {
			if m := routed(t, e, tool, map[string]any{}); m["hint"] == nil || edgeOf(m)["local"] == noDrawersYet {
				t.Errorf("missing %v: %s on a damaged palace: %v", missing, tool, m)
			}
		}
	}
}

// reconnect on a device whose palace is new, online or not, answers
// MemPalace's words that it cannot open the drawers, edge.local "no
// drawers yet", without its advice to repair nor the palace's path
// (attack113 F6); a damaged palace keeps both.
func TestAnEmptyPalaceReconnectsWithoutRepairAdvice(t *testing.T) {
	t.Parallel()
	for _, missing := range []bool{true, false} {
		for _, damaged := range []bool{false, true} {
			e, _, _, _ := routerUnderTest(t)
			e.localServer = emptyLocal{missing: missing}
			if damaged {
				e.cfg.Palace = t.TempDir()
				os.WriteFile(filepath.Join(e.cfg.Palace, "chroma.sqlite3"), []byte("not a database"), 0o600)
			}
			m := routed(t, e, "mempalace_reconnect", map[string]any{})
			advised := m["hint"] != nil && m["details"] != nil && edgeOf(m)["local"] == nil
			if !unopened(asString(m["message"])) || m["success"] != false || advised != damaged ||
				!damaged && edgeOf(m)["local"] != noDrawersYet {
				t.Errorf("missing %v, damaged %v: reconnect: %v", missing, damaged, m)
			}
		}
	}
}
