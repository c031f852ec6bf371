package edge

import (
	"strings"
	"testing"
)

// A reply the primary refuses as written (a status MemPalace does not
// know) answers nothing, so the mailbox still owes the ask, and holds
// nothing back: the reply the agent then writes anew, corrected, as the
// error tells it, is sent, and the asker is answered.
// Before, the dead reply held the corrected one (the same correlation_id)
// behind it until an operator dropped it, while the agent was told
// "queued" and its wake-up counted the ask answered (outside tester
// attack51 N1).
func TestAReplyRefusedAsWrittenHoldsBackNotItsCorrection(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	ask := h.onPrimary("event_append", map[string]any{"type": "task.request", "stream": "s", "room": "rev", "from_agent": "claude@alice", "to_agent": "opencode@edge-test", "status": "open", "body": "review 7"})
	askID, _ := ask["event"].(map[string]any)["id"].(string)
	reply := func(status string) map[string]any {
		return map[string]any{"type": "reply", "stream": "s", "room": "rev", "from_agent": "opencode@edge-test", "to_agent": "claude@alice", "correlation_id": askID, "status": status, "body": "reviewed 7"}
	}
	if _, res := h.call("event_append", reply("done")); !res.IsError || !strings.Contains(refusalText(res), "refused as written") {
		t.Fatalf("the first reply: %s", refusalText(res))
	}
	// Refused, it answers nothing: the ask is still owed.
	if m, _ := h.call("mailbox", map[string]any{}); m["count"] != 1.0 {
		t.Errorf("the mailbox after the refused reply: %s", mustJSON(m))
	}
	m, res := h.call("event_append", reply("applied"))
	if res.IsError || m["queued"] == true {
		t.Fatalf("the corrected reply is not on the primary: %s", mustJSON(m))
	}
	replies := h.onPrimary("event_list", map[string]any{"to_agent": "claude@alice"})
	if got := mustJSON(replies); !strings.Contains(got, `"correlation_id":"`+askID+`"`) || !strings.Contains(got, `"status":"applied"`) {
		t.Errorf("the asker's events hold no answer to %s: %s", askID, got)
	}
}
