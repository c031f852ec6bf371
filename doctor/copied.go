package doctor

import (
	"fmt"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/mailbox"
)

// CopiedOutbox is outbox-copied, for doctor and `edge status`: the outbox
// at path is a copy of another's file (c; nil: none seen) and device,
// .env's MEMPALACE_ORIGIN_DEVICE, is still the one its ops were made
// under, so if this devbox is a second machine it writes under the first
// one's name (false: nothing to say). A disk-level clone keeps its inodes
// and is not seen.
func CopiedOutbox(path string, c *outbox.Copied, device string) (Finding, bool) {
	if c == nil || c.Device != device {
		return Finding{}, false
	}
	seen := "no edge has opened it since it was copied"
	if !c.At.IsZero() {
		seen = "first opened as a copy " + c.At.Local().Format(time.RFC3339)
	}
	name := "device " + mailbox.Quoted(device)
	if device == "" {
		name = "the original's token (MEMPALACE_ORIGIN_DEVICE is not set)"
	}
	return Finding{ID: IDOutboxCopied, Severity: Info, Section: "§6.2",
		Message: fmt.Sprintf("the outbox %s is a copy of another (%s; the original's identity began %s): if this devbox is a second machine, it writes under %s's name: its writes are filed as that device's, the gateway's audit cannot tell the two machines apart, and both agents see and may answer the same asks", path, seen, mailbox.Printable(c.Was), name),
		Fix: "if this is a second machine, give it a device id and token of its own: on the gateway `devbox-config gateway --config gateway.jsonc device add NEW-ID --label LABEL --read ... --write ... --kg write --agents AGENT@LABEL` (NEW-ID from `uuidgen`) and `devbox-config gateway --config gateway.jsonc token issue NEW-ID`; " +
			"then in this devbox's .env set MEMPALACE_ORIGIN_DEVICE=NEW-ID, MEMPALACE_ORIGIN_LABEL=LABEL and MEMPALACE_REMOTE_TOKEN to the token printed, and restart its harness sessions (docs/operator.md, A cloned devbox). If it is the same machine (a backup restored, a devbox moved to a new disk), nothing is wrong: `devbox-config edge outbox same-machine` records so, and this note goes"}, true
}
