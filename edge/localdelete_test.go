package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// privateWing keeps the wing "private" in the local palace only: what the
// local palace loses, the device loses.
const privateWing = `{"version":1,"wings":{"private":{"replicate":"local"}}}`

// keptUnapplied puts in palace's outbox a delete kept without the local
// palace's answer, as an edge given up at the stop grace leaves it: its
// tombstones and its local call (tool, args), noted unapplied.
func keptUnapplied(t *testing.T, palace, tool string, args map[string]any, marks ...outbox.Tombstone) {
	t.Helper()
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	call, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := ob.IntendDelete(ctx, marks, nil, nil, "", call)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.DeleteUnapplied(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// resendSettled waits until h's edge has sent its kept deletes to the
// local palace and kept or dropped their notes.
func (h *harness) resendSettled() {
	h.t.Helper()
	h.eventually("the kept delete sent to the local palace again", func() bool {
		if strings.Contains(h.logs.String(), "was not applied there now") {
			return true
		}
		us, err := h.edge.outbox.Unapplied(context.Background())
		return err == nil && len(us) == 0
	})
}

// keptDeleteFailedLocally writes content to the local-only wing private
// of a new palace, keeps a delete of it unapplied (as a stop leaves it),
// and has the next edge's re-send of the delete fail at the local palace;
// then, if not nil, runs then on that edge: the palace and the drawer's id.
func keptDeleteFailedLocally(t *testing.T, content string, then func(t *testing.T, h *harness)) (palace, id string) {
	t.Helper()
	palace = filepath.Join(t.TempDir(), "palace")
	id = DrawerIDFor("private", "ops", content)
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, policy: privateWing})
		h.call("add_drawer", map[string]any{"wing": "private", "room": "ops", "content": content})
	})
	holdsDrawers(t, palace) // its error is the palace's, not "no drawers yet"
	keptUnapplied(t, palace, "mempalace_delete_drawer", map[string]any{"drawer_id": id}, outbox.Tombstone{Kind: outbox.TombDrawer, Key: id})
	t.Run("the local palace fails the delete sent again", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, childEnv: []string{"FAKEPALACE_FAIL_ON=mempalace_delete_drawer"}})
		h.resendSettled()
		if then != nil {
			then(t, h)
		}
	})
	return palace, id
}

// A delete given up at a stop is sent to the local palace again by the
// next edge. When the local palace fails it then (its store raised: a
// locked palace answers {"success": false, "error": ...}), the delete was
// not applied: it must be tried again, not forgotten. Before, any answer
// dropped its note, and the drawer the user deleted stayed in this
// device's palace for good (here a local-only wing: get_drawer finds it).
func TestKeptDeleteOutlivesALocalFailure(t *testing.T) {
	t.Parallel()
	palace, id := keptDeleteFailedLocally(t, "the old vpn password, deleted at a container stop", nil)
	h := start(t, harnessOpts{palace: palace})
	h.eventually("the delete applied to the local palace by the edge after", func() bool { return h.localState().Drawers[id] == nil })
	if m, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != nil {
		t.Errorf("get_drawer finds the drawer the user deleted: %v", m)
	}
}

// A delete kept at a stop, not yet applied by the local palace (its first
// re-send failed), is superseded by the user writing the same drawer
// again: MemPalace's drawer ids are its wing, room and content, so the
// re-added drawer has the deleted one's id. The next edge must not send
// the old delete over it. Before, it did: the drawer the user wrote again
// was gone from this device (a local-only wing: lost).
func TestKeptDeleteSupersededByARewrite(t *testing.T) {
	t.Parallel()
	const content = "the build cache lives on the second disk"
	palace, id := keptDeleteFailedLocally(t, content, func(t *testing.T, h *harness) {
		if st := h.localState(); st.Drawers[DrawerIDFor("private", "ops", content)] == nil {
			t.Fatal("the test needs a local palace that did not apply the delete")
		}
		if m, _ := h.call("add_drawer", map[string]any{"wing": "private", "room": "ops", "content": content}); m["success"] != true {
			t.Fatalf("add_drawer: %v", m)
		}
	})
	h := start(t, harnessOpts{palace: palace})
	h.resendSettled()
	if m, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != content {
		t.Errorf("get_drawer does not find the drawer written again after the delete: %v", m)
	}
}

// A diary entry deleted just before the agent's input ends (stdin closed
// while the local palace is still at the delete, past the write grace):
// the edge gives the delete up and keeps it, and the next edge deletes
// the entry from the local palace, so diary_read no longer shows it there.
func TestDiaryDeleteGivenUpAtEOFAppliedByTheNextEdge(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	const entry = "reviewed the incident; the root password was in the log"
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryDown: true})
		if m, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": entry}); m["success"] != true {
			t.Fatalf("diary_write: %v", m)
		}
	})
	var id string
	st, err := fakepalace.ReadDump(palace)
	if err != nil {
		t.Fatal(err)
	}
	for k, d := range st.Drawers {
		if d.Diary && d.Content == entry {
			id = k
		}
	}
	if id == "" {
		t.Fatal("the diary entry is not in the local palace")
	}
	t.Run("deleted as the input ends", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, raw: true, primaryDown: true, writeGrace: 300 * time.Millisecond, timeout: 500 * time.Millisecond, childExitWait: 300 * time.Millisecond,
			childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_delete_drawer=10000", "FAKEPALACE_TRACE=1"}})
		h.handshake()
		h.send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_delete_drawer", "arguments": map[string]any{"drawer_id": id}}})
		h.atTheLocalPalace("mempalace_delete_drawer")
		h.in.(io.Closer).Close()
		<-h.done
		if us, err := keptDeletes(palace); err != nil || us != 1 {
			t.Fatalf("kept deletes after the input ended: %d %v, want the diary entry's\nlog:\n%s", us, err, h.logs.String())
		}
	})
	h := start(t, harnessOpts{palace: palace, primaryDown: true})
	h.eventually("the diary entry deleted from the local palace", func() bool { return h.localState().Drawers[id] == nil })
	m, _ := h.call("diary_read", map[string]any{"agent_name": "opencode"})
	if s := mustJSON(m["entries"]); strings.Contains(s, "root password") {
		t.Errorf("diary_read shows the deleted entry: %s", s)
	}
}

