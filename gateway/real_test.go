package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// startReal is real MemPalace serve (testbed/realpalace) as the upstream,
// with the shared upstream token.
func startReal(t testing.TB) (*upstream, *realpalace.Server) {
	t.Helper()
	srv := realpalace.New(t).Serve(t, upstreamToken)
	return &upstream{name: "mempalace " + realpalace.Version, url: srv.URL}, srv
}

// argValue is a legal value for a parameter of 3.11.0's schema, by name
// where the name says what it holds, else by type.
func argValue(name string, schema map[string]any, seeded map[string]any) any {
	if v, ok := seeded[name]; ok {
		return v
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[len(enum)-1]
	}
	switch schema["type"] {
	case "integer":
		return 1
	case "number":
		return 0.5
	case "boolean":
		return true
	case "array":
		return []any{"x"}
	case "object":
		return map[string]any{}
	}
	return "release"
}

// TestRealGatewayLetsEveryAdvertisedParameterThrough calls every read
// tool MemPalace 3.11.0 advertises through the gateway in front of real
// serve, once per advertised parameter (with the required ones) and once
// with Gemini CLI's wait_for_previous, as an admin and as a device with
// exact wing grants: no call may be refused as an unknown parameter, and
// no real answer refused as a shape the filter does not know.
func TestRealGatewayLetsEveryAdvertisedParameterThrough(t *testing.T) {
	u, srv := startReal(t)
	drawer := srv.Seed(t, realpalace.Drawer("shared", "notes", "release notes for the edge"), realpalace.Drawer("private_desk", "notes", "private release plans"))[0]["drawer_id"]
	srv.Seed(t, realpalace.DiaryEntry("opencode", "shipped the release"), realpalace.Fact("edge", "uses", "sqlite", "", ""))
	ev := srv.MustCall(t, "mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "opencode@laptop", "to_agent": "*"})["event"].(map[string]any)["id"]
	art := srv.MustCall(t, "mempalace_artifact_put", map[string]any{"kind": "note", "content": "x", "created_by": "opencode@laptop"})["artifact"].(map[string]any)["id"]
	seeded := map[string]any{
		"wing": "shared", "room": "notes", "query": "release notes", "drawer_id": drawer, "drawer_ids": []any{drawer}, "content": "release notes",
		"agent_name": "opencode", "entity": "edge", "as_of": "2026-01-01", "since": "2026-01-01", "before": "2999-01-01", "since_created_at": "2026-01-01",
		"source_file": "notes.md", "start_room": "notes", "wing_a": "shared", "wing_b": "shared", "artifact_id": art, "since_event_id": ev, "before_event_id": ev,
		"to_agent": "opencode@laptop", "from_agent": "opencode@laptop", "writer": "opencode@laptop", "stream": "s", "type": "note", "status": "open",
		"order": "asc", "direction": "both", "timeout_ms": 10, "max_distance": 1.5, "threshold": 0.9, "limit": 2, "offset": 0, "max_hops": 1, "last_n": 2,
	}
	g := newGWAt(t, []Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true, Agents: []string{"opencode@ops"}, ReadRate: 1e9, WriteRate: 1e9},
		{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared", "wing_opencode"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@laptop"}, ReadRate: 1e9, WriteRate: 1e9},
	}, u)
	tools, err := srv.Tools()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, tl := range tools {
		rec, _ := catalogue.Lookup(tl.Name)
		if !rec.Reads {
			continue
		}
		props, _ := tl.InputSchema["properties"].(map[string]any)
		base := legalArgs(tl, seeded)
		names := append([]string{"", catalogue.WaitForPrevious}, slices.Sorted(func(yield func(string) bool) {
			for p := range props {
				if !yield(p) {
					return
				}
			}
		})...)
		for _, p := range names {
			args := map[string]any{}
			for k, v := range base {
				args[k] = v
			}
			switch p {
			case "":
			case catalogue.WaitForPrevious: // Gemini CLI's, in no schema: every tool takes it
				args[p] = true
			default:
				args[p] = argValue(p, props[p].(map[string]any), seeded)
			}
			for _, dev := range []string{"ops-0001", "laptop-7f3a"} {
				calls++
				_, rpcErr, status := g.call(g.tokens[dev], rec.Name, args)
				msg := fmt.Sprint(rpcErr["message"])
				switch {
				case status != 200:
					t.Errorf("%s %s as %s: HTTP %d", rec.Name, p, dev, status)
				case strings.Contains(msg, "Unknown parameter"):
					t.Errorf("%s with %s as %s: refused as an unknown parameter: %s", rec.Name, p, dev, msg)
				case strings.Contains(msg, "answer refused"):
					t.Errorf("%s with %s as %s: the real answer was refused by the filter: %s", rec.Name, p, dev, msg)
				case dev == "ops-0001" && strings.Contains(msg, "devbox-config gateway"):
					t.Errorf("%s with %s: the gateway refused an admin: %s", rec.Name, p, msg)
				}
			}
		}
	}
	// The CLI's text output over every wing cannot be cut: a narrow
	// device gets it for a wing it reads, and a clear refusal without one.
	m, _, _ := g.call(g.tokens["laptop-7f3a"], "search", map[string]any{"query": "release", "cli_compatible": true, "wing": "shared"})
	if out, _ := m["cli_output"].(string); !strings.Contains(out, "release notes for the edge") || strings.Contains(out, "private") {
		t.Errorf("cli_output for a readable wing: %v", m)
	}
	if _, e, _ := g.call(g.tokens["laptop-7f3a"], "search", map[string]any{"query": "release", "cli_compatible": true}); !strings.Contains(fmt.Sprint(e["message"]), "name a wing it reads") {
		t.Errorf("a palace-wide cli_compatible search by a narrow device: %v", e)
	}
	if calls < 100 {
		t.Fatalf("only %d calls: the read tools were not all tried", calls)
	}
}

