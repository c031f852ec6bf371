package gateway

import (
	"fmt"
	"maps"
	"slices"

	"github.com/joakimp/devbox-config/lookalike"
)

// RemovedAgent is the agent of removed_agents that a is, or else the
// first (in order) that a looks like (lookalike.Skeleton, as live
// devices' agents are compared), and the id of the device that had it;
// "", "" if none.
func (c *Config) RemovedAgent(a string) (name, was string) {
	if was, ok := c.RemovedAgents[a]; ok {
		return a, was
	}
	sk := lookalike.Skeleton(a)
	for _, name := range slices.Sorted(maps.Keys(c.RemovedAgents)) {
		if lookalike.Skeleton(name) == sk {
			return name, c.RemovedAgents[name]
		}
	}
	return "", ""
}

// FormerHolder names device was, which had an agent of removed_agents:
// "removed device ID", or "device ID, which dropped it" of a live one.
func (c *Config) FormerHolder(was string) string {
	if c.Device(was) != nil {
		return "device " + was + ", which dropped it"
	}
	return "removed device " + was
}

// heldAgent is the refusal of agent a (devices[i].agents[j]) that is or
// looks like name, device was's agent (removed_agents), where was is live
// or a is a look-alike: the message of an exact removed one is
// checkRemovedAgents's.
func (c *Config) heldAgent(i, j int, a, name, was string) error {
	at := fmt.Sprintf("devices[%d].agents[%d]", i, j)
	if name == a {
		return fmt.Errorf("%s: %q was an agent of %s (removed_agents): this device would read every ask ever addressed to it, old ones included, and could answer them as it (fix: another agent, <harness>@<this device's label>; or, for a machine that replaces %s, take it over on purpose with --take-removed-agents, or by deleting %q from removed_agents in the config)", at, a, c.FormerHolder(was), was, name)
	}
	return fmt.Errorf("%s: %+q looks like %q, an agent of %s (removed_agents): one could pass for the other on the coordination log, and senders who type it would address this device believing it %s (fix: another agent, <harness>@<this device's label>, one no former agent looks like; or take it over on purpose with --take-removed-agents, or by deleting %q from removed_agents in the config)", at, a, name, c.FormerHolder(was), was, name)
}
