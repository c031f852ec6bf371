package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRealOriginsSurviveServe: drawers, diary entries, facts and events
// written through the gateway in front of real MemPalace serve read back,
// in every answer that returns them, with their writer's origin; where
// real MemPalace returns metadata.added_by it names the same device; a
// drawer and a fact written around the gateway read as of unknown origin,
// whatever added_by they claim; and a device that trusts only the admin
// gets the rest marked.
func TestRealOriginsSurviveServe(t *testing.T) {
	u, srv := startReal(t)
	fast := func(d Device) Device { d.ReadRate, d.WriteRate = 1e9, 1e9; return d }
	g := newGWAt(t, []Device{
		fast(Device{ID: "laptop-7f3a", Label: "laptop", Read: []string{"shared", "wing_opencode"}, Write: []string{"shared", "wing_opencode"}, KG: "read", Agents: []string{"opencode@laptop"}}),
		fast(Device{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"shared"}, KG: "write", Agents: []string{"pi@desk"}, Trusts: []string{"admin-0001"}}),
		fast(Device{ID: "admin-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Coordinator: true}),
	}, u)
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	must := func(tok, tool string, args map[string]any) map[string]any {
		t.Helper()
		res, rpc, _ := g.call(tok, tool, args)
		if rpc != nil || res == nil || res["success"] == false || res["error"] != nil {
			t.Fatalf("%s: %v %v", tool, res, rpc)
		}
		return res
	}
	is := func(what string, rec any, id string, trusted bool) {
		t.Helper()
		o := originOf(t, rec)
		if o["device"] != id || o["trusted"] != trusted {
			t.Errorf("%s: origin %v, want %s trusted %v (record %.300v)", what, o, id, trusted, rec)
		}
	}

	drawer := must(laptop, "add_drawer", map[string]any{"wing": "shared", "room": "release", "content": "the release train leaves on fridays from the laptop", "added_by": "opencode"})["drawer_id"]
	must(admin, "add_drawer", map[string]any{"wing": "shared", "room": "release", "content": "the release train needs a green build, says ops"})
	srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "release", "content": "the release train is cancelled, says a stranger", "added_by": "pi/ops/admin-0001"})
	long := strings.Repeat("the laptop kept a long diary about the release train. ", 20)
	must(laptop, "diary_write", map[string]any{"agent_name": "opencode", "entry": "shipped the release train"})
	must(laptop, "diary_write", map[string]any{"agent_name": "opencode", "entry": long})
	must(desk, "kg_add", map[string]any{"subject": "Release Train", "predicate": "leaves on", "object": "Friday"})
	must(admin, "kg_supersede", map[string]any{"subject": "release train", "predicate": "leaves_on", "old_object": "friday", "new_object": "Monday"})
	must(admin, "kg_add", map[string]any{"subject": "release train", "predicate": "needs", "object": "green build", "valid_from": "2026-01-01"})
	srv.MustCall(t, "mempalace_kg_add", map[string]any{"subject": "release train", "predicate": "runs", "object": "late"})
	ev := must(laptop, "event_append", map[string]any{"type": "ask", "stream": "release", "room": "train", "from_agent": "opencode@laptop", "to_agent": "pi@desk", "body": "can you drive the train?"})["event"].(map[string]any)["id"]

	hits := must(desk, "search", map[string]any{"query": "release train", "wing": "shared", "limit": 10})["results"].([]any)
	byText := map[string]any{}
	for _, h := range hits {
		byText[str(h.(map[string]any)["text"])] = h
	}
	is("search: laptop's drawer", byText["the release train leaves on fridays from the laptop"], "laptop-7f3a", false)
	is("search: the admin's drawer", byText["the release train needs a green build, says ops"], "admin-0001", true)
	is("search: a drawer written around the gateway", byText["the release train is cancelled, says a stranger"], "unknown", false)

	// The CLI's text of the hits carries no origins: not for a device that names a trusted set.
	if _, rpc, _ := g.call(desk, "search", map[string]any{"query": "release train", "wing": "shared", "cli_compatible": true}); rpc == nil || !strings.Contains(str(rpc["message"]), "names a trusted set") {
		t.Errorf("cli_compatible for a device with a trusted set: %v", rpc)
	}
	if res := must(admin, "search", map[string]any{"query": "release train", "wing": "shared", "cli_compatible": true}); !strings.Contains(str(res["cli_output"]), "release train") {
		t.Errorf("cli_compatible for a device without one: %v", res)
	}

	got := must(desk, "get_drawer", map[string]any{"drawer_id": drawer})
	is("get_drawer", got, "laptop-7f3a", false)
	if by := str(got["metadata"].(map[string]any)["added_by"]); by != "opencode/laptop/laptop-7f3a" || originOf(t, got)["agent"] != "opencode" || originOf(t, got)["label"] != "laptop" {
		t.Errorf("real metadata.added_by %q and the origin %v disagree", by, originOf(t, got))
	}
	for _, d := range must(desk, "list_drawers", map[string]any{"wing": "shared"})["drawers"].([]any) {
		dm := d.(map[string]any)
		by := str(dm["metadata"].(map[string]any)["added_by"])
		if o := originOf(t, d); o["device"] != "unknown" && !strings.HasSuffix(by, "/"+str(o["device"])) {
			t.Errorf("list_drawers: added_by %q, origin %v", by, o)
		}
		if by == "pi/ops/admin-0001" && originOf(t, d)["device"] != "unknown" {
			t.Errorf("a forged added_by is taken for the admin's: %v", d)
		}
	}
	batch := must(desk, "get_drawers", map[string]any{"drawer_ids": []any{drawer, "drawer_nope"}})["results"].([]any)
	is("get_drawers", batch[0], "laptop-7f3a", false)
	if originOf(t, batch[1]) != nil {
		t.Errorf("get_drawers: a missing id's error item got an origin: %v", batch[1])
	}

	entries := must(laptop, "diary_read", map[string]any{"agent_name": "opencode", "last_n": 20})["entries"].([]any)
	if len(entries) < 3 {
		t.Fatalf("diary_read: %v", entries)
	}
	for _, e := range entries {
		is("diary_read", e, "laptop-7f3a", true)
	}
	diaryHits := must(laptop, "search", map[string]any{"query": "shipped the release train", "wing": "wing_opencode"})["results"].([]any)
	is("a diary entry found by search", diaryHits[0], "laptop-7f3a", true)

	facts := must(desk, "kg_query", map[string]any{"entity": "release train"})
	for _, list := range []string{"facts", "active_facts", "historical_facts"} {
		for _, f := range facts[list].([]any) {
			fm := f.(map[string]any)
			switch want := map[string]string{"Friday": "desk-9b21", "Monday": "admin-0001", "green build": "admin-0001", "late": "unknown"}[str(fm["object"])]; want {
			case "":
				t.Errorf("kg_query %s: an unexpected fact %v", list, fm)
			default:
				is("kg_query "+list+" "+str(fm["object"]), f, want, want == "admin-0001" || want == "desk-9b21")
			}
		}
	}
	if n := len(facts["facts"].([]any)); n != 4 {
		t.Errorf("kg_query: %d facts, want 4", n)
	}
	for _, f := range must(desk, "kg_timeline", map[string]any{"entity": "release train"})["timeline"].([]any) {
		if o := originOf(t, f); o == nil || (o["device"] == "unknown") != (f.(map[string]any)["object"] == "late") {
			t.Errorf("kg_timeline: %v", f)
		}
	}

	for _, tool := range []string{"event_list", "event_wait"} {
		args := map[string]any{"to_agent": "pi@desk"}
		if tool == "event_wait" {
			args["timeout_ms"] = 10
		}
		evs, _ := must(desk, tool, args)["events"].([]any)
		if len(evs) != 1 || evs[0].(map[string]any)["id"] != ev {
			t.Errorf("%s: %v", tool, evs)
			continue
		}
		is(tool, evs[0], "laptop-7f3a", false)
	}

	// The stream: an event appended while a device listens comes with its
	// writer's origin (desk trusts only the admin: marked). The stream
	// opens after the ask above (since_event_id): the event is sent whether
	// it lands before the stream has started tailing or after (a sleep
	// before the append lost it under load).
	streamStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.http.URL+"/logstream/stream?to_agent=pi@desk&since_event_id="+url.QueryEscape(ev.(string)), nil)
	req.Header.Set("Authorization", "Bearer "+desk)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		g.call(laptop, "event_append", map[string]any{"type": "ask", "stream": "release", "room": "train", "from_agent": "opencode@laptop", "to_agent": "pi@desk", "body": "streamed ask"})
	})
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok || !strings.Contains(data, "streamed ask") {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("a frame's data is not JSON: %v: %s", err, data)
		}
		is("/logstream/stream", ev, "laptop-7f3a", false)
		t.Logf("streamed after %v", time.Since(streamStart))
		return
	}
	t.Errorf("the streamed event never came: %v", lines.Err())
}

// TestRealARetiredFactFiledAgainIsTheReAddersFact: against real MemPalace
// serve, a fact ops retired and mal filed again reads as mal's (or
// unknown), the retired one as ops's (attack22 F8, t3f and t3e).
func TestRealARetiredFactFiledAgainIsTheReAddersFact(t *testing.T) {
	retiredFactFiledAgain(t, func(t *testing.T) string { u, _ := startReal(t); return u.url })
}
