package edge

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An ack that died in the outbox (the primary refused it as written: a
// topic with a line break) answers nothing: the ask it named is owed
// again, in mempalace_mailbox and at the next session start, each saying
// that the reply died and where to see it. Before, the dead ack counted
// as sent: `devbox-config mailbox` listed the ask as owed while the agent
// was never told it again (outside tester, attack70 F4).
func TestADeadReplyLeavesItsAskOwed(t *testing.T) {
	t.Parallel()
	palace := t.TempDir() + "/palace"
	h := start(t, harnessOpts{palace: palace, wakeWait: 10 * time.Second})
	ask := h.onPrimary("event_append", map[string]any{"type": "task.request", "stream": "review", "room": "r", "from_agent": "pi@laptop", "to_agent": "opencode@edge-test", "status": "open", "body": "tag v2"})
	id, _ := ask["event"].(map[string]any)["id"].(string)
	h.srv.Stop()
	h.eventually("the edge sees the primary down", func() bool { h.call("kg_stats", nil); return !h.edge.remote.Up() })
	if m, res := h.call("event_ack", map[string]any{"event_id": id, "from_agent": "opencode@edge-test", "status": "applied", "topic": "bad\ntopic"}); res.IsError || m["queued"] != true {
		t.Fatalf("event_ack with the primary down: %s", mustJSON(m))
	}
	if err := h.srv.Start(h.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	h.eventually("the ack dead", func() bool {
		h.edge.outbox.ClearBackoff(context.Background())
		h.edge.outbox.Kick()
		return len(h.deadOps()) == 1
	})
	m, _ := h.call("mailbox", map[string]any{})
	if got := mustJSON(m); m["count"] != 1.0 || !strings.Contains(got, id) || !strings.Contains(got, "died in this devbox's outbox") || !strings.Contains(got, "devbox-config edge outbox list") {
		t.Errorf("mempalace_mailbox after the ack died: %s", got)
	}
	h.s.Close()
	<-h.done
	next := start(t, harnessOpts{palace: palace, primaryURL: h.srv.URL(), wakeWait: 10 * time.Second})
	if in := instructionsOf(next); !strings.Contains(in, id) || !strings.Contains(in, "[your reply died: devbox-config edge outbox list]") {
		t.Errorf("the next session start after the ack died:\n%s", in)
	}
}