// keptDeletes counts the deletes in palace's outbox kept without the local
// palace's answer.
func keptDeletes(palace string) (int, error) {
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		return 0, err
	}
	defer ob.Close()
	us, err := ob.Unapplied(context.Background())
	return len(us), err
}

// A delete the local palace refuses for good, kept at a stop: the
// agent's delete_drawers waited at the slow local palace when the input
// ended, and before the next start the container came back with an older
// MemPalace (a pin rolled back past 3.11.0, which brought delete_drawers).
// The next edge sends the delete again and MemPalace answers -32601
// "Unknown tool": an answer about the call itself, which no later start
// changes. The note is settled then, with a log line naming the drawer
// and the reason. Before, it stayed, and every edge start sent it again
// and warned, for good.
func TestKeptDeleteRefusedForGoodIsSettled(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	const content = "a note to delete"
	id := DrawerIDFor("private", "ops", content)
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, policy: privateWing})
		h.call("add_drawer", map[string]any{"wing": "private", "room": "ops", "content": content})
	})
	t.Run("deleted as the input ends", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, policy: privateWing, raw: true, writeGrace: 300 * time.Millisecond, timeout: 500 * time.Millisecond, childExitWait: 300 * time.Millisecond,
			childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_delete_drawers=10000", "FAKEPALACE_TRACE=1"}})
		h.handshake()
		h.send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "mempalace_delete_drawers", "arguments": map[string]any{"drawer_ids": []string{id}}}})
		h.atTheLocalPalace("mempalace_delete_drawers")
		h.in.(io.Closer).Close()
		<-h.done
		if n, err := keptDeletes(palace); err != nil || n != 1 {
			t.Fatalf("kept deletes after the input ended: %d %v, want the delete\nlog:\n%s", n, err, h.logs.String())
		}
	})
	for i := range 2 {
		t.Run(fmt.Sprintf("start %d on MemPalace 3.10.0", i+1), func(t *testing.T) {
			h := start(t, harnessOpts{palace: palace, policy: privateWing, child: []string{testbed.Self(t, fakepalace.ProgramName), "--release", "3.10.0"}})
			h.resendSettled()
			if n, err := keptDeletes(palace); err != nil || n != 0 {
				t.Errorf("the delete the local palace refuses for good is still kept (%d, %v): every start sends it again\nlog:\n%s", n, err, h.logs.String())
			}
			if logs := h.logs.String(); i == 0 && (!strings.Contains(logs, id) || !strings.Contains(logs, "Unknown tool: mempalace_delete_drawers")) {
				t.Errorf("the log does not name the drawer %s and the local palace's reason:\n%s", id, logs)
			}
		})
	}
}

// A delete kept without the local palace's answer (the edge killed while
// the local palace was at it) reaches the next edge's local palace before
// any read does: it answers one call at a time, in the order sent, so no
// read there finds the drawer. Here a write is at the local palace as the
// edge starts (the lock a write holds there, taken before it serves), so
// the kept delete's re-send, which waits for no write to be there, comes
// late. Before, the first reads went to the local palace ahead of it: a
// merged search, get_drawer, get_drawers and list_drawers showed the
// drawer the user deleted (CI saw it in TestKilledMidDeleteStaysDeleted).
func TestKeptDeleteSentBeforeTheFirstRead(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	const content = "the wifi password is in the drawer deleted before a kill"
	id := DrawerIDFor("private", "ops", content)
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, policy: privateWing})
		h.call("add_drawer", map[string]any{"wing": "private", "room": "ops", "content": content})
	})
	keptUnapplied(t, palace, "mempalace_delete_drawer", map[string]any{"drawer_id": id}, outbox.Tombstone{Kind: outbox.TombDrawer, Key: id})
	var writing sync.Once
	h := start(t, harnessOpts{palace: palace, beforeServe: func(e *Edge) { e.resending.RLock() }})
	done := func() { writing.Do(h.edge.resending.RUnlock) }
	defer done()
	m, _ := h.call("search", map[string]any{"query": content, "limit": 10})
	if s := mustJSON(m["results"]); strings.Contains(s, id) {
		t.Errorf("the first search after the restart shows the deleted drawer: %s", s)
	}
	if m, _ := h.call("get_drawer", map[string]any{"drawer_id": id}); m["content"] != nil {
		t.Errorf("get_drawer after the restart finds the deleted drawer: %v", m)
	}
	if m, _ := h.call("get_drawers", map[string]any{"drawer_ids": []string{id}}); strings.Contains(mustJSON(m), content) {
		t.Errorf("get_drawers after the restart finds the deleted drawer: %v", m)
	}
	if m, _ := h.call("list_drawers", map[string]any{"wing": "private"}); strings.Contains(mustJSON(m["drawers"]), id) {
		t.Errorf("list_drawers after the restart shows the deleted drawer: %v", m)
	}
	done()
	h.eventually("the kept delete settled by the local palace's answer", func() bool {
		us, err := h.edge.outbox.Unapplied(context.Background())
		return err == nil && len(us) == 0
	})
}
