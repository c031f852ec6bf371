package join

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// A join with --origin-device through a gateway, made by an admin
// device, attributes the whole palace to the device it names: every
// drawer, diary entry and fact reads back with that device's origin (via
// the admin), and added_by names it. Made by a device that is not an
// admin, it is refused record by record, saying why, and nothing lands.
func TestJoinOriginDeviceThroughTheGateway(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@ops"}},
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@desk"}},
		{ID: "oldbox-11c2", Label: "oldbox"}, // the palace it once held is joined for it
	})
	up := pr.pl

	// desk is not an admin: its claim for oldbox is refused.
	p := newPalace(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token, c.Device = url, func() string { return tokens["desk-9b21"] }, "oldbox-11c2"
	rep := run(t, c, Options{})
	if rep.OK() || len(up.Dump().Drawers) != 0 || !strings.Contains(rep.Failed[0].Error, "only an admin device") {
		t.Fatalf("a non-admin's join for another device: %+v, %d drawers landed", rep.Failed, len(up.Dump().Drawers))
	}
	for _, f := range rep.Failed {
		// the ops left wait behind the refused ones: said as such, not as
		// a primary that "accepted nothing" after the stall's wait
		if f.Kind == "primary" {
			t.Errorf("a join whose records were refused reports %+v", f)
		}
	}

	p = newPalace(t)
	fill(t, p, "b")
	p.policy(t, localWorkspace)
	p.save(t)
	c = config(t, p, pr)
	c.URL, c.Token, c.Device = url, func() string { return tokens["ops-0001"] }, "oldbox-11c2"
	if rep := run(t, c, Options{Verify: All}); !rep.OK() {
		t.Fatalf("the admin's join: %+v", rep)
	}
	read := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_" + tool, "arguments": args}})
		req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tokens["desk-9b21"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Result struct{ Content []struct{ Text string } }
		}
		json.NewDecoder(resp.Body).Decode(&r)
		var m map[string]any
		json.Unmarshal([]byte(r.Result.Content[0].Text), &m)
		return m
	}
	records := 0
	check := func(what string, list any) {
		t.Helper()
		for _, x := range list.([]any) {
			raw, _ := json.Marshal(x)
			o, ok := origin.Of(raw)
			if !ok || o.Device != "oldbox-11c2" || o.Label != "oldbox" || o.Via != "ops-0001" || !o.Trusted {
				t.Errorf("%s: origin %+v in %s", what, o, raw)
			}
			records++
		}
	}
	check("list_drawers", read("list_drawers", map[string]any{"wing": "project", "limit": 100})["drawers"])
	check("diary_read", read("diary_read", map[string]any{"agent_name": "opencode", "last_n": 100})["entries"])
	check("kg_query", read("kg_query", map[string]any{"entity": "Alice"})["facts"])
	if records < 10 {
		t.Errorf("only %d records read back", records)
	}
	for _, d := range up.Dump().Drawers {
		if !d.Diary && !strings.HasSuffix(d.AddedBy, "/oldbox/oldbox-11c2") {
			t.Errorf("%s: added_by %q", d.ID, d.AddedBy)
		}
	}
}

// A mistyped --origin-device is refused record by record; the rerun with
// the right one sends every record as that device. The refused ops of the
// first run are replaced by the rerun's writes of the same records, said
// in a note, instead of holding them back and failing again under the
// mistyped id (attack13 08: only `edge outbox drop --join OP`, op by op,
// got out).
func TestJoinRerunWithCorrectedOriginDevice(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@ops"}},
		{ID: "oldbox-11c2", Label: "oldbox"},
	})
	p := newPalace(t)
	fill(t, p, "a")
	p.policy(t, localWorkspace)
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token, c.Device = url, func() string { return tokens["ops-0001"] }, "ghost-77"
	if rep := run(t, c, Options{}); rep.OK() || !strings.Contains(rep.Failed[0].Error, "ghost-77") {
		t.Fatalf("a join for a device the gateway does not have: %+v", rep.Failed)
	}
	c.Device = "oldbox-11c2"
	rep := run(t, c, Options{Verify: All})
	if !rep.OK() {
		for _, f := range rep.Failed {
			t.Errorf("rerun with the right --origin-device: %s %s: %s", f.Kind, f.Record, f.Error)
		}
		t.FailNow()
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "replaced") && strings.Contains(n, "ghost-77") }) {
		t.Errorf("no note of the refused ops replaced: %q", rep.Notes)
	}
	drawers := 0
	for _, d := range pr.pl.Dump().Drawers {
		if !d.Diary {
			drawers++
			if !strings.HasSuffix(d.AddedBy, "/oldbox/oldbox-11c2") {
				t.Errorf("%s: added_by %q", d.ID, d.AddedBy)
			}
		}
	}
	if drawers == 0 {
		t.Error("no drawer landed")
	}
}

// A rerun that sends again three refused records of different kinds (a
// drawer, a diary entry, a fact) says 3 in its note. Before, it counted
// only the drawer, whose refused op is replaced; the other two are tried
// again (attack82 F4: operator.md says "a note says how many").
func TestJoinRerunCountsEveryRefusedRecordItSendsAgain(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@ops"}},
		{ID: "oldbox-11c2", Label: "oldbox"},
	})
	p := newPalace(t)
	p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "f4 drawer"})
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "f4 diary entry"})
	p.do(t, "kg_add", map[string]any{"subject": "f4", "predicate": "uses", "object": "go"})
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token, c.Device = url, func() string { return tokens["ops-0001"] }, "ghost-77"
	if rep := run(t, c, Options{}); len(rep.Failed) != 3 {
		t.Fatalf("a join for a device the gateway does not have: %+v", rep.Failed)
	}
	c.Device = "oldbox-11c2"
	rep := run(t, c, Options{})
	if !rep.OK() {
		t.Fatalf("rerun: %+v", rep.Failed)
	}
	// the drawer's refused op is replaced (its added_by stamp changed), the
	// diary entry's and the fact's are tried again (their arguments did not)
	if !slices.ContainsFunc(rep.Notes, func(n string) bool {
		return strings.HasPrefix(n, "3 records an earlier join queued and the primary refused") && strings.Contains(n, "ghost-77") && strings.Contains(n, ": 2 tried again, 1 replaced")
	}) {
		t.Errorf("the note does not count the 3 refused records written again: %q", rep.Notes)
	}
}
