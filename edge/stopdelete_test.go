package edge

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// slowAdd is o for a raw edge whose local palace takes 20 s over each
// add_drawer (its calls traced), with a stop grace of 1 s.
func slowAdd(o harnessOpts) harnessOpts {
	o.raw, o.stopGrace, o.timeout, o.childExitWait = true, time.Second, 30*time.Second, 200*time.Millisecond
	o.childEnv = []string{"FAKEPALACE_LATENCY_MS=mempalace_add_drawer=20000", "FAKEPALACE_TRACE=1"}
	return o
}

// stopBehindASlowAdd sends a slowAdd edge an add_drawer and, once its
// local palace has the add, the call tool(args) (id 5), which waits
// behind it; then stops the edge: the answer to the call.
func stopBehindASlowAdd(t *testing.T, h *harness, tool string, args map[string]any) map[string]any {
	t.Helper()
	h.send(toolCall(4, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "a slow add"}))
	waitFor(t, 10*time.Second, "the add at the local palace", func() bool {
		return slices.ContainsFunc(h.childReceived(), func(m traced) bool { return m.Name == "mempalace_add_drawer" })
	})
	h.send(toolCall(5, tool, args))
	time.Sleep(300 * time.Millisecond) // the call waits behind the add
	h.stop()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve did not return 20s after its context ended\n%s", h.logs)
	}
	return h.await("5", time.Second)
}

// SIGTERM while an admin device's delete_drawer waits in line behind a
// slow add_drawer at the local palace: the delete was never sent, so it is
// answered NOT applied, and nothing of it is kept or hidden: the drawer
// stays on the primary and in this device's palace, and the agent is told
// to ask again once the edge is back. (Before the agent's calls kept their
// order, the delete was read and kept at the stop instead; earlier still,
// nothing was kept while the answer said "may or may not have been
// applied", outside tester, attack4 04: the answer and the palaces must
// agree.)
func TestAStopAnswersADeleteWaitingBehindASlowAddAsNotApplied(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	const content = "an admin deletes this while a slow add holds the local palace"
	primary, url, token, palace, id := deleteFront(t, true, content)
	h := start(t, slowAdd(harnessOpts{palace: palace, primaryURL: url, token: token}))
	h.handshake()
	h.ready()
	waitFor(t, 10*time.Second, "the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	a := stopBehindASlowAdd(t, h, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	if e, _ := a["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "NOT applied") {
		t.Errorf("the delete waiting in line at the stop is answered %v, want \"NOT applied\"", a)
	}
	next := start(t, harnessOpts{palace: palace, primaryURL: url, token: token})
	next.drained()
	if primary.Dump().Drawers[id] == nil {
		t.Error("the delete answered NOT applied removed the drawer from the primary")
	}
	if m, _ := next.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != content {
		t.Errorf("get_drawer after the stop does not find the drawer the delete, NOT applied, left: %v", m)
	}
}

// SIGTERM while an update_drawer waits behind a slow add_drawer at the
// local palace, still looking up its drawer's wing there (the policy's
// word on it): it is not sent anywhere, so the agent must be told it was
// not applied and may ask again, not the stop's "may or may not have been
// applied" that a write given up at the local palace gets.
func TestAStopAnswersAnUpdateWaitingBehindASlowAddAsNotApplied(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, slowAdd(harnessOpts{}))
	h.handshake()
	h.ready()
	a := stopBehindASlowAdd(t, h, "mempalace_update_drawer", map[string]any{"drawer_id": "drawer_shared_ops_0123456789abcdef01234567", "content": "an edit at a stop"})
	if e, _ := a["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "NOT applied") {
		t.Errorf("an update never sent to the local palace at a stop is answered %v, want \"NOT applied\"", a)
	}
	if h.primary.Calls("mempalace_update_drawer") != 0 {
		t.Error("the update answered as not applied reached the primary")
	}
}

// An admin device deletes a drawer only the primary holds (another device
// wrote it; this device's palace never had it): the delete is queued and
// done on the primary, so the answer must say so, not the local palace's
// success false "Drawer not found" (outside tester, attack4 06).
func TestAnAdminDeleteOfAPrimaryOnlyDrawerSaysItIsDeletedThere(t *testing.T) {
	t.Parallel()
	const content = "a drawer only the primary holds, deleted by an admin"
	primary, url, token, _, id := deleteFront(t, true, content)
	palace := filepath.Join(t.TempDir(), "palace")
	os.MkdirAll(palace, 0o700)
	holdsDrawers(t, palace)
	h := start(t, harnessOpts{palace: palace, primaryURL: url, token: token})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	m, res := h.call("delete_drawer", map[string]any{"drawer_id": id})
	if m["success"] != true || res.IsError || !strings.Contains(fmt.Sprint(m["message"]), "primary") {
		t.Errorf("an admin's delete of a drawer only the primary holds is answered %s, want success saying it is deleted on the primary", mustJSON(m))
	}
	h.eventually("the delete on the primary", func() bool { return primary.Dump().Drawers[id] == nil })
}

// SIGTERM while pipelined writes wait in line behind a slow one at the
// local palace: every write still waiting is answered NOT applied and is
// applied nowhere, so the local palace and the primary cannot disagree on
// them. Before, the stop let them all go at once, in no order: kg_invalidate
// could reach the local palace before its kg_add and the primary after it
// (an outside tester, attack14 01: 4 of 4 runs).
func TestAStopAnswersTheWritesWaitingInLineAsNotApplied(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, slowAdd(harnessOpts{}))
	h.handshake()
	h.ready()
	h.send(toolCall(4, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "ops", "content": "a slow add"}))
	waitFor(t, 10*time.Second, "the add at the local palace", func() bool {
		return slices.ContainsFunc(h.childReceived(), func(m traced) bool { return m.Name == "mempalace_add_drawer" })
	})
	const n = 4
	for i := range n {
		s := fmt.Sprintf("service-%d", i)
		h.send(toolCall(fmt.Sprintf("add%d", i), "mempalace_kg_add", map[string]any{"subject": s, "predicate": "runs_on", "object": "node-a"}))
		h.send(toolCall(fmt.Sprintf("inv%d", i), "mempalace_kg_invalidate", map[string]any{"subject": s, "predicate": "runs_on", "object": "node-a"}))
	}
	time.Sleep(300 * time.Millisecond) // they wait in line behind the add
	h.stop()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve did not return 20s after its context ended\n%s", h.logs)
	}
	for i := range n {
		for _, id := range []string{fmt.Sprintf("add%d", i), fmt.Sprintf("inv%d", i)} {
			a := h.await(id, time.Second)
			if e, _ := a["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "NOT applied") {
				t.Errorf("%s, waiting in line at the stop, is answered %v, want \"NOT applied\"", id, a)
			}
		}
	}
	if ts := h.localState().Triples; len(ts) != 0 {
		t.Errorf("the local palace holds %d facts of writes answered NOT applied", len(ts))
	}
	if h.primary.Calls("mempalace_kg_add")+h.primary.Calls("mempalace_kg_invalidate") != 0 {
		t.Error("writes answered NOT applied reached the primary")
	}
}
