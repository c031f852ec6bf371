package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/origin"
	"github.com/joakimp/devbox-config/gateway/trash"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// narrowDevices: ops files drawers; lab and boss read and write team_b
// alone (boss is an admin: its deletes by id look up each drawer's wing).
var narrowDevices = append([]Device{
	{ID: "lab", Label: "lab", Read: []string{"team_b"}, Write: []string{"team_b"}, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "boss", Label: "boss", Read: []string{"team_b"}, Write: []string{"team_b"}, Admin: true, ReadRate: 1e9, WriteRate: 1e9},
}, deleteDevices...)

// TestWingLookUpNotAnsweredBacksOff: while the primary does not answer
// the look-up of a drawer's wing, an edge's queued write by id from a
// device that does not read and write every wing is answered as the
// primary being busy (HTTP 503: its outbox backs off), not refused as not
// visible (-31003: dead after five tries in seconds, the agent told it
// succeeded); once the primary answers, the write is made.
func TestWingLookUpNotAnsweredBacksOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		device, tool string
		args         func(id string) map[string]any
		made         func(g cuttingGateway, id string) bool
	}{
		{"lab", "mempalace_update_drawer", func(id string) map[string]any { return map[string]any{"drawer_id": id, "content": "D edited"} },
			func(g cuttingGateway, id string) bool { return len(g.keptOf(t, id)) == 1 }},
		{"boss", "mempalace_delete_drawer", func(id string) map[string]any { return map[string]any{"drawer_id": id} },
			func(g cuttingGateway, id string) bool { return !g.holds(t, id) }},
		{"boss", "mempalace_delete_drawers", func(id string) map[string]any { return map[string]any{"drawer_ids": []any{id}} },
			func(g cuttingGateway, id string) bool { return !g.holds(t, id) }},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			g := newCuttingGatewayWith(t, startFake(t).url, narrowDevices)
			d := g.add(t, map[string]any{"wing": "team_b", "room": "del", "content": "D " + tc.tool})
			for range 10 { // twice the refusals that made it dead
				g.proxy.Drop("mempalace_get_drawers", "mempalace_get_drawer")
			}
			st, p, f := edgeOutbox(t, g.http.URL+"/mcp", g.tokens[tc.device])
			if _, err := st.Enqueue(t.Context(), outbox.Write{Name: tc.tool, Payload: encodeJSON(tc.args(d))}); err != nil {
				t.Fatal(err)
			}
			if s := drain(t, st, p, f, 60*time.Second); s.ByState[outbox.Done] != 1 {
				ops, _ := st.List(t.Context(), 10)
				for _, o := range ops {
					t.Logf("op %s attempts %d: %s", o.State, o.Attempts, o.Error)
				}
				t.Fatalf("the write did not settle: %+v", s)
			}
			if !tc.made(g, d) {
				t.Error("the write was not made")
			}
		})
	}
}

// TestJoinWhoseLookUpIsNotAnsweredIsNotRefused: a join's add of a drawer
// the trash holds as deleted, filed again since, while the primary does
// not answer the look-up that would find it there, is answered as the
// primary being busy (HTTP 503), not refused as deleted on the primary;
// once the primary answers, it is accepted.
func TestJoinWhoseLookUpIsNotAnsweredIsNotRefused(t *testing.T) {
	t.Parallel()
	g := newCuttingGatewayWith(t, startFake(t).url, deleteDevices)
	args := map[string]any{"wing": "team_b", "room": "del", "content": "D filed again"}
	d := g.add(t, args)
	if _, rpc, _ := g.call(g.tokens["ops"], "delete_drawer", map[string]any{"drawer_id": d}); rpc != nil {
		t.Fatal(rpc)
	}
	if ks := g.keptOf(t, d); len(ks) != 1 || ks[0].State != trash.StateDeleted {
		t.Fatalf("the trash: %+v, want one delete, deleted", ks)
	}
	g.add(t, args) // filed again, not by a join
	join, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "mempalace_add_drawer", "arguments": args, "_meta": map[string]any{origin.JoinKey: true}}})
	g.proxy.Drop("mempalace_get_drawer", "mempalace_get_drawer") // its send and the one resend of a read
	if status, m := g.post(g.tokens["ops"], string(join)); status != http.StatusServiceUnavailable {
		t.Errorf("the look-up not answered: HTTP %d %v, want 503", status, m)
	}
	if status, m := g.post(g.tokens["ops"], string(join)); status != http.StatusOK || rpcError(m) != nil {
		t.Errorf("the look-up answered: HTTP %d %v, want the add accepted", status, m)
	}
}

