package edge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
)

// A write the local palace never answers (MemPalace stuck on a full disk)
// is given up at the write bound: the agent is answered that it may or
// may not have been applied, and it is queued for the primary, as a write
// given up at a stop. Before, the call hung until the edge stopped or the
// harness gave up on it (11 minutes and more: attack40 F5).
func TestAWriteTheLocalPalaceNeverAnswersIsGivenUpAtTheBound(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, primaryDown: true, writeBound: 300 * time.Millisecond, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_add_drawer"}})
	h.handshake()
	h.ready()
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "never answered"}))
	a := h.await("add", 20*time.Second)
	e, _ := a["error"].(map[string]any)
	if msg := asString(e["message"]); !strings.Contains(msg, "did not answer this write within 300ms") || !strings.Contains(msg, "may or may not have been applied") {
		t.Fatalf("a write the local palace never answered: %v", a)
	}
	st, err := h.edge.outbox.Stats(context.Background())
	if err != nil || st.ByState[outbox.Queued]+st.ByState[outbox.Inflight] != 1 || st.ByState[outbox.Intent] != 0 {
		t.Fatalf("the write given up is not queued for the primary: %v, %v", st.ByState, err)
	}
	// The stuck server is restarted: a fresh one answers what follows.
	for deadline := time.Now().Add(10 * time.Second); h.edge.child.Spawns() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the local palace that did not answer a write was not restarted (%d starts)", h.edge.child.Spawns())
		}
	}
	h.send(toolCall("stats", "mempalace_kg_stats", map[string]any{}))
	if a := h.await("stats", 20*time.Second); a["error"] != nil {
		t.Fatalf("a read after the restart: %v", a)
	}
	h.releaseLocalHold()
}

// The bound is not counted while the local palace is at a mine (a job of
// minutes): a write behind it waits for it, however long, and is answered.
func TestAWriteBehindAMineIsNotGivenUpAtTheBound(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, primaryDown: true, writeBound: 100 * time.Millisecond, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_mine"}})
	h.handshake()
	h.ready()
	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine")
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written during a mine"}))
	time.Sleep(500 * time.Millisecond) // five bounds: a write bounded during the mine would be given up by now
	h.releaseLocalHold()
	if a := h.await("add", 20*time.Second); answerText(a)["success"] != true {
		t.Fatalf("a write behind a mine: %v", a)
	}
}
