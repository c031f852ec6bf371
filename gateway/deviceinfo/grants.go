package deviceinfo

import (
	"fmt"
	"path"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/invisible"
	"github.com/joakimp/devbox-config/lookalike"
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
	// RuleInstructionLookalike: a wing that looks like the instruction
	// wing is written by admin devices only.
	RuleInstructionLookalike = "a wing that looks like the instruction wing (the same skeleton, as agent names and labels are compared): admin devices only"
	// RuleInvisibleName: no device writes into a wing or a room whose
	// name holds a character a reader cannot see.
	RuleInvisibleName = "a wing or room name with a control, zero-width or other invisible character (a Hangul filler, U+3164): no device writes into it"
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

// ReadAskForLess is how a gateway's 502 for a read whose upstream answer
// it would not hold (over its cap, or past the bytes it may hold in
// flight) says what it leaves: an edge reads it, within the first 200
// characters of the refusal, as its cue to read a get_drawers in halves.
const ReadAskForLess = "a read applies nothing: ask for less"

// RuleNotAnAgent ends AuthorizeWrite's rule for a write under an agent
// name (its tool's Identity) the device does not hold: the grant that
// matters is the device's agents, not its wings.
const RuleNotAnAgent = "is not one of this device's agents"

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
		return false, fmt.Sprintf("%s %q %s", t.Identity, str(t.Identity), RuleNotAnAgent), firstOf(t.WingsOf(args, drawerWing))
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
	if rule, name := in.refusedName(t, args, wings); name != "" {
		return false, rule, name
	}
	return true, "write:" + strings.Join(wings, ","), wings[0]
}

// refusedName is why a write the device's globs allow is refused, and the
// name it is refused for ("": none): a wing or room it names (not a
// drawer's wing it moves out of) holds an invisible character
// (wing_instructions followed by a Hangul filler lists as the instruction
// wing, attack46 N5), or one of the wings it touches (touched) looks like
// the instruction wing.
func (in Info) refusedName(t catalogue.Tool, args map[string]any, touched []string) (rule, name string) {
	for _, n := range append(t.WingsOf(args, ""), roomsOf(args)...) {
		if strings.ContainsFunc(n, invisible.Is) {
			return RuleInvisibleName, n
		}
	}
	return RuleInstructionLookalike, in.InstructionLookalike(touched)
}

// roomsOf is the rooms a write's arguments name: its room, a tunnel's
// source and target rooms, a checkpoint's items' rooms.
func roomsOf(args map[string]any) []string {
	var rooms []string
	add := func(m map[string]any, keys ...string) {
		for _, k := range keys {
			if s, ok := m[k].(string); ok {
				rooms = append(rooms, s)
			}
		}
	}
	add(args, "room", "source_room", "target_room")
	items, _ := args["items"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			add(m, "room")
		}
	}
	return rooms
}

// InstructionLookalike is the first of wings that looks like the
// instruction wing without being it (lookalike.Skeleton:
// wing_instructiоns with a Cyrillic о, wing-instructions), for a device
// that is not admin ("": none). Its instruction-shaped text would list
// beside the operators' own (attack44 F14).
func (in Info) InstructionLookalike(wings []string) string {
	if in.Admin || in.InstructionWing == "" {
		return ""
	}
	want := lookalike.Skeleton(in.InstructionWing)
	for _, w := range wings {
		if w != in.InstructionWing && lookalike.Skeleton(w) == want {
			return w
		}
	}
	return ""
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
