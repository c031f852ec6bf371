package edge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// adminThroughGateway is an edge whose primary is the double behind a
// devbox-config gateway that says this device is admin-scoped (its
// deletes are queued for the primary).
func adminThroughGateway(t *testing.T) (*harness, *fakepalace.Palace) {
	t.Helper()
	primary, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "ops-0001", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{primaryURL: url, token: tokens["ops-0001"]})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.Admin })
	return h, primary
}

// primaryDiary is the content of the primary's diary entries with text
// in it.
func primaryDiary(pl *fakepalace.Palace, text string) []string {
	var out []string
	for _, d := range pl.Dump().Drawers {
		if d.Diary && strings.Contains(d.Content, text) {
			out = append(out, d.Content)
		}
	}
	return out
}

// An admin device writes a diary entry, it reaches the primary (whose
// copy has another id: its own timestamp), and the agent deletes the
// entry by the id it was given. The delete must reach the primary's
// copy: afterwards the primary holds no such entry. Before, the delete
// stayed local (or, sent with the local id, was settled "already gone on
// the primary"), and the entry stayed on the primary for every other
// device (outside tester, attack14 02).
func TestADeletedDiaryEntryIsDeletedOnThePrimary(t *testing.T) {
	t.Parallel()
	h, primary := adminThroughGateway(t)
	const text = "diary mapped: the release train leaves on thursdays"
	m, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text})
	id, _ := m["entry_id"].(string)
	if id == "" {
		t.Fatalf("diary_write: %v", m)
	}
	h.drained()
	if n := diaryCopies(primary, text); n != 1 {
		t.Fatalf("the primary holds the entry %d times before the delete, want 1", n)
	}
	d, _ := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if d["success"] != true || !strings.Contains(fmt.Sprint(d["edge"]), "queued") {
		t.Errorf("delete_drawer of the entry: %s, want it deleted and queued for the primary", mustJSON(d))
	}
	h.drained()
	if n := diaryCopies(primary, text); n != 0 {
		t.Errorf("the primary still holds the deleted diary entry (%d copies)", n)
	}
}

// The same for entries deleted in bulk (delete_drawers by the ids the
// agent was given): the delete reaches the primary's copies.
func TestDiaryEntriesDeletedInBulkAreDeletedOnThePrimary(t *testing.T) {
	t.Parallel()
	h, primary := adminThroughGateway(t)
	var ids []any
	for _, s := range []string{"bulk one", "bulk two"} {
		m, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": "diary mapped " + s})
		ids = append(ids, m["entry_id"])
	}
	h.drained()
	if got := primaryDiary(primary, "diary mapped bulk"); len(got) != 2 {
		t.Fatalf("the primary holds %v before the delete", got)
	}
	d, _ := h.call("delete_drawers", map[string]any{"drawer_ids": ids})
	if d["deleted"] != 2.0 {
		t.Errorf("delete_drawers: %s", mustJSON(d))
	}
	h.drained()
	if got := primaryDiary(primary, "diary mapped bulk"); len(got) != 0 {
		t.Errorf("the primary still holds the deleted entries: %v", got)
	}
}

// An edit of a replicated diary entry (update_drawer by the id the agent
// was given) must reach the primary's copy. Before, it was sent naming
// the local id, which the primary does not hold: the gateway refused it
// ("target not visible") and it went dead, the primary keeping the old
// text.
func TestAnEditedDiaryEntryIsEditedOnThePrimary(t *testing.T) {
	t.Parallel()
	h, primary := adminThroughGateway(t)
	const text, edited = "diary mapped: the oncall rota is alphabetical", "diary mapped: the oncall rota is by seniority"
	m, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text})
	id, _ := m["entry_id"].(string)
	h.drained()
	u, _ := h.call("update_drawer", map[string]any{"drawer_id": id, "content": edited})
	if u["success"] != true {
		t.Fatalf("update_drawer of the entry: %s", mustJSON(u))
	}
	h.drained()
	if got := primaryDiary(primary, "diary mapped: the oncall"); len(got) != 1 || got[0] != edited {
		t.Errorf("the primary's copy of the edited entry: %q, want [%q]", got, edited)
	}
	dead, err := h.edge.outbox.List(context.Background(), 10, outbox.Dead)
	if err == nil && len(dead) > 0 {
		t.Errorf("dead ops after the edit: %+v", dead)
	}
}

// The same against real MemPalace 3.11.0 (a real local palace, real serve
// behind a gateway that says this device is admin): a diary entry
// written, sent, deleted by its local id, is gone from the primary too.
func TestRealADeletedDiaryEntryIsDeletedOnThePrimary(t *testing.T) {
	srv := realpalace.New(t).Serve(t, testToken)
	url, tokens, _ := testGatewayServer(t, srv.URL,
		gateway.Device{ID: "ops-0001", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"opencode@edge-test"}})
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: url, token: tokens["ops-0001"], timeout: 30 * time.Second})
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.Admin })
	const text = "real diary mapped: the canary deploy runs at noon"
	m, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text})
	id, _ := m["entry_id"].(string)
	if id == "" {
		t.Fatalf("diary_write: %v", m)
	}
	onPrimary := func() int {
		page := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "opencode", "last_n": 50})
		return strings.Count(fmt.Sprint(page), text)
	}
	waitFor(t, 60*time.Second, "the entry on real serve", func() bool { return onPrimary() == 1 })
	d, _ := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if d["success"] != true {
		t.Fatalf("delete_drawer of the entry: %s", mustJSON(d))
	}
	waitFor(t, 60*time.Second, "the entry gone from real serve", func() bool { return onPrimary() == 0 })
}
