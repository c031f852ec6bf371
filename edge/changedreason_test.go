package edge

import (
	"strings"
	"testing"
)

// The agent's note of an update refused as changed on the primary says
// who changed it as the gateway does: a device and when, or, when the
// gateway cannot tell, that it cannot (attack66 N2). Before, every
// refusal that named no device read "by another device", also one whose
// drawer the refused device itself last wrote through the gateway.
func TestTheChangedNoteSaysWhoAsTheGatewayDoes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ who, want string }{
		{"last written by device desk-9b21 at 2026-12-06T16:31:46Z", "(desk-9b21, 2026-12-06T16:31:46Z)"},
		{"not through this gateway, or by this device's earlier write", "(not through this gateway, or by this device's earlier write)"},
		{"by a write the gateway has no record of (made before it kept one, or around it)", "(by a write the gateway has no record of (made before it kept one, or around it))"},
	} {
		reason := "devbox-config gateway: drawer drawer_x changed on the primary since this edit was made (" + c.who + "): its text there is not the one …"
		if got := changedReason(reason, "8addd75ad549", false); !strings.Contains(got, "changed on the primary since this edit "+c.want+": `edge outbox retry 8addd75ad549`") {
			t.Errorf("the note for %q: %s", c.who, got)
		}
	}
	del := "devbox-config gateway: drawer drawer_x changed on the primary since this delete was made (last written by device desk-9b21 at 2026-12-06T16:31:46Z): its text there is not the one this device's palace held when it deleted its copy, and this delete would remove it unseen; nothing was deleted."
	if got := changedReason(del, "8addd75ad549", true); !strings.Contains(got, "(desk-9b21, 2026-12-06T16:31:46Z): `edge outbox retry 8addd75ad549` deletes it, `drop` keeps it") {
		t.Errorf("the note for a refused delete: %s", got)
	}
}
