package edge

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// The agent cancels a delete_drawer while the local palace is still at
// it: the local palace deletes the drawer anyway, as MemPalace does, so
// the delete must be kept as one made here (a tombstone hiding the
// primary's copy). Before, the edge gave up on the local answer at the
// cancel: the drawer was gone locally and the primary's copy showed in
// merged reads, as if never deleted.
func TestCancelledDeleteTheLocalPalaceAppliesIsKept(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	h := start(t, harnessOpts{raw: true, childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_delete_drawer=800", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	const content = "the deploy key, pasted by mistake"
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": content}))
	if a := h.await("add", 10*time.Second); a["result"] == nil {
		t.Fatalf("add_drawer: %v", a)
	}
	h.eventually("the drawer on the primary", func() bool { return h.primary.Dump().CountContent(content) == 1 })
	id := DrawerIDFor("w", "r", content)
	h.cancelOnceIn(h.childLog, "del", "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	h.eventually("the local palace applied the delete", func() bool {
		st, err := fakepalace.ReadDump(h.palace)
		return err == nil && len(st.Drawers) == 0
	})
	h.eventually("the delete kept as a tombstone", func() bool {
		s, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "")
		if err != nil {
			return false
		}
		defer s.Close()
		ts, _ := s.Tombstones(context.Background())
		for _, x := range ts {
			if x.Kind == outbox.TombDrawer && x.Key == id {
				return true
			}
		}
		return false
	})
}

// A secret edited offline into a drawer already on the primary, then its
// source deleted while the local palace is slow at the delete, and the
// edge stopped (SIGTERM) past its grace: the delete is kept for the next
// edge, and the unsent update_drawer must be taken back with it, as when
// the local palace answers. Before, only an answered delete_by_source
// found the drawers it removed: the kept one left the update queued, and
// once the primary was back every other device read the secret there (on
// this device the source's tombstone hid it).
func TestADeleteBySourceKeptAtAStopCancelsTheUnsentUpdate(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU
	primary, srv := startPrimary(t)
	palace := t.TempDir() + "/palace"
	const note, src = "deploy notes, from the runbook kept at a stop", "/work/runbook-stop.md"
	id := DrawerIDFor("notes", "src", note)
	t.Run("edited offline", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": note, "source_file": src})
		h.eventually("the note on the primary", func() bool { return primary.Dump().Drawers[id] != nil })
		h.drained()
		srv.Stop()
		h.call("update_drawer", map[string]any{"drawer_id": id, "content": note + " password=hunter2"})
	})
	next := keptAtAStop(t, palace, srv, "mempalace_delete_by_source", map[string]any{"source_file": src, "dry_run": false})
	next.eventually("the delete applied to the local palace", func() bool { return next.localState().Drawers[id] == nil })
	next.drained()
	if d := primary.Dump().Drawers[id]; d == nil || strings.Contains(d.Content, "hunter2") {
		t.Fatalf("the primary holds %+v, want the note as it was sent, without the update made before the delete", d)
	}
}

// A mined project has a README.md in many directories, and MemPalace's
// delete_by_source matches the stored source_file exactly: deleting
// /work/a/README.md while the local palace is slow at it, the edge
// stopped past its grace, leaves /work/b/README.md's drawer in the local
// palace. Its update edited offline must still reach the primary once it
// is back, and the drawer must not be tombstoned. Before, a delete_by_source
// kept without the local answer took back the unsent update of every
// drawer of the same base name and tombstoned it: the edit was lost for
// every other device.
func TestADeleteBySourceKeptAtAStopKeepsTheUpdateOfADrawerItLeaves(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU
	primary, srv := startPrimary(t)
	palace := t.TempDir() + "/palace"
	const gone, kept = "the a readme, deleted at a stop", "the b readme, edited offline"
	goneID, keptID := DrawerIDFor("notes", "src", gone), DrawerIDFor("notes", "src", kept)
	t.Run("edited offline", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": gone, "source_file": "/work/a/README.md"})
		h.call("add_drawer", map[string]any{"wing": "notes", "room": "src", "content": kept, "source_file": "/work/b/README.md"})
		h.eventually("both on the primary", func() bool { d := primary.Dump(); return d.Drawers[goneID] != nil && d.Drawers[keptID] != nil })
		h.drained()
		srv.Stop()
		h.call("update_drawer", map[string]any{"drawer_id": keptID, "content": kept + ", with the new install steps"})
	})
	next := keptAtAStop(t, palace, srv, "mempalace_delete_by_source", map[string]any{"source_file": "/work/a/README.md", "dry_run": false})
	next.eventually("the delete applied to the local palace", func() bool { return next.localState().Drawers[goneID] == nil })
	next.eventually("the update of the drawer it leaves on the primary", func() bool {
		d := primary.Dump().Drawers[keptID]
		return d != nil && strings.Contains(d.Content, "new install steps")
	})
	ts, err := next.edge.outbox.Tombstones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if x.Kind == outbox.TombDrawer && x.Key == keptID {
			t.Errorf("the drawer the delete left is tombstoned (hidden in merged reads): %+v", x)
		}
	}
}

