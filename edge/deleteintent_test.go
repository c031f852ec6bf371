package edge

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/palacefiles"
	"github.com/joakimp/devbox-config/testbed"
)

// deleteFront is a primary with a drawer this device wrote (on both
// palaces), behind a gateway that says the device is admin (or not): the
// primary, the URL and token the edge uses, the local palace, the drawer.
func deleteFront(t *testing.T, admin bool, content string) (*fakepalace.Palace, string, string, string, string) {
	t.Helper()
	primary, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "desk-9b21", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: admin, Agents: []string{"opencode@edge-test"}})
	token, palace := tokens["desk-9b21"], filepath.Join(t.TempDir(), "palace")
	id := DrawerIDFor("shared", "ops", content)
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: url, token: token})
		h.call("add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": content})
		h.eventually("the drawer on the primary", func() bool { return primary.Dump().Drawers[id] != nil })
		h.drained()
	})
	return primary, url, token, palace, id
}

// A container stop (SIGTERM, then docker's SIGKILL 10 s later) kills the
// edge while its local palace is still at a delete (a slow palace); the
// local palace goes with it (child_linux.go), the delete applied or not.
// The next edge on the same palace must
// keep the user's delete: merged reads no longer show the primary's copy
// of the drawer, and on an admin device the delete reaches the primary.
// Before, the edge kept the delete (its tombstone, its op) only once the
// local palace answered, so the kill undid the delete for the user (the
// primary's copy came back in every merged read) and for an admin the
// primary never got it.
func TestKilledMidDeleteStaysDeleted(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)
	for _, admin := range []bool{false, true} {
		t.Run(map[bool]string{false: "not admin", true: "admin"}[admin], func(t *testing.T) {
			const content = "the staging password is hunter2, deleted, then a kill"
			primary, url, token, palace, id := deleteFront(t, admin, content)
			p := deleteAtTheLocalPalace(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace,
				"MEMPALACE_REMOTE_URL=" + url, "MEMPALACE_REMOTE_TOKEN=" + token}, "staging password", id, 1500)
			local := p.localPalace(t)
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.exited <- <-p.exited
			p.ended(t, local)
			h := start(t, harnessOpts{palace: palace, primaryURL: url, token: token})
			if admin {
				h.eventually("the delete on the primary", func() bool { return primary.Dump().Drawers[id] == nil })
				h.drained()
				h.eventually("the tombstone gone with the landed delete", func() bool {
					ts, err := h.edge.outbox.Tombstones(context.Background())
					return err == nil && len(ts) == 0
				})
			} else if primary.Dump().Drawers[id] == nil {
				t.Fatal("a non-admin device's delete reached the primary")
			}
			m, _ := h.call("search", map[string]any{"query": content, "limit": 10})
			if s := mustJSON(m["results"]); strings.Contains(s, id) {
				t.Errorf("a merged search after the kill shows the deleted drawer: %s", s)
			}
			if m, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != nil {
				t.Errorf("get_drawer after the kill finds the deleted drawer: %v", m)
			}
		})
	}
}

// A delete the local palace fails at (here it exits at the call) deletes
// nothing: on an admin device it leaves no tombstone (merged reads would
// hide the primary's copy) and nothing is sent to the primary.
func TestFailedLocalDeleteKeepsNothing(t *testing.T) {
	t.Parallel()
	const content = "a drawer a failed delete leaves alone"
	primary, url, token, palace, id := deleteFront(t, true, content)
	holdsDrawers(t, palace)
	h := start(t, harnessOpts{palace: palace, primaryURL: url, token: token, childEnv: []string{"FAKEPALACE_CRASH_ON=mempalace_delete_drawer"}})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	if _, res := h.call("delete_drawer", map[string]any{"drawer_id": id}); !res.IsError {
		t.Fatalf("a delete the local palace exited at was taken: %s", mustJSON(res.Content))
	}
	ts, err := h.edge.outbox.Tombstones(context.Background())
	if err != nil || len(ts) != 0 {
		t.Errorf("tombstones after a failed delete: %+v %v", ts, err)
	}
	ops, err := h.edge.outbox.List(context.Background(), 100, outbox.Queued, outbox.Inflight, outbox.Dead, outbox.InDoubt, outbox.Held, outbox.Intent)
	if err != nil || len(ops) != 0 {
		t.Errorf("the outbox after a failed delete: %+v %v", ops, err)
	}
	if primary.Dump().Drawers[id] == nil || primary.Calls("mempalace_delete_drawer") != 0 {
		t.Error("a delete the local palace failed at reached the primary")
	}
}