// TestRealFreshPrimaryReadsAreMemPalacesOwnError: on a primary that holds
// no drawer yet, real MemPalace answers drawer reads with "Chroma database
// missing" (then, once a search ran, "Backend open failed"), with details
// naming its palace path. Every read tool 3.11.0 advertises, as a device
// with exact wing grants, gets MemPalace's answer with the path cut, not
// the gateway's refusal of an unknown shape (attack102 F1: "details"
// unknown, so an edge's look-up before a queued diary entry failed).
func TestRealFreshPrimaryReadsAreMemPalacesOwnError(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, []Device{{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared", "wing_opencode"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@laptop"}, ReadRate: 1e9, WriteRate: 1e9}}, u)
	tools, err := srv.Tools()
	if err != nil {
		t.Fatal(err)
	}
	seeded := map[string]any{"wing": "shared", "room": "notes", "query": "release", "drawer_id": "drawer_shared_notes_1", "drawer_ids": []any{"drawer_shared_notes_1"},
		"content": "release", "agent_name": "opencode"}
	// before anything searched: "Chroma database missing", naming the path
	m, rpcErr, _ := g.call(g.tokens["laptop-7f3a"], "list_drawers", map[string]any{"wing": "shared"})
	if details, _ := m["details"].(string); m["error"] != "Chroma database missing" || !strings.Contains(details, "[path cut") || strings.Contains(details, "chroma.sqlite3") {
		t.Errorf("list_drawers on a fresh primary: %v %v, want MemPalace's error, its path cut", m, rpcErr)
	}
	unopened := 0
	for _, tl := range tools {
		rec, _ := catalogue.Lookup(tl.Name)
		if !rec.Reads || rec.Filter == catalogue.NoFilter {
			continue
		}
		m, rpcErr, _ := g.call(g.tokens["laptop-7f3a"], rec.Name, legalArgs(tl, seeded))
		if msg := fmt.Sprint(rpcErr["message"]); strings.Contains(msg, "answer refused") {
			t.Errorf("%s on a fresh primary: %s", rec.Name, msg)
		}
		if e, _ := m["error"].(string); e == "Chroma database missing" || e == "Backend open failed" {
			unopened++
			if all := fmt.Sprint(m); strings.Contains(all, "chroma.sqlite3") {
				t.Errorf("%s names the primary's palace: %v", rec.Name, m)
			}
		}
	}
	if unopened < 3 {
		t.Fatalf("only %d reads answered MemPalace's error: the primary was not fresh", unopened)
	}
}

// The same for a device that reads every wing but is not admin, whose
// answers the filter passes whole for some tools (list_rooms, graph_stats,
// find_tunnels): none names the primary's palace path, before a search or
// after (attack109 F2).
func TestRealFreshPrimaryNamesNoPathToADeviceReadingEveryWing(t *testing.T) {
	p := realpalace.New(t)
	srv := p.Serve(t, upstreamToken)
	u := &upstream{name: "mempalace " + realpalace.Version, url: srv.URL}
	g := newGWAt(t, []Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@desk"}, ReadRate: 1e9, WriteRate: 1e9}}, u)
	tools, err := srv.Tools()
	if err != nil {
		t.Fatal(err)
	}
	seeded := map[string]any{"wing": "shared", "room": "notes", "query": "release", "drawer_id": "drawer_shared_notes_1", "drawer_ids": []any{"drawer_shared_notes_1"},
		"content": "release", "agent_name": "opencode"}
	for _, round := range []string{"before a search", "after a search"} {
		unopened := 0
		for _, tl := range tools {
			rec, _ := catalogue.Lookup(tl.Name)
			if !rec.Reads || rec.Name == "event_wait" {
				continue
			}
			m, rpcErr, _ := g.call(g.tokens["desk-9b21"], rec.Name, legalArgs(tl, seeded))
			all := fmt.Sprint(m, rpcErr)
			if strings.Contains(all, "chroma.sqlite3") || strings.Contains(all, p.Dir) {
				t.Errorf("%s: %s names the primary's palace: %s", round, rec.Name, all)
			}
			if e, _ := m["error"].(string); e == "Chroma database missing" || e == "Backend open failed" {
				unopened++
			}
		}
		if unopened < 3 && round == "before a search" {
			t.Fatalf("%s: only %d reads answered MemPalace's error: the primary was not fresh", round, unopened)
		}
		g.call(g.tokens["desk-9b21"], "search", map[string]any{"query": "release"})
	}
}

// legalArgs are arguments 3.11.0's schema for tl takes: its required
// parameters, each a legal value (argValue), event_wait's wait short.
func legalArgs(tl realpalace.Tool, seeded map[string]any) map[string]any {
	props, _ := tl.InputSchema["properties"].(map[string]any)
	required, _ := tl.InputSchema["required"].([]any)
	args := map[string]any{}
	for _, r := range required {
		args[r.(string)] = argValue(r.(string), props[r.(string)].(map[string]any), seeded)
	}
	if tl.Name == "mempalace_event_wait" {
		args["timeout_ms"] = 10
	}
	return args
}
