package gateway

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// hidden are strings only the wings and agents the laptop may not see
// hold: no answer it gets may contain one.
var hidden = []string{"PRIVATEMARK", "private_desk", "secretroom", "wing_pi", "pi@desk's secret"}

func leaked(v any) string {
	s := fmt.Sprint(v)
	for _, h := range hidden {
		if strings.Contains(s, h) {
			return h
		}
	}
	return ""
}

// TestRealNarrowDeviceSeesOnlyItsWings: the gateway in front of real
// MemPalace 3.11.0 serve, and a device (the laptop) that reads and writes
// shared and its agent's diary wing, reads the knowledge graph and acts
// as opencode@laptop. Every tool 3.11.0 serves is called as the laptop,
// reads first, as real MemPalace answers them: no answer carries anything
// of another wing (content, wing and room names, counts and totals); a
// refused call never reaches serve; the light server's query-language
// tools are refused for every device, admins included; what the laptop
// stores carries the provenance its credential gives, whatever it sent;
// and an old event addressed to it stays ackable behind a long log.
func TestRealNarrowDeviceSeesOnlyItsWings(t *testing.T) {
	srv := realpalace.New(t).Serve(t, upstreamToken)
	proxy := realpalace.NewProxy(t, srv.URL)
	g := newGWAt(t, []Device{
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared", "wing_opencode"}, Write: []string{"shared", "wing_opencode"}, KG: "read", Agents: []string{"opencode@laptop"}, ReadRate: 1e9, WriteRate: 1e9},
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@desk"}, ReadRate: 1e9, WriteRate: 1e9},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true, Agents: []string{"opencode@ops"}, ReadRate: 1e9, WriteRate: 1e9},
	}, &upstream{name: "proxy", url: proxy.URL})
	laptop, desk, ops := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["ops-0001"]
	must := func(token, tool string, args map[string]any) map[string]any {
		t.Helper()
		res, rpc, status := g.call(token, tool, args)
		if rpc != nil || status != 200 || res["success"] == false || res["error"] != nil {
			t.Fatalf("%s %v: %v %v", tool, args, res, rpc)
		}
		return res
	}

	// The palace: the laptop's own drawers and diary, the desk's private
	// wing (two rooms), pi's diary, facts, and the coordination log.
	shared := must(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "notes", "content": "release notes for the edge", "added_by": "opencode/evil-host/spoofed"})["drawer_id"]
	must(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "plans", "content": "the release plan for the fleet"})
	must(laptop, "diary_write", map[string]any{"agent_name": "opencode", "entry": "shipped the release notes"})
	must(laptop, "checkpoint", map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "notes", "content": "a checkpoint of the release day"}}, "added_by": "mallory/x/y"})
	for i := range 3 {
		must(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "secretroom", "content": fmt.Sprintf("PRIVATEMARK release notes draft %d", i)})
	}
	must(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "notes", "content": "PRIVATEMARK the release keys"})
	private := must(desk, "add_drawer", map[string]any{"wing": "private_desk", "room": "notes", "content": "PRIVATEMARK release notes for the edge, the desk's copy"})["drawer_id"]
	must(desk, "diary_write", map[string]any{"agent_name": "pi", "entry": "PRIVATEMARK pi's release diary"})
	must(desk, "kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "sqlite"})
	must(desk, "create_tunnel", map[string]any{"source_wing": "private_desk", "source_room": "notes", "target_wing": "shared", "target_room": "notes", "label": "PRIVATEMARK tunnel"})
	old := must(desk, "event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@laptop", "body": "review the release"})["event"].(map[string]any)["id"]
	art := must(desk, "patch_submit", map[string]any{"content": "diff --git a/x b/x\n", "from_agent": "pi@desk", "stream": "s", "to_agent": "opencode@laptop", "body": "the release patch"})["artifact"].(map[string]any)["id"]
	secretArt := must(desk, "artifact_put", map[string]any{"kind": "note", "content": "PRIVATEMARK artifact", "created_by": "pi@desk"})["artifact"].(map[string]any)["id"]
	must(desk, "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "someone@else", "body": "pi@desk's secret note", "artifact_ids": []any{secretArt}})
	// 520 later events addressed to the laptop's agent (or to everyone):
	// the old ask is no longer on the newest page.
	for i := range 520 {
		to := "opencode@laptop"
		if i%2 == 1 {
			to = "*"
		}
		if _, err := srv.Call("mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": to, "body": fmt.Sprint("later ", i)}); err != nil {
			t.Fatal(err)
		}
	}

	// Counts and totals are the laptop's: 3 drawers in shared (2 + the
	// checkpoint item) and 1 in wing_opencode.
	st := must(laptop, "status", nil)
	if st["total_drawers"] != 3.0+1 || fmt.Sprint(st["rooms"]) != "map[diary:1 notes:2 plans:1]" || leaked(st) != "" {
		t.Errorf("status: total_drawers %v, want 4; %v", st["total_drawers"], st)
	}
	// The primary's topology (the palace's directory, the embedder) is the
	// admin's: desk, which reads every wing, gets the counts without it.
	for _, c := range []struct {
		token string
		admin bool
	}{{laptop, false}, {desk, false}, {ops, true}} {
		st := must(c.token, "status", nil)
		integrity, _ := st["sqlite_integrity"].(map[string]any)
		_, dir := integrity["palace"]
		_, dev := st["embedding_device"]
		if dir != c.admin || dev != c.admin || (c.token == desk && st["total_drawers"] == 4.0) {
			t.Errorf("status (admin %v): %v", c.admin, st)
		}
		// attack69 F1: nor does any other string in it (sqlite_integrity's reason).
		if all := fmt.Sprint(st); strings.Contains(all, filepath.Dir(srv.Palace().Dir)) != c.admin || (!c.admin && strings.Contains(all, srv.Palace().Venv)) {
			t.Errorf("status (admin %v) and the primary's paths: %v", c.admin, st)
		}
	}
	if w := must(laptop, "list_wings", nil); fmt.Sprint(w["wings"]) != "map[shared:3 wing_opencode:1]" {
		t.Errorf("list_wings: %v", w)
	}
	if r := must(laptop, "list_rooms", nil); fmt.Sprint(r["rooms"]) != "map[diary:1 notes:2 plans:1]" {
		t.Errorf("list_rooms: %v", r)
	}
	if ld := must(laptop, "list_drawers", map[string]any{"limit": 100}); ld["total"] != 4.0 || ld["count"] != 4.0 {
		t.Errorf("list_drawers: total %v count %v, want 4 and 4", ld["total"], ld["count"])
	}
	if s := must(laptop, "search", map[string]any{"query": "release notes for the edge", "limit": 3}); len(s["results"].([]any)) != 3 {
		t.Errorf("search of limit 3 over four readable drawers: %v", s)
	}
	if e := must(laptop, "event_list", map[string]any{"stream": "s", "limit": 500}); leaked(e) != "" {
		t.Errorf("event_list: %s", leaked(e))
	}
	if _, rpc, _ := g.call(laptop, "event_ack", map[string]any{"event_id": old, "from_agent": "opencode@laptop", "status": "applied"}); rpc != nil {
		t.Errorf("event_ack of an old ask to the laptop behind 520 later events: %v", rpc)
	}
	if a, rpc, _ := g.call(laptop, "artifact_get", map[string]any{"artifact_id": art}); rpc != nil || a["artifact"] == nil {
		t.Errorf("artifact_get of the patch sent to the laptop: %v %v", a, rpc)
	}

	// Every tool 3.11.0 serves, as the laptop: reads, then writes.
	tools, err := srv.Tools()
	if err != nil {
		t.Fatal(err)
	}
	seeded := map[string]any{
		"wing": "shared", "room": "notes", "query": "release notes", "drawer_id": shared, "drawer_ids": []any{shared, private}, "content": "PRIVATEMARK release notes draft 1",
		"agent_name": "opencode", "entry": "another laptop diary entry", "entity": "edge", "subject": "edge", "predicate": "uses", "object": "sqlite", "old_object": "sqlite", "new_object": "postgres",
		"start_room": "notes", "wing_a": "shared", "wing_b": "private_desk", "source_wing": "shared", "source_room": "notes", "target_wing": "shared", "target_room": "plans",
		"artifact_id": secretArt, "event_id": old, "to_agent": "opencode@laptop", "from_agent": "opencode@laptop", "created_by": "opencode@laptop", "writer": "pi@desk",
		"stream": "s", "type": "note", "kind": "note", "order": "asc", "limit": 50, "timeout_ms": 10, "source": t.TempDir(), "source_file": "notes.md",
		"items": []any{map[string]any{"wing": "shared", "room": "notes", "content": "an item"}}, "project": "p", "goal": "a goal", "branch": "main", "base_commit": "0123456789abcdef", "done": "done",
		"tunnel_id": "t", "hallway_id": "h",
	}
	slices.SortStableFunc(tools, func(a, b realpalace.Tool) int {
		ra, _ := catalogue.Lookup(a.Name)
		rb, _ := catalogue.Lookup(b.Name)
		if ra.Reads == rb.Reads {
			return 0
		}
		if ra.Reads {
			return -1
		}
		return 1
	})
	var allowed, refused []string
	for _, tl := range tools {
		rec, _ := catalogue.Lookup(tl.Name)
		args := map[string]any{}
		props, _ := tl.InputSchema["properties"].(map[string]any)
		required, _ := tl.InputSchema["required"].([]any)
		for _, r := range required {
			args[r.(string)] = argValue(r.(string), props[r.(string)].(map[string]any), seeded)
		}
		switch rec.Name {
		case "event_wait":
			args["timeout_ms"] = 10
		case "diary_write": // 3.11 requires entry (or content) though its schema does not say so
			args["entry"] = seeded["entry"]
		}
		before := proxy.Calls(tl.Name)
		res, rpc, _ := g.call(laptop, rec.Name, args)
		answer := fmt.Sprint(res)
		if rec.Name == "get_drawers" { // the private id it asked by comes back, as any id that names no drawer does
			answer = strings.ReplaceAll(answer, fmt.Sprintf("map[drawer_id:%s error:Drawer not found: %[1]s]", private), "")
		}
		if h := leaked(answer); h != "" {
			t.Errorf("%s %v: the answer holds %q: %v", rec.Name, args, h, res)
		}
		if h := leaked(rpc); h != "" && !strings.Contains(fmt.Sprint(rpc["message"]), "devbox-config gateway") {
			t.Errorf("%s: the error holds %q: %v", rec.Name, h, rpc)
		}
		if !rec.Reads && rpc != nil && rpc["code"] == float64(CodeDenied) && proxy.Calls(tl.Name) != before {
			t.Errorf("%s: a refused write reached serve", rec.Name)
		}
		if rpc != nil {
			refused = append(refused, rec.Name)
		} else {
			allowed = append(allowed, rec.Name)
		}
	}
	if len(allowed)+len(refused) != len(tools) || len(tools) < 45 || len(allowed) < 20 {
		t.Errorf("%d tools served; answered %v, refused %v", len(tools), allowed, refused)
	}
	t.Logf("as the laptop, answered: %v; refused: %v", allowed, refused)

	// The query language of mempalace-light-mcp: refused for every device.
	for _, tok := range []string{laptop, desk, ops} {
		for _, tool := range []string{"palace_query", "palace_exec", "palace_coordinate"} {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"query":"FIND release"}}}`, tool)
			status, m := g.post(tok, body)
			e, _ := m["error"].(map[string]any)
			if status != 200 || e == nil || e["code"] != float64(CodeDenied) || !strings.Contains(fmt.Sprint(e["message"]), "query-language tool") {
				t.Errorf("%s: %d %v", tool, status, m)
			}
			if proxy.Calls(tool) != 0 {
				t.Errorf("%s reached serve", tool)
			}
		}
	}

	// Provenance: what the laptop stored carries its credential's stamp.
	for _, content := range []string{"release notes for the edge", "a checkpoint of the release day"} {
		found := false
		page := srv.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "shared", "limit": 100})
		for _, x := range page["drawers"].([]any) {
			d := srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": x.(map[string]any)["drawer_id"]})
			if d["content"] != content {
				continue
			}
			found = true
			if by := d["metadata"].(map[string]any)["added_by"]; !strings.HasSuffix(fmt.Sprint(by), "/laptop/laptop-7f3a") {
				t.Errorf("%q on serve: added_by %v, want the laptop's stamp", content, by)
			}
		}
		if !found {
			t.Errorf("%q is not on serve", content)
		}
	}
}