// holdsDrawers gives the double's palace the Chroma file a real palace
// that holds drawers has (palacefiles.Empty): a local error is then the
// palace's, not "no drawers yet".
func holdsDrawers(t *testing.T, palace string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(palace, palacefiles.ChromaFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE collections(id TEXT); INSERT INTO collections VALUES('mempalace_drawers')`); err != nil {
		t.Fatal(err)
	}
}

// A container stop (SIGTERM) while an admin device's local palace is
// still at a delete (a slow palace, behind a slow add): past the stop
// grace the edge gives the delete up, keeps it (tombstone, queued for the
// primary), and stops its local palace, which never applied it. The next
// edge must apply it there: the delete lands on the primary and its
// tombstone goes, so a local copy left behind would show again in this
// device's list_drawers, get_drawer and search, in every later session.
func TestStoppedMidDeleteDeletesLocally(t *testing.T) {
	testbed.Integration(t, "builds and runs the devbox-config binary")
	child := testbed.Self(t, fakepalace.ProgramName)
	const content = "the release key is in the drawer an admin deleted at a stop"
	primary, url, token, palace, id := deleteFront(t, true, content)
	p := deleteAtTheLocalPalace(t, []string{"MEMPALACE_EDGE_CHILD=" + child, "MEMPALACE_PALACE_PATH=" + palace,
		"MEMPALACE_REMOTE_URL=" + url, "MEMPALACE_REMOTE_TOKEN=" + token}, "release key", id, 20000)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(15 * time.Second):
		t.Fatalf("the edge did not stop\nstderr:\n%s", p.errOut)
	}
	if st, _ := fakepalace.ReadDump(palace); st.Drawers[id] == nil {
		t.Fatalf("the stopped local palace applied the delete: the test needs one that did not\nstderr:\n%s", p.errOut)
	}
	h := start(t, harnessOpts{palace: palace, primaryURL: url, token: token})
	h.eventually("the delete on the primary", func() bool { return primary.Dump().Drawers[id] == nil })
	h.drained()
	h.eventually("the delete applied to the local palace", func() bool {
		st, _ := fakepalace.ReadDump(palace)
		return st.Drawers[id] == nil
	})
	m, _ := h.call("list_drawers", map[string]any{"wing": "shared", "limit": 100})
	if s := mustJSON(m["drawers"]); strings.Contains(s, id) {
		t.Errorf("list_drawers after the stop shows the deleted drawer: %s", s)
	}
	if m, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != nil {
		t.Errorf("get_drawer after the stop finds the deleted drawer: %v", m)
	}
	m, _ = h.call("search", map[string]any{"query": content, "limit": 10})
	if s := mustJSON(m["results"]); strings.Contains(s, id) {
		t.Errorf("search after the stop shows the deleted drawer: %s", s)
	}
}

// deleteAtTheLocalPalace starts an edge process with env whose local
// palace takes latencyMs over a delete_drawer, has it search for query (a
// merged read: the edge has heard the gateway's word on the device), then
// sends the delete of id and returns while it is at the local palace.
func deleteAtTheLocalPalace(t *testing.T, env []string, query, id string, latencyMs int) *heldEdge {
	t.Helper()
	p := startHeld(t, append(env, "MEMPALACE_EDGE_TIMEOUT=30s", "FAKEPALACE_TRACE=1", fmt.Sprintf("FAKEPALACE_LATENCY_MS=mempalace_delete_drawer=%d", latencyMs)))
	p.send(t, pipedInitialize)
	if a := p.await("1", 20*time.Second); a["result"] == nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", a, p.errOut)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"`+query+`"}}}`+"\n")
	if a := p.await("2", 20*time.Second); a["result"] == nil {
		t.Fatalf("search: %v\nstderr:\n%s", a, p.errOut)
	}
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"`+id+`"}}}`+"\n")
	p.atTheLocalPalace(t, "mempalace_delete_drawer")
	return p
}