// keptAtAStop sends a delete to an edge on palace whose local palace takes
// 20 s at it, stops that edge once the local palace has the call (the
// delete kept for the next edge, srv down till then), starts the primary
// again, and returns the next edge.
func keptAtAStop(t *testing.T, palace string, srv *fakepalace.HTTPServer, tool string, args map[string]any) *harness {
	t.Helper()
	h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL(), raw: true, stopGrace: time.Second, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=" + tool + "=20000", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	h.send(toolCall(5, tool, args))
	h.atTheLocalPalace(tool)
	h.stop()
	<-h.done
	if err := srv.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	return start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
}

// An agent cancels a delete_by_source of /work/a/README.md that its local
// palace is slow at, past the write grace: the delete is kept without the
// local answer, and it holds the unsent update of every drawer of a
// README.md, /work/b/README.md's too. The local palace applies it a moment
// later. The edit of the drawer it left must reach the primary in the same
// session. Before, only the next edge start sent the kept delete to the
// local palace again and settled it: the edit waited, unsent, for as long
// as the edge ran (days, on a devbox).
func TestADeleteBySourceKeptByACancelReleasesTheUpdateOfADrawerItLeaves(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU
	h := start(t, harnessOpts{raw: true, writeGrace: 300 * time.Millisecond, childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_delete_by_source=1500", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	const gone, kept = "the a readme, deleted by a cancelled call", "the b readme, edited offline"
	goneID, keptID := DrawerIDFor("notes", "src", gone), DrawerIDFor("notes", "src", kept)
	h.send(toolCall("a", "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "src", "content": gone, "source_file": "/work/a/README.md"}))
	h.send(toolCall("b", "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "src", "content": kept, "source_file": "/work/b/README.md"}))
	for _, id := range []string{"a", "b"} {
		if a := h.await(id, 10*time.Second); a["result"] == nil {
			t.Fatalf("add_drawer %s: %v", id, a)
		}
	}
	h.eventually("both on the primary", func() bool { d := h.primary.Dump(); return d.Drawers[goneID] != nil && d.Drawers[keptID] != nil })
	h.drained()
	h.srv.Stop()
	h.send(toolCall("u", "mempalace_update_drawer", map[string]any{"drawer_id": keptID, "content": kept + ", with the new install steps"}))
	if a := h.await("u", 10*time.Second); a["result"] == nil {
		t.Fatalf("update_drawer: %v", a)
	}
	h.cancelOnceIn(h.childLog, "del", "mempalace_delete_by_source", map[string]any{"source_file": "/work/a/README.md", "dry_run": false})
	h.eventually("the delete applied to the local palace", func() bool { return h.localState().Drawers[goneID] == nil })
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.eventually("the update of the drawer the delete left on the primary", func() bool {
		d := h.primary.Dump().Drawers[keptID]
		return d != nil && strings.Contains(d.Content, "new install steps")
	})
}

// A delete_by_source kept by a cancel is sent to the local palace again
// later in the session; the agent files the source again meanwhile, the
// local palace slow at it. The delete sent again must never land after
// the new write: the new drawer stays in this device's palace. Before,
// the retry read the kept delete while the write was at the local palace
// (its lift, which drops the kept delete, comes with the answer) and sent
// it behind the write: the local palace deleted what the agent had just
// filed (outside tester, attack8 11, the same race at an edge's start).
func TestAKeptDeleteSentAgainNeverLandsAfterARewrite(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU
	// The local palace answers one call at a time: the delete given up at
	// 700 ms is kept then, and sent again 700 ms later, while the write
	// sent meanwhile waits behind the first delete.
	h := start(t, harnessOpts{raw: true, writeGrace: 700 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_delete_by_source=1500,mempalace_add_drawer=500", "FAKEPALACE_TRACE=1"}})
	h.handshake()
	h.ready()
	const src = "/work/k/notes.md"
	old, refiled := "the notes before the delete", "the notes filed again"
	h.send(toolCall("old", "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "src", "content": old, "source_file": src}))
	if a := h.await("old", 10*time.Second); a["result"] == nil {
		t.Fatalf("add_drawer: %v", a)
	}
	h.cancelOnceIn(h.childLog, "del", "mempalace_delete_by_source", map[string]any{"source_file": src, "dry_run": false})
	h.eventually("the delete kept without its answer", func() bool {
		return strings.Contains(h.logs.String(), "did not answer a delete within the write grace")
	})
	h.send(toolCall("re", "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "src", "content": refiled, "source_file": src}))
	if a := h.await("re", 10*time.Second); a["result"] == nil {
		t.Fatalf("add_drawer filing the source again: %v", a)
	}
	h.eventually("no kept delete left", func() bool {
		us, err := h.edge.outbox.Unapplied(context.Background())
		return err == nil && len(us) == 0
	})
	// The local palace answers in order: once it answers this, a delete
	// sent behind the write has been applied.
	id := DrawerIDFor("notes", "src", refiled)
	h.send(toolCall("after", "mempalace_get_drawer", map[string]any{"drawer_id": id}))
	if a := h.await("after", 10*time.Second); a == nil {
		t.Fatal("get_drawer: no answer")
	}
	if h.localState().Drawers[id] == nil {
		t.Fatalf("the drawer filed again is gone from the local palace; the double received: %v", h.childReceived())
	}
}
