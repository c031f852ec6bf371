package edge

import (
	"strings"
	"testing"
	"time"
)

// With the primary down and no ask owed as last read, the session start
// sends the agent to mempalace_mailbox, which answers its error with
// that (empty) view beside it, as docs/devbox.md promises: its time, no
// asks. Before, the error came alone (attack97 F1): the agent told to
// call it learned nothing.
func TestAnEmptyKeptViewIsAnsweredBesideTheMailboxsError(t *testing.T) {
	t.Parallel()
	_, srv := memPrimary(t)
	h := start(t, harnessOpts{primaryURL: srv.URL(), wakeWait: 10 * time.Second})
	<-h.edge.wk.first // the log read: nothing owed, kept
	h.s.Close()
	<-h.done
	h2 := start(t, harnessOpts{palace: h.palace, primaryDown: true})
	if in := instructionsOf(h2); !strings.Contains(in, "owed no ask") || !strings.Contains(in, "call mempalace_mailbox") {
		t.Fatalf("the session start with the primary down does not send the agent to the mailbox:\n%s", in)
	}
	m, res := h2.call("mailbox", map[string]any{})
	edge, _ := m["edge"].(map[string]any)
	kept, _ := edge["kept_view"].(map[string]any)
	if !res.IsError || kept == nil {
		t.Fatalf("offline, the mailbox's answer has no kept view beside its error: %v", m)
	}
	if asks, ok := kept["asks"].([]any); !ok || len(asks) != 0 || kept["as_of"] == nil {
		t.Errorf("the kept view is not the empty one kept, with its time: %v", kept)
	}
}
