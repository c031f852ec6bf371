package catalogue

import (
	"bufio"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// surface reads testdata/surface.txt: tool -> the union of its argument
// names over every release, its first release, and each argument's
// first release.
func surface(t *testing.T) (params map[string][]string, since map[string]string, paramSince map[string]map[string]string) {
	t.Helper()
	f, err := os.Open("testdata/surface.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	params, since, paramSince = map[string][]string{}, map[string]string{}, map[string]map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("surface.txt: %q: want name, release, params", line)
		}
		name, rel, ps := fields[0], fields[1], fields[2]
		if _, seen := since[name]; !seen {
			since[name], paramSince[name] = rel, map[string]string{}
		}
		if _, ok := params[name]; !ok {
			params[name] = []string{}
		}
		if ps == "-" {
			continue
		}
		for _, p := range strings.Split(ps, ",") {
			params[name] = append(params[name], p)
			if _, seen := paramSince[name][p]; !seen && rel != since[name] {
				paramSince[name][p] = rel
			}
		}
	}
	return params, since, paramSince
}

// TestEveryReferenceToolHasARecord walks the reference's full tool list
// (3.6.0 to dev) and fails for any tool without a record, or a record
// whose arguments, or their releases, differ from what the reference
// lists.
func TestEveryReferenceToolHasARecord(t *testing.T) {
	params, since, paramSince := surface(t)
	for name, want := range params {
		rec, ok := Lookup(Prefix + name)
		if !ok {
			t.Errorf("%s: no catalogue record", name)
			continue
		}
		if rec.Since != since[name] {
			t.Errorf("%s: Since = %q, the reference says %q", name, rec.Since, since[name])
		}
		got := slices.Sorted(slices.Values(rec.Params))
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Params = %v, the reference lists %v", name, got, want)
		}
		if !maps.Equal(rec.ParamSince, paramSince[name]) && (len(rec.ParamSince) > 0 || len(paramSince[name]) > 0) {
			t.Errorf("%s: ParamSince = %v, the reference dates %v", name, rec.ParamSince, paramSince[name])
		}
	}
	for _, rec := range All() {
		if _, ok := params[rec.Name]; !ok {
			t.Errorf("%s: a record for a tool the reference does not list", rec.Name)
		}
	}
}

// TestSurfaceListIsTheReferences checks testdata/surface.txt against the
// reference itself where it is at hand (the steering repository's shared/
// beside this checkout): every tool §1 names is in the list.
func TestSurfaceListIsTheReferences(t *testing.T) {
	b, err := os.ReadFile("../../shared/reference/mempalace-surface.md")
	if err != nil {
		t.Skip("the MemPalace surface reference is not beside this checkout; testdata/surface.txt stands for it")
	}
	s := string(b)
	start, end := strings.Index(s, "## 1. MCP tools"), strings.Index(s, "## 2.")
	if start < 0 || end < start {
		t.Fatal("reference: §1 not found")
	}
	params, _, _ := surface(t)
	for _, m := range regexp.MustCompile("`mempalace_([a-z_]+)`").FindAllStringSubmatch(s[start:end], -1) {
		if _, ok := params[m[1]]; !ok {
			t.Errorf("the reference's §1 names mempalace_%s; testdata/surface.txt does not", m[1])
		}
	}
}

