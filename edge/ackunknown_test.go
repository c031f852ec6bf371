package edge

import (
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// An event_ack of an id that names no event the device sees (a typo) is
// refused for good at its first answer: the agent is told the id is
// unknown to this device and to call mempalace_mailbox for the ids it
// owes, the op is dead after one send, and the dead write's note says the
// same, not that a drawer was deleted. Through a gateway (which
// answers a missing event and a hidden one alike, "not visible") and
// against a bare primary ("not found"). Before, it stayed queued with
// advice that a grant lets it through, was sent five times, then dead
// (outside tester, attack45 F5).
func TestAnAckOfAnUnknownEventIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	url, tokens := wakeGateway(t, nil)
	_, bare := startPrimary(t)
	ackUnknownRefusedAtOnce(t, "through a gateway", harnessOpts{primaryURL: url, token: tokens["desk-9b21"], wakeWait: 10 * time.Second})
	ackUnknownRefusedAtOnce(t, "a bare primary", harnessOpts{primaryURL: bare.URL()})
}

// The same against real MemPalace 3.11.0 alone (its own words: "event
// '<id>' not found").
func TestRealAnAckOfAnUnknownEventIsRefusedAtOnce(t *testing.T) {
	srv := realpalace.New(t).Serve(t, testToken)
	ackUnknownRefusedAtOnce(t, "real MemPalace", harnessOpts{primaryURL: srv.URL, timeout: 30 * time.Second})
}

func ackUnknownRefusedAtOnce(t *testing.T, name string, o harnessOpts) {
	t.Helper()
	h := start(t, o)
	_, res := h.call("event_ack", map[string]any{"event_id": "evt_20991231T000000_deadbeef0000", "from_agent": "opencode@edge-test", "status": "applied"})
	if s := refusalText(res); !strings.Contains(s, outbox.UnknownEvent) || !strings.Contains(s, "not tried again") || strings.Contains(s, "stays queued") {
		t.Errorf("%s: the agent is answered %q", name, s)
	}
	if note := notesOf(res); !strings.Contains(note, outbox.UnknownEvent) || strings.Contains(note, "drawer") {
		t.Errorf("%s: the dead write's note: %q", name, note)
	}
	if dead := h.deadOps(); len(dead) != 1 || dead[0].Attempts != 1 {
		t.Errorf("%s: dead ops %+v, want the ack, dead at its first send", name, dead)
	}
}
