package catalogue_test

import (
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"slices"
	"testing"

	. "github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

var updateSnapshot = flag.Bool("update-snapshot", false, "rewrite testdata/tools-<Checked>.json from the real server (TestRealCatalogueFollowsTheServer)")

// snapshotFile is the Checked release's tools/list as the real server
// answered it, and the tools it lists in read-only mode.
var snapshotFile = "testdata/tools-" + Checked + ".json"

type snapshot struct {
	Release string           `json:"release"`
	Tools   []map[string]any `json:"tools"`
	// ReadOnly names the tools mempalace-mcp --read-only lists: MemPalace's
	// own view of which tools change nothing.
	ReadOnly []string `json:"read_only"`
}

// params is each tool's advertised parameter names.
func (s snapshot) params() map[string][]string {
	out := map[string][]string{}
	for _, tl := range s.Tools {
		name, _ := tl["name"].(string)
		schema, _ := tl["inputSchema"].(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		out[name] = []string{}
		for p := range props {
			out[name] = append(out[name], p)
		}
		slices.Sort(out[name])
	}
	return out
}

// schema is a tool's advertised parameters' schemas, by name.
func (s snapshot) schema(tool string) (map[string]any, bool) {
	for _, tl := range s.Tools {
		if tl["name"] == tool {
			schema, _ := tl["inputSchema"].(map[string]any)
			props, ok := schema["properties"].(map[string]any)
			return props, ok
		}
	}
	return nil, false
}

func readSnapshot(t *testing.T) snapshot {
	t.Helper()
	b, err := os.ReadFile(snapshotFile)
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", snapshotFile, err)
	}
	return s
}

// readOnlyDecisions are the tools whose read/write class here differs
// from MemPalace's own read-only mode on purpose (the record's Why says
// why).
var readOnlyDecisions = []string{"reconnect"}

// followsServer fails for anything the server advertises that the
// catalogue does not know, and anything the catalogue dates to this
// release that the server does not advertise.
func followsServer(t *testing.T, s snapshot) {
	t.Helper()
	served := s.params()
	readOnly := map[string]bool{}
	for _, n := range s.ReadOnly {
		readOnly[n] = true
	}
	for name, want := range served {
		rec, ok := Lookup(name)
		switch {
		case !ok:
			t.Errorf("%s %s advertises %s: no catalogue record (add one, with its route, gate, filter and replay)", name, s.Release, name)
			continue
		case !rec.In(s.Release):
			t.Errorf("%s: Since %s, but %s has it", name, rec.Since, s.Release)
		}
		got := rec.ParamsIn(s.Release)
		for _, p := range want {
			if !slices.Contains(got, p) {
				t.Errorf("%s.%s: %s advertises it; the catalogue does not list it for %s, so the gateway refuses a legal call (\"Unknown parameter\")", name, p, s.Release, s.Release)
			}
		}
		schema, _ := s.schema(name)
		for _, p := range want {
			if typ, _ := schema[p].(map[string]any)["type"].(string); ParamType(p) != typ {
				t.Errorf("%s.%s: %s types it %q, ParamType says %q: the gateway refuses a legal call, or forwards what the schema does not take", name, p, s.Release, typ, ParamType(p))
			}
		}
		for _, p := range got {
			if !slices.Contains(want, p) {
				t.Errorf("%s.%s: listed for %s, which does not advertise it: date it in ParamSince with the release it belongs to", name, p, s.Release)
			}
		}
		if rec.Reads != readOnly[name] && !(slices.Contains(readOnlyDecisions, rec.Name) && rec.Why != "") {
			t.Errorf("%s: Reads = %v, but %s read-only mode lists it: %v", name, rec.Reads, s.Release, readOnly[name])
		}
		if rec.Gate == Deny || (rec.Gate == ReadWing && rec.Filter == NoFilter) {
			t.Errorf("%s: gate %s with filter %q: a served tool needs a gate, and a read-wing read a filter", name, rec.Gate, rec.Filter)
		}
	}
	for _, rec := range All() {
		if _, ok := served[Prefix+rec.Name]; rec.In(s.Release) && !ok {
			t.Errorf("%s: Since %s, but %s does not advertise it: mark it with the release it belongs to", rec.Name, rec.Since, s.Release)
		}
	}
}

// TestCatalogueFollowsTheSnapshot compares the catalogue with the Checked
// release's recorded tools/list (fast; TestRealCatalogueFollowsTheServer
// keeps the recording honest).
func TestCatalogueFollowsTheSnapshot(t *testing.T) {
	s := readSnapshot(t)
	if s.Release != Checked || len(s.Tools) == 0 || len(s.ReadOnly) == 0 {
		t.Fatalf("%s: release %q, %d tools, %d read-only", snapshotFile, s.Release, len(s.Tools), len(s.ReadOnly))
	}
	followsServer(t, s)
}

// TestRealCatalogueFollowsTheServer reads real MemPalace's tools/list
// (stdio and serve, and stdio in read-only mode), checks that it is the
// recorded snapshot, and compares the catalogue with it.
func TestRealCatalogueFollowsTheServer(t *testing.T) {
	p := realpalace.New(t)
	list := func(c *realpalace.Client) []map[string]any {
		r, err := c.RPC("tools/list", map[string]any{})
		if err != nil || r.Error != nil {
			t.Fatalf("tools/list: %v %v", err, r.Error)
		}
		var res struct {
			Tools []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		return res.Tools
	}
	live := snapshot{Release: realpalace.Version, Tools: list(p.Stdio(t).Client)}
	for _, tl := range list(p.Stdio(t, append(p.MCPCommand(), "--read-only")...).Client) {
		live.ReadOnly = append(live.ReadOnly, tl["name"].(string))
	}
	if served := list(p.Serve(t, "tok").Client); !reflect.DeepEqual(served, live.Tools) {
		t.Errorf("mempalace serve advertises other tools than mempalace-mcp")
	}
	if live.Release != Checked {
		t.Fatalf("the tests run MemPalace %s, the catalogue was checked against %s: record %s's snapshot (-update-snapshot) and set Checked", live.Release, Checked, live.Release)
	}
	if *updateSnapshot {
		b, _ := json.MarshalIndent(live, "", "  ")
		if err := os.WriteFile(snapshotFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Compared as JSON values: the file is re-encoded (keys sorted).
	rec := readSnapshot(t)
	b, _ := json.Marshal(live)
	var back snapshot
	json.Unmarshal(b, &back)
	if !reflect.DeepEqual(rec, back) {
		t.Errorf("%s is not what %s answers: rerun with -update-snapshot and review the diff", snapshotFile, live.Release)
	}
	followsServer(t, live)
}

// waitValues are values Gemini CLI's wait_for_previous may come with: it
// declares a boolean, MemPalace takes any.
var waitValues = []any{true, false, nil, "yes", 1, []any{}, map[string]any{}}

// Every tool the Checked release lists takes wait_for_previous of any
// value (TestRealEveryToolTakesWaitForPrevious holds this to the real
// server), so neither the gateway nor the edge refuses a Gemini CLI call:
// with an unknown argument besides, only that one is named.
func TestEveryToolTakesWaitForPrevious(t *testing.T) {
	for name := range readSnapshot(t).params() {
		rec, _ := Lookup(name)
		for _, v := range waitValues {
			args := map[string]any{WaitForPrevious: v}
			if msg, _ := UnknownParams(rec, args); msg != "" {
				t.Errorf("%s with wait_for_previous %v: %s", name, v, msg)
			}
			if err := CheckValues(rec, args); err != nil {
				t.Errorf("%s with wait_for_previous %v: %v", name, v, err)
			}
			args["bogus"] = 1
			if msg, _ := UnknownParams(rec, args); msg != "Unknown parameter 'bogus' for tool "+name {
				t.Errorf("%s with wait_for_previous and bogus: %q", name, msg)
			}
		}
	}
}

// TestRealEveryToolTakesWaitForPrevious calls every tool real MemPalace
// lists with wait_for_previous of each JSON type and an unknown argument:
// the refusal names the unknown one alone, as UnknownParams does (so no
// handler runs and nothing is written).
func TestRealEveryToolTakesWaitForPrevious(t *testing.T) {
	c := realpalace.New(t).Stdio(t).Client
	tools, err := c.Tools()
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		rec, _ := Lookup(tl.Name)
		for _, v := range waitValues {
			args := map[string]any{WaitForPrevious: v, "bogus": 1}
			want, _ := UnknownParams(rec, args)
			r, err := c.RPC("tools/call", map[string]any{"name": tl.Name, "arguments": args})
			if err != nil {
				t.Fatal(err)
			}
			if r.Error == nil || r.Error.Code != -32602 || r.Error.Message != "Unknown parameter 'bogus' for tool "+tl.Name || r.Error.Message != want {
				t.Errorf("%s with wait_for_previous %v and bogus: real %+v, the catalogue's %q", tl.Name, v, r.Error, want)
			}
		}
	}
}
