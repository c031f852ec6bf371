package deviceinfo

import (
	"fmt"
	"path"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
)

// The rules a write's refusal names (the gateway's denial data and audit
// log, and an edge refusing up front what the gateway would refuse).
const (
	// RuleNotVisible: the drawer a by-id write names does not exist or is
	// in a wing the device may not read (the two are not told apart).
	RuleNotVisible = "the target is not visible to this device"
	// RuleInstructionWing: only admin devices whose write globs match the
	// instruction wing write it.
	RuleInstructionWing = "instruction wing: admin devices whose write globs match it only"
	// RuleWriteGlobs: no write glob of the device matches the wing.
	RuleWriteGlobs = "write globs do not match the target wing"
)

// MatchWing reports whether one of globs (path.Match; a malformed one
// matches nothing) matches wing.
func MatchWing(globs []string, wing string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, wing); ok {
			return true
		}
	}
	return false
}

// Reads reports whether the device may read wing: one its read globs
// match, or the instruction wing, which every device reads.
func (in Info) Reads(wing string) bool {
	return MatchWing(in.Read, wing) || (wing != "" && wing == in.InstructionWing)
}

// Writes reports whether the device may write wing (and if not, the
// rule): the instruction wing only if it is an admin device whose write
// globs match it too, any other wing its write globs match.
func (in Info) Writes(wing string) (bool, string) {
	switch {
	case wing != "" && wing == in.InstructionWing:
		return in.Admin && MatchWing(in.Write, wing), RuleInstructionWing
	case wing != "" && MatchWing(in.Write, wing):
		return true, ""
	}
	return false, RuleWriteGlobs
}

// ActsAs reports whether the device may act as agent. For coordination
// identities (from_agent, created_by) that is one of its Agents exactly.
// For a diary's agent_name it is also the harness part of one
// ("opencode" for "opencode@laptop": the diary is the harness's),
// compared case-insensitively, as MemPalace lower-cases diary agents.
func (in Info) ActsAs(agent string, diary bool) bool {
	for _, a := range in.Agents {
		if a == agent {
			return true
		}
		if diary && agent != "" {
			harness, _, _ := strings.Cut(a, "@")
			if strings.EqualFold(a, agent) || strings.EqualFold(harness, agent) {
				return true
			}
		}
	}
	return false
}

// AuthorizeWrite decides a call of a catalogue.WriteWing tool as the
// gateway does: ok with rule "write:<wings>", or the rule that refuses
// it. wing is the first wing written, or the one refused. drawerWing is
// the wing of the drawer a by-id call names ("" if not found).
func (in Info) AuthorizeWrite(t catalogue.Tool, args map[string]any, drawerWing string) (ok bool, rule, wing string) {
	str := func(k string) string { s, _ := args[k].(string); return s }
	if rule := diaryAgentAt(str("agent_name")); rule != "" && t.Wings == catalogue.DiaryWing {
		return false, rule, ""
	}
	if t.Identity != "" && !in.ActsAs(str(t.Identity), true) {
		return false, fmt.Sprintf("%s %q is not one of this device's agents", t.Identity, str(t.Identity)), firstOf(t.WingsOf(args, drawerWing))
	}
	if dm, ok := args["diary"].(map[string]any); ok {
		a, _ := dm["agent_name"].(string)
		if rule := diaryAgentAt(a); rule != "" {
			return false, "diary." + rule, ""
		}
		if !in.ActsAs(a, true) {
			return false, fmt.Sprintf("diary.agent_name %q is not one of this device's agents", a), ""
		}
	}
	if t.Wings == catalogue.DrawerWing && (drawerWing == "" || !in.Reads(drawerWing)) {
		return false, RuleNotVisible, drawerWing // as for a read by id
	}
	wings := t.WingsOf(args, drawerWing)
	if len(wings) == 0 {
		return false, "the call names no wing to write", ""
	}
	for _, w := range wings {
		if ok, rule := in.Writes(w); !ok {
			return false, rule, w
		}
	}
	return true, "write:" + strings.Join(wings, ","), wings[0]
}

// firstOf is the first of wings ("": none).
func firstOf(wings []string) string {
	if len(wings) == 0 {
		return ""
	}
	return wings[0]
}

// diaryAgentAt is the refusal of a diary's agent name with an "@" in it
// ("": none): MemPalace takes no "@" there, so an agent's diary is the
// one of the part before it (a grant of the wing the whole name gives
// could not help).
func diaryAgentAt(agent string) string {
	harness, _, at := strings.Cut(agent, "@")
	if !at {
		return ""
	}
	return fmt.Sprintf("agent_name %q: MemPalace takes no \"@\" in a diary's agent name; name the diary's agent %q, the part before \"@\" (without a wing, its diary is %s)", agent, harness, catalogue.DiaryWingOf(harness))
}