// TestEventLookUpNotAnsweredBacksOff: while the primary does not answer
// the event_list look-up the gateway makes before a non-coordinator's
// event_ack (is the event one it can see?), an edge's queued ack is
// answered as the primary being busy (HTTP 503: its outbox backs off),
// not refused as not visible (-31003: dead after five tries, the agent
// told it acked); once the primary answers, the ack is made.
func TestEventLookUpNotAnsweredBacksOff(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	g := newCuttingGatewayWith(t, fake.url, []Device{{ID: "lab", Label: "lab", Read: []string{"team_b"}, Write: []string{"team_b"}, Agents: []string{"pi@lab"}, ReadRate: 1e9, WriteRate: 1e9}})
	upCall(t, fake.palace, "mempalace_event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "oc@desk", "to_agent": "pi@lab", "body": "the ask"})
	ask := fake.palace.Dump().Events[0].ID
	// Twice the five refusals that made it dead: before, each ack's
	// look-up was asked by addressee and by writer, each sent twice.
	for range 20 {
		g.proxy.Drop("mempalace_event_list")
	}
	st, p, f := edgeOutbox(t, g.http.URL+"/mcp", g.tokens["lab"])
	if _, err := st.Enqueue(t.Context(), outbox.Write{Name: "mempalace_event_ack", Payload: encodeJSON(map[string]any{"event_id": ask, "from_agent": "pi@lab", "status": "applied"})}); err != nil {
		t.Fatal(err)
	}
	if s := drain(t, st, p, f, 60*time.Second); s.ByState[outbox.Done] != 1 {
		ops, _ := st.List(t.Context(), 10)
		for _, o := range ops {
			t.Logf("op %s attempts %d: %s", o.State, o.Attempts, o.Error)
		}
		t.Fatalf("the ack did not settle: %+v", s)
	}
	acks := 0
	for _, e := range fake.palace.Dump().Events {
		if e.Type == "event.ack" {
			acks++
		}
	}
	if acks != 1 {
		t.Errorf("%d acks on the primary, want 1", acks)
	}
}

// TestDuplicateCheckNotAnsweredFilesNothing: a device that does not read
// every wing has its checkpoint's items checked for duplicates by the
// gateway (check_duplicate), and sent with MemPalace's own check off.
// While the primary does not answer a check, the checkpoint is answered
// as the primary being busy (HTTP 503) and nothing of it is filed, not
// filed as if it had no duplicate (before: a second copy of a drawer
// already in a wing it reads); once the primary answers, the item is
// reported as a duplicate and not filed.
func TestDuplicateCheckNotAnsweredFilesNothing(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	g := newCuttingGatewayWith(t, fake.url, append([]Device{{ID: "lab", Label: "lab", Read: []string{"team_b"}, Write: []string{"team_b"}, Agents: []string{"pi@lab"}, ReadRate: 1e9, WriteRate: 1e9}}, deleteDevices...))
	const text = "the deploy runbook: drain, cut over, verify"
	g.add(t, map[string]any{"wing": "team_b", "room": "runbooks", "content": text})
	cp := map[string]any{"items": []any{
		map[string]any{"wing": "team_b", "room": "session", "content": text},
		map[string]any{"wing": "team_b", "room": "notes", "content": "a note no drawer resembles"},
	}, "diary": map[string]any{"agent_name": "pi", "wing": "team_b", "entry": "the session's diary"}}
	held := func() (dups, notes, diaries int) {
		d := fake.palace.Dump()
		return d.CountContent(text), d.CountContent("a note no drawer resembles"), d.CountContent("the session's diary")
	}
	g.proxy.Drop("mempalace_check_duplicate", "mempalace_check_duplicate") // the first item's check and its one resend
	status, m := g.postOp(g.tokens["lab"], "mempalace_checkpoint", cp, strings.Repeat("c", 64))
	if status != http.StatusServiceUnavailable {
		t.Errorf("the check not answered: HTTP %d %v, want 503", status, m)
	}
	if dups, notes, diaries := held(); dups != 1 || notes != 0 || diaries != 0 {
		t.Errorf("the check not answered: the primary holds %d copies of the drawer, %d notes, %d diary entries; want 1, 0, 0", dups, notes, diaries)
	}
	status, m = g.postOp(g.tokens["lab"], "mempalace_checkpoint", cp, strings.Repeat("c", 64))
	dups, _ := result(m)["duplicates"].([]any)
	if first, _ := firstOf(dups).(map[string]any); status != http.StatusOK || len(dups) != 1 || first["room"] != "session" {
		t.Errorf("the check answered: HTTP %d %v, want the first item reported a duplicate", status, m)
	}
	if dups, notes, diaries := held(); dups != 1 || notes != 1 || diaries != 1 {
		t.Errorf("the check answered: the primary holds %d copies of the drawer, %d notes, %d diary entries; want 1, 1, 1", dups, notes, diaries)
	}
}

// TestEventSchemaNotAnsweredBacksOff: while the primary does not answer
// the tools/list that names event_list's filters and order (3.11.0:
// writer, order), a non-coordinator's event_ack of an old event in a long
// log is answered as the primary being busy (HTTP 503), not looked up
// under the pre-3.10 names and order, which miss it, and refused as not
// visible (-31003); once the primary answers, the ack is made.
func TestEventSchemaNotAnsweredBacksOff(t *testing.T) {
	t.Parallel()
	u := startFakeAt(t, "3.11.0")
	pass := realpalace.NewProxy(t, u.url)
	var lose atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(body, "method").Str == "tools/list" && lose.Add(-1) >= 0 {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		pass.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	g := newGWAt(t, devices, &upstream{name: "a proxy losing tools/list", url: front.URL + "/mcp", palace: u.palace})
	upCall(t, u.palace, "mempalace_event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@laptop", "body": "old ask"})
	ask := u.palace.Dump().Events[0].ID
	for i := range 600 {
		upCall(t, u.palace, "mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@desk", "to_agent": "opencode@laptop", "body": fmt.Sprint("later ", i)})
	}
	ack := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_event_ack","arguments":{"event_id":%q,"from_agent":"opencode@laptop","status":"applied"}}}`, ask)
	lose.Store(1)
	if status, m := g.post(g.tokens["laptop-7f3a"], ack); status != http.StatusServiceUnavailable {
		t.Errorf("event_list's schema not answered: HTTP %d %v, want 503", status, m)
	}
	if status, m := g.post(g.tokens["laptop-7f3a"], ack); status != http.StatusOK || rpcError(m) != nil {
		t.Errorf("event_list's schema answered: HTTP %d %v, want the ack made", status, m)
	}
}
