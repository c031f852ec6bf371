package gateway

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// Decision is the outcome of authorizing one tools/call.
type Decision struct {
	Allow bool
	Rule  Rule   // the rule that decided, for the denial's data and the audit log
	Wing  string // the wing the call is about ("" if none)
	// found: a checkpoint's items the gateway found to be near-duplicates
	// of drawers in readable wings (see narrow), as upstream reports them.
	found []any
	// asked: a get_drawers' ids (see narrow).
	asked []any
	// why, on a denial, replaces the refusal's usual text (a Never tool's
	// says where to run it instead).
	why string
}

var plainAgent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`) })

func allow(rule Rule, wing string) Decision { return Decision{Allow: true, Rule: rule, Wing: wing} }

func deny(rule Rule, wing string) Decision { return Decision{Rule: rule, Wing: wing} }

// readsAll: the device may read every wing (its read globs include "*"),
// so nothing in an answer needs cutting.
func (d *Device) readsAll() bool { return slices.Contains(d.Read, "*") }

// writesAll: the device may write every wing (its write globs include "*").
func (d *Device) writesAll() bool { return slices.Contains(d.Write, "*") }

// grants is what decides the device's reads and writes, in the form an
// edge hears it (deviceinfo holds the one rule both apply).
func (d *Device) grants() deviceinfo.Info {
	return deviceinfo.Info{Read: d.Read, Write: d.Write, Admin: d.Admin, Agents: d.Agents, InstructionWing: d.instructions}
}

// reads reports whether the device may read wing: one its read globs
// match, or the instruction wing, which every device reads.
func (d *Device) reads(wing string) bool { return d.grants().Reads(wing) }

// readsSome: the device may read some wing.
func (d *Device) readsSome() bool { return len(d.Read) > 0 || d.instructions != "" }

// trusts reports whether the device trusts the records device id wrote
// (origin.Unknown: records of unknown origin): every device's when it
// names no trusted set, else its own and those of the set; never a
// removed device's (attack82 F1: a lost or compromised machine's asks),
// nor one the config does not hold at all (attack85 F10: removed by a
// release that kept no removed_devices, or deleted by hand).
func (d *Device) trusts(id string) bool {
	if d.outside(id) {
		return false // removed, or never in the config
	}
	return d.Trusts == nil || id == d.ID || (id != origin.Unknown && slices.Contains(d.Trusts, id))
}

// outside reports a device id the config does not hold as a device now
// (a removed one is never a live one); unknown origin is not a device.
// A map look-up: it runs for every record a read answers.
func (d *Device) outside(id string) bool {
	return id != origin.Unknown && id != d.ID && !d.live[id]
}

// gone says why device id is outside the config: removed (the config's
// removed devices) or unlisted (neither live nor removed).
func (d *Device) gone(id string) (removed, unlisted bool) {
	if !d.outside(id) {
		return false, false
	}
	removed = slices.Contains(d.removed, id)
	return removed, !removed
}

// goneOf is the device among o's device and via that is removed, and
// the one the config does not hold ("": none).
func (d *Device) goneOf(o origin.Origin) (removed, unlisted string) {
	for _, id := range []string{o.Via, o.Device} { // the device's own reason wins
		if r, u := d.gone(id); id != "" && r {
			removed = id
		} else if id != "" && u {
			unlisted = id
		}
	}
	return removed, unlisted
}

// trustsOrigin reports whether the device trusts a record of origin o:
// every device that vouches for it, the one it names and, for a record a
// join attributed to it, the admin device whose credential wrote it (via).
func (d *Device) trustsOrigin(o origin.Origin) bool {
	return d.trusts(o.Device) && (o.Via == "" || d.trusts(o.Via))
}

// Grants reports whether a device may act as agent (deviceinfo's
// ActsAs).
func (d *Device) Grants(agent string, diary bool) bool { return d.grants().ActsAs(agent, diary) }

// Authorize decides a tools/call by its catalogue record's gate, deny by
// default: a tool the catalogue does not know is refused, whatever the
// device's scope. drawerWing is the wing of the drawer a by-id call names
// (looked up on the upstream first; "" if not found).
func Authorize(d *Device, tool string, args map[string]any, drawerWing string) Decision {
	t, known := catalogue.Lookup(tool)
	switch {
	case slices.Contains(catalogue.QueryLanguage, strings.TrimPrefix(tool, catalogue.Prefix)):
		return deny(ruleQueryLanguage, "")
	case !known:
		return deny("unknown tool (the catalogue has no record of it)", "")
	}
	return authorizeGate(d, t, args, drawerWing)
}

// authorizeGate decides a call to a tool the catalogue knows (t) by its
// gate.
func authorizeGate(d *Device, t catalogue.Tool, args map[string]any, drawerWing string) Decision {
	switch t.Gate {
	case catalogue.Never:
		return Decision{Rule: ruleNever, why: neverWhy[t.Name]}
	case catalogue.Admin:
		return authorizeAdmin(d, t)
	case catalogue.ReadStatic:
		if !d.readsSome() {
			return deny("no read scope", "")
		}
		return allow("read:static", "")
	case catalogue.ReadAllWings:
		if d.readsAll() {
			return allow("read:*", "")
		}
		return deny(ruleReadsAll, "")
	case catalogue.ReadByID:
		// A drawer that does not exist and one in an unreadable wing get
		// the same denial: the answer says nothing of its existence. A
		// device that reads every wing learns nothing from it: the
		// upstream answers it (MemPalace's "not found", not a scope
		// problem an operator would look for: attack112 F6).
		if drawerWing != "" && d.reads(drawerWing) {
			return allow(Rule("read:"+drawerWing), drawerWing)
		}
		if drawerWing == "" && d.readsAll() {
			return allow("read:*", "")
		}
		return deny(ruleNotVisible, drawerWing)
	case catalogue.ReadWing:
		return authorizeReadWing(d, t, args)
	case catalogue.WriteWing:
		ok, rule, wing := d.grants().AuthorizeWrite(t, args, drawerWing)
		return Decision{Allow: ok, Rule: Rule(rule), Wing: wing}
	case catalogue.KGRead:
		if d.KG == KGRead || d.KG == KGWrite {
			return allow("kg:read", "")
		}
		return deny("no knowledge-graph read grant", "")
	case catalogue.KGWrite:
		if d.KG == KGWrite {
			return allow("kg:write", "")
		}
		return deny("no knowledge-graph write grant", "")
	case catalogue.AgentWrite:
		from, _ := args[t.Identity].(string)
		if d.Grants(from, false) {
			return allow(Rule("agent:"+from), "")
		}
		return deny(Rule(fmt.Sprintf("%q is not one of this device's agents", from)), "")
	case catalogue.CoordinationGrant:
		if len(d.Agents) == 0 && !d.Coordinator {
			return deny("no coordination identity", "")
		}
		return allow("coordination:read", "")
	}
	return deny("no rule allows it", "")
}

// authorizeAdmin: the admin scope adds the right to delete and to run
// the maintenance tools; it does not widen the wing globs.
func authorizeAdmin(d *Device, t catalogue.Tool) Decision {
	switch {
	case !d.Admin:
		return deny(ruleAdminOnly, "")
	case deletesByID(t):
		return allow("admin", "") // each drawer's wing: authorizeDrawers
	case !d.readsAll():
		if t.Reads {
			return deny(ruleReadsAll, "")
		}
		return deny(ruleAdminAllWings, "")
	case !t.Reads && !d.writesAll():
		return deny(ruleAdminAllWings, "")
	}
	return allow("admin", "")
}

// authorizeReadWing: a read of the wings its arguments name (none: a read
// MemPalace's answer is filtered for), as one of the device's agents
// where the tool names one.
func authorizeReadWing(d *Device, t catalogue.Tool, args map[string]any) Decision {
	if !d.readsSome() {
		return deny("no read scope", "")
	}
	if id, _ := args[t.Identity].(string); t.Identity != "" && !d.Grants(id, true) {
		return deny(Rule(fmt.Sprintf("%s %q is not one of this device's agents", t.Identity, id)), "")
	}
	wings := t.WingsOf(args, "")
	for _, w := range wings {
		if !d.reads(w) {
			return deny("read globs do not match the wing", w)
		}
	}
	if len(wings) == 0 {
		return allow("read:filtered", "")
	}
	return allow(Rule("read:"+strings.Join(wings, ",")), wings[0])
}

// deletesByID: the admin tools whose wings are those of the drawers they
// name (delete_drawer, delete_drawers).
func deletesByID(t catalogue.Tool) bool {
	return t.Name == "delete_drawer" || t.Name == "delete_drawers"
}

// authorizeDrawers decides an admin's delete by id from the wings of the
// drawers it names, in order ("" for an id that names none): each must
// be a wing the device writes. A drawer in a wing it may not read is
// refused as one that does not exist, and so, from a device that does
// not read every wing, is an id that names no drawer (a device that
// reads every wing gets MemPalace's own "Drawer not found").
func authorizeDrawers(d *Device, wings []string) Decision {
	dec := allow("admin", "")
	for _, w := range wings {
		switch {
		case w == "" && d.readsAll():
			continue
		case w == "" || !d.reads(w):
			return deny(ruleNotVisible, w)
		}
		if ok, rule := d.grants().Writes(w); !ok {
			return deny(Rule(rule), w)
		}
		dec.Wing = cmp.Or(dec.Wing, w)
	}
	return dec
}

// StampProvenance sets added_by = "<agent>/<label>/<device id>" from the
// credential on every tool that takes an added_by (add_drawer,
// checkpoint), whatever the client sent. The agent segment is kept from
// the client's own value only if it is a short plain name; anything else
// is untrusted and becomes "mcp".
func StampProvenance(d *Device, tool string, args map[string]any) {
	if t, _ := catalogue.Lookup(tool); !t.Accepts("added_by") {
		return
	}
	agent := "mcp"
	if a, ok := args["added_by"].(string); ok {
		first, _, _ := strings.Cut(a, "/")
		if plainAgent().MatchString(first) {
			agent = first
		}
	}
	label := d.Label
	if label == "" || strings.Contains(label, "/") {
		label = "-"
	}
	args["added_by"] = agent + "/" + label + "/" + d.ID
}
