package edge

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/fakepalace"
)

// localEntryID is the id of the diary entry with text in the local palace
// ("" while it holds none).
func localEntryID(h *harness, text string) string {
	st, err := fakepalace.ReadDump(h.palace)
	if err != nil {
		return ""
	}
	for id, d := range st.Drawers {
		if d.Diary && d.Content == text {
			return id
		}
	}
	return ""
}

// Offline, a diary_write the local palace is slow at is given up (the
// agent cancels it and the write grace passes; a stop gives it up the
// same way), so it is queued without the local entry's id; the local
// palace then writes the entry, and the agent deletes it. The delete must
// take back the unsent write: once the primary is back, the deleted entry
// is not there, and diary_read does not show it. Before, the delete did
// not find the write (its op is older than the entry: it was in the
// outbox as an intent before the local palace wrote it), so it went out
// and the deleted entry showed again in diary_read, on every device.
func TestADiaryEntryWhoseWriteWasGivenUpStaysDeleted(t *testing.T) {
	t.Parallel() // it waits out the local palace, not the CPU
	primary, srv := startPrimary(t)
	srv.Stop()
	const agent, text = "me", "diary given up: the staging password is hunter2"
	h := start(t, harnessOpts{primaryURL: srv.URL(), writeGrace: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_diary_write=1200", "FAKEPALACE_TRACE=1"}})
	// Cancelled once the local palace has the write (its trace says so), not
	// at a fixed 300 ms: at load 8 the local palace was not up by then, the
	// write was never sent, and no entry was ever written.
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() {
		_, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_diary_write", Arguments: map[string]any{"agent_name": agent, "entry": text}})
		called <- err
	}()
	h.eventually("the diary_write at the local palace", func() bool {
		return slices.ContainsFunc(h.childReceived(), func(m traced) bool { return m.Name == "mempalace_diary_write" })
	})
	cancel()
	if err := <-called; err == nil {
		t.Fatal("the cancelled diary_write was answered: the test needs one given up")
	}
	var id string
	h.eventually("the entry in the local palace", func() bool { id = localEntryID(h, text); return id != "" })
	if n := diaryCount(h, agent, text, 50); n != 1 {
		t.Fatalf("diary_read before the delete shows the entry %d times, want 1", n)
	}
	if m, _ := h.call("delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
		t.Fatalf("deleting the entry: %v", m)
	}
	if err := srv.Start(srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.drained()
	if n := diaryCopies(primary, text); n != 0 {
		t.Errorf("the primary holds the deleted entry %d times, want 0 (its unsent diary_write went out)", n)
	}
	if n := diaryCount(h, agent, text, 50); n != 0 {
		t.Errorf("diary_read after the delete shows the entry %d times, want 0", n)
	}
}

// Offline, a diary entry written and then deleted while the local palace
// is slow at the delete, and the edge stopped (SIGTERM) past its grace:
// the delete is kept for the next edge. Its read was the local palace's
// (the entry is this device's), so the unsent diary_write is taken back
// when the delete is kept: once the primary is back, the entry is not
// there, and the next edge's diary_read does not show it.
func TestADiaryEntryDeletedAtAStopNeverReachesThePrimary(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU
	primary, srv := startPrimary(t)
	srv.Stop()
	palace := t.TempDir() + "/palace"
	const agent, text = "me", "diary deleted at a stop: the deploy key"
	var id string
	t.Run("written", func(t *testing.T) {
		h := start(t, harnessOpts{palace: palace, primaryURL: srv.URL()})
		w, _ := h.call("diary_write", map[string]any{"agent_name": agent, "entry": text})
		id, _ = w["entry_id"].(string)
	})
	next := keptAtAStop(t, palace, srv, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	next.eventually("the delete applied to the local palace", func() bool { return localEntryID(next, text) == "" })
	next.drained()
	if n := diaryCopies(primary, text); n != 0 {
		t.Errorf("the primary holds the entry deleted at the stop %d times, want 0", n)
	}
	if n := diaryCount(next, agent, text, 50); n != 0 {
		t.Errorf("diary_read after the stop shows the deleted entry %d times, want 0", n)
	}
}
