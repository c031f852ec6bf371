package mailbox

import (
	"fmt"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
)

// Bare reports whether name lacks the @<device> half of an identity (or
// either half is empty).
func Bare(name string) bool {
	h, d, ok := strings.Cut(name, "@")
	return !ok || strings.TrimSpace(h) == "" || strings.TrimSpace(d) == ""
}

// IdentityWarning explains what a bare identity costs, or returns "".
func IdentityWarning(agent string) string {
	if agent == "" || !Bare(agent) {
		return ""
	}
	return fmt.Sprintf("agent identity %q is bare: in a fleet nobody can address it, and every device using the same name discards the others' asks as its own (RFC 003 §3.2, §7.7); use <harness>@<device>, e.g. %q (set MEMPALACE_ORIGIN_LABEL)", agent, agent+"@laptop")
}

// CheckFromAgent returns a warning when an outgoing coordination write that
// names its writer in from_agent (event_append, event_ack, patch_submit,
// task_create: the catalogue's records) has a missing, blank or bare
// from_agent, and
// "" otherwise (or for any other tool). It never changes args: the edge
// reports, the agent decides.
func CheckFromAgent(rec catalogue.Tool, tool string, args map[string]any) string {
	// The coordination writes that name their writer in from_agent.
	if rec.Route != catalogue.CoordinationWrite || rec.Identity != "from_agent" {
		return ""
	}
	v, present := args["from_agent"]
	s, isString := v.(string)
	switch {
	case !present || v == nil:
		return fmt.Sprintf("%s: from_agent is missing; every event needs its writer's identity, <harness>@<device> (RFC 003 §3.2)", tool)
	case !isString:
		return fmt.Sprintf("%s: from_agent is a %T, not a string", tool, v)
	case strings.TrimSpace(s) == "":
		return fmt.Sprintf("%s: from_agent is blank; every event needs its writer's identity, <harness>@<device> (RFC 003 §3.2)", tool)
	case Bare(s):
		return fmt.Sprintf("%s: from_agent %q is bare: replies to it are unreachable in a fleet, and another device using the same name will discard this one's asks as its own (RFC 003 §7.7); use <harness>@<device>, e.g. %q", tool, s, s+"@laptop")
	}
	return ""
}
