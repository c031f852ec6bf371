package gateway

import (
	"fmt"
	"strings"

	"github.com/joakimp/devbox-config/invisible"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/lookalike"
	"github.com/joakimp/devbox-config/shellword"
)

// firstInvisible is the first character of s a reader cannot see or a
// terminal acts on (invisible.Is; false if none): in a label or an agent
// name it makes two names look alike, or rewrites the terminal that
// prints it.
func firstInvisible(s string) (rune, bool) {
	for _, r := range s {
		if invisible.Is(r) {
			return r, true
		}
	}
	return 0, false
}

// checkNames refuses what would let one device pass as another on the
// coordination log: an invisible character in a label or agent name, a
// device id that differs from another's only in case, and a label or
// agent name that looks like another device's (the same skeleton), or an
// agent whose @label part looks like another device's label. An agent
// name another device has lets a device read that device's mailbox and
// answer its asks; a look-alike label or id deceives whoever reads one.
//
// The devices whose names are in settled (nameKeys, before an operator's
// change) are read first: of two that look alike, the one changed is the
// one refused.
func (c *Config) checkNames(settled map[string]bool) error {
	order := make([]int, 0, len(c.Devices))
	for _, first := range []bool{true, false} {
		for i, d := range c.Devices {
			if settled[d.nameKey()] == first {
				order = append(order, i)
			}
		}
	}
	ids, labels := map[string]owner{}, map[string]owner{}
	for _, i := range order {
		d := c.Devices[i]
		at := fmt.Sprintf("devices[%d]", i)
		if o, ok := ids[strings.ToLower(d.ID)]; ok && o.name != d.ID {
			return fmt.Errorf("%s.id: %q differs only in case from device %s (devices[%d]): one reads as the other in audit lines and trust lists (fix: give each device an id of its own)", at, d.ID, o.name, o.dev)
		}
		ids[strings.ToLower(d.ID)] = owner{d.ID, i}
		if r, bad := firstInvisible(d.Label); bad {
			return fmt.Errorf("%s.label: %+q holds a control, bidi or zero-width character (U+%04X), which shows one label as another or rewrites the terminal that prints it (fix: remove it)", at, d.Label, r)
		}
		if why := ladder.LabelFault(d.Label); d.Label != "" && why != "" {
			return fmt.Errorf("%s.label: %+q %s (%s): a devbox's MEMPALACE_ORIGIN_LABEL refuses any other, so no device could carry it (fix: a label such as \"laptop\" or \"laptop home\")", at, d.Label, why, ladder.LabelRule)
		}
		if k := lookalike.Skeleton(d.Label); d.Label != "" {
			if o, ok := labels[k]; ok {
				return fmt.Errorf("%s.label: %+q looks like %q, the label of device %s (devices[%d]) (fix: give each device a label of its own, one no other device's looks like)", at, d.Label, o.name, c.Devices[o.dev].ID, o.dev)
			}
			labels[k] = owner{d.Label, i}
		}
	}
	agents := map[string]owner{}
	for _, i := range order {
		for j, a := range c.Devices[i].Agents {
			at := fmt.Sprintf("devices[%d].agents[%d]", i, j)
			if err := checkAgent(c, at, a, i, agents, labels); err != nil {
				return err
			}
			if settled != nil && !settled[c.Devices[i].nameKey()] { // an operator's change: a config loaded is told (UnreachableAgents)
				if err := ownLabel(at, a, c.Devices[i].Label); err != nil {
					return err
				}
			}
			agents[lookalike.Skeleton(a)] = owner{a, i}
		}
	}
	return nil
}

// nameKey is what of d checkNames reads: its id, label and agents.
func (d *Device) nameKey() string {
	return strings.Join(append([]string{d.ID, d.Label}, d.Agents...), "\x00")
}

// nameKeys is the nameKey of every device of c.
func (c *Config) nameKeys() map[string]bool {
	out := make(map[string]bool, len(c.Devices))
	for i := range c.Devices {
		out[c.Devices[i].nameKey()] = true
	}
	return out
}

// owner is a name and the index of the device that has it.
type owner struct {
	name string
	dev  int
}