// TestEdgeAndGatewayAgree: for every tool the edge's read/write view and
// the gateway's are the same. A read the edge resends freely is never a
// write to the gateway's scopes, and a write never passes on a read grant.
func TestEdgeAndGatewayAgree(t *testing.T) {
	readGates := []Gate{ReadWing, ReadByID, ReadStatic, ReadAllWings, KGRead, CoordinationGrant}
	writeGates := []Gate{WriteWing, KGWrite, AgentWrite}
	for _, rec := range All() {
		edgeRead := rec.Route == MergedRead || rec.Route == PrimaryFirst || rec.Route == ByID || rec.Route == CoordinationRead
		switch {
		case edgeRead && !rec.Reads:
			t.Errorf("%s: the edge routes it as a read (%s) but the record says it writes", rec.Name, rec.Route)
		case rec.Reads && slices.Contains(writeGates, rec.Gate):
			t.Errorf("%s: a read behind a write scope (%s) at the gateway", rec.Name, rec.Gate)
		case !rec.Reads && slices.Contains(readGates, rec.Gate):
			t.Errorf("%s: a write let through on a read scope (%s) at the gateway", rec.Name, rec.Gate)
		case edgeRead && rec.Gate == Admin:
			t.Errorf("%s: a read to the edge but admin-only at the gateway", rec.Name)
		case (rec.Route == Write || rec.Route == CoordinationWrite) && rec.Reads:
			t.Errorf("%s: queued as a write by the edge but recorded as a read", rec.Name)
		}
		if rec.Route.Local() && rec.Gate != Admin && rec.Gate != Never {
			t.Errorf("%s: never proxied by the edge (%s) but not admin-only at the gateway (%s)", rec.Name, rec.Route, rec.Gate)
		}
		if rec.Gate == AgentWrite && !rec.Accepts(rec.Identity) {
			t.Errorf("%s: identity argument %q is not one of its parameters", rec.Name, rec.Identity)
		}
		if rec.OpStamp && !rec.Accepts("metadata") {
			t.Errorf("%s: stamped with metadata.edge_op_id but has no metadata argument (MemPalace would refuse it)", rec.Name)
		}
	}
}

func TestUnknownTools(t *testing.T) {
	for _, name := range []string{"create_entities", "mempalace_future_tool", ""} {
		rec, ok := Lookup(name)
		if ok || rec.Known() {
			t.Errorf("%q: known", name)
		}
		if rec.Route != Write || rec.Gate != Deny || rec.Replay != Verbatim || rec.Reads {
			t.Errorf("%q: unknown tools are writes to the edge, replayed verbatim, denied by the gateway; got %+v", name, rec)
		}
	}
	// The bare and prefixed names are one record.
	a, _ := Lookup("search")
	b, _ := Lookup("mempalace_search")
	if a.Name != b.Name || a.Route != MergedRead {
		t.Errorf("search: %+v / %+v", a, b)
	}
}

func TestWingsOf(t *testing.T) {
	rec := func(n string) Tool { r, _ := Lookup(n); return r }
	cases := []struct {
		tool       string
		args       map[string]any
		drawerWing string
		want       []string
	}{
		{"add_drawer", map[string]any{"wing": "w", "room": "r"}, "", []string{"w"}},
		{"add_drawer", map[string]any{"room": "r"}, "", []string{""}},
		{"search", map[string]any{"query": "q"}, "", nil},
		{"search", map[string]any{"query": "q", "wing": "w"}, "", []string{"w"}},
		{"diary_write", map[string]any{"agent_name": "Claude"}, "", []string{"wing_claude"}},
		{"diary_write", map[string]any{"agent_name": "Claude", "wing": "notes"}, "", []string{"notes"}},
		{"diary_read", map[string]any{"agent_name": "Pi"}, "", []string{"wing_pi"}},
		{"diary_write", map[string]any{"agent_name": "My Bot"}, "", []string{"wing_my_bot"}},
		{"update_drawer", map[string]any{"drawer_id": "d"}, "old", []string{"old"}},
		{"update_drawer", map[string]any{"drawer_id": "d", "wing": "new"}, "old", []string{"old", "new"}},
		{"create_tunnel", map[string]any{"source_wing": "a", "target_wing": "b"}, "", []string{"a", "b"}},
		{"checkpoint", map[string]any{"items": []any{map[string]any{"wing": "a"}, map[string]any{"wing": "b"}}, "diary": map[string]any{"agent_name": "X"}}, "", []string{"a", "b", "wing_x"}},
		{"checkpoint", map[string]any{"items": []any{}}, "", nil},
		{"kg_add", map[string]any{"subject": "s"}, "", nil},
		{"event_append", map[string]any{"stream": "s"}, "", nil},
	}
	for _, c := range cases {
		got := rec(c.tool).WingsOf(c.args, c.drawerWing)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %v: wings %q, want %q", c.tool, c.args, got, c.want)
		}
	}
	if e := DiaryEntry(map[string]any{"content": "c"}); e != "c" {
		t.Errorf("diary entry alias: %q", e)
	}
	if e := DiaryEntry(map[string]any{"entry": "e", "content": "c"}); e != "e" {
		t.Errorf("diary entry wins over content: %q", e)
	}
}