// checkAgent refuses agent a of device dev (at) when it holds an
// invisible character, a part no devbox could carry (agentParts), or a second @ (it is <harness>@<label>), looks like
// an agent listed before it (agents), or its @label part looks like
// another device's label (labels).
func checkAgent(c *Config, at, a string, dev int, agents, labels map[string]owner) error {
	if r, bad := firstInvisible(a); bad {
		return fmt.Errorf("%s: %+q holds a control, bidi or zero-width character (U+%04X), which shows one agent as another (fix: remove it)", at, a, r)
	}
	sk := lookalike.Skeleton(a)
	if strings.Count(sk, "@") > 1 {
		return fmt.Errorf("%s: %+q has more than one @ (or a character that reads as one): an agent name is <harness>@<label>, and in %+q a reader cannot tell which part is the label (fix: <harness>@<this device's own label>)", at, a, a)
	}
	if o, ok := agents[sk]; ok {
		switch {
		case o.dev == dev:
			return fmt.Errorf("%s: %+q looks like %q, listed before it (fix: list each agent once)", at, a, o.name)
		case o.name == a:
			return fmt.Errorf("%s: %q is also an agent of device %s (devices[%d]): each device would read the other's mailbox and could answer its asks (fix: give each device its own agents, <harness>@<its label>)", at, a, c.Devices[o.dev].ID, o.dev)
		}
		return fmt.Errorf("%s: %+q looks like %q, an agent of device %s (devices[%d]): one could pass for the other on the coordination log (fix: give each device its own agents, <harness>@<its label>, one no other device's looks like)", at, a, o.name, c.Devices[o.dev].ID, o.dev)
	}
	if _, label, ok := strings.Cut(sk, "@"); ok { // pi＠laptop too
		if o, found := labels[label]; found && o.dev != dev {
			return fmt.Errorf("%s: %+q names %q, the label of device %s (devices[%d]), or one that looks like it: its asks would read as that device's (fix: <harness>@<this device's own label>)", at, a, o.name, c.Devices[o.dev].ID, o.dev)
		}
	}
	return agentParts(at, a)
}

// UnreachableAgents says of each agent no session of its device could
// be (ownLabel) why, and the fix. A config loaded keeps them, the gateway
// logs them (a restart after an upgrade must not stop a fleet over an
// agent that was only ever useless); `device add` and `device set` refuse
// them.
func (c *Config) UnreachableAgents() []string {
	var out []string
	for i, d := range c.Devices {
		for j, a := range d.Agents {
			if err := ownLabel(fmt.Sprintf("devices[%d].agents[%d]", i, j), a, d.Label); err != nil {
				out = append(out, err.Error())
			}
		}
	}
	return out
}

// ownLabel refuses agent a (at) of a device labelled label unless it is
// <name>@label: a session speaks as
// MEMPALACE_AGENT_NAME@MEMPALACE_ORIGIN_LABEL, and a device's sessions
// carry its label, so no session could be a bare name or another label.
func ownLabel(at, a, label string) error {
	name, l, _ := strings.Cut(a, "@")
	const why = "a session speaks as <MEMPALACE_AGENT_NAME>@<MEMPALACE_ORIGIN_LABEL>, the device's label, so no session could be this agent"
	switch {
	case l == label && label != "":
		return nil
	case label == "" && l != "":
		return fmt.Errorf("%s: %+q: the device has no label, and %s (fix: give the device the label its agent carries, --label %s)", at, a, why, shellword.Quote(l))
	case label == "":
		return fmt.Errorf("%s: %+q: the device has no label, and %s (fix: give the device a label and the agent it: --label LABEL --agents %s@LABEL)", at, a, why, name)
	case l == "":
		return fmt.Errorf("%s: %+q has no @label: %s (fix: --agents %s)", at, a, why, shellword.Quote(name+"@"+label))
	}
	return fmt.Errorf("%s: %+q: its label %q is not the device's label %q: %s (fix: --agents %s)", at, a, l, label, why, shellword.Quote(name+"@"+label))
}

// agentParts refuses agent a (at) whose name or label part a devbox
// refuses: a session speaks as MEMPALACE_AGENT_NAME@MEMPALACE_ORIGIN_LABEL,
// each part checked as a label is (ladder.LabelFault), so no session
// could speak as it, and only a token used around the edge could.
func agentParts(at, a string) error {
	name, label, hasAt := strings.Cut(a, "@")
	for _, p := range []struct{ part, v string }{{"name", name}, {"label", label}} {
		if why := ladder.LabelFault(p.v); why != "" && (p.part == "name" || hasAt) { // pi@ too: with no label a session is plain pi
			return fmt.Errorf("%s: %+q: its %s %+q %s (%s): a devbox speaks as <MEMPALACE_AGENT_NAME>@<MEMPALACE_ORIGIN_LABEL>, each part so checked, so no session could be this agent (fix: <harness>@<this device's own label>, such as \"pi@laptop\")", at, a, p.part, p.v, why, ladder.LabelRule)
		}
	}
	return nil
}
