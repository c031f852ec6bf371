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

// lookAlikeRemovedAgent is the refusal of agent a (devices[i].agents[j])
// that looks like name, removed device was's agent.
func lookAlikeRemovedAgent(i, j int, a, name, was string) error {
	return fmt.Errorf("devices[%d].agents[%d]: %+q looks like %q, an agent of removed device %s (removed_agents): one could pass for the other on the coordination log, and senders who type it would address this device believing it %s (fix: another agent, <harness>@<this device's label>, one no removed device's looks like; or take it over on purpose with --take-removed-agents)", i, j, a, name, was, was)
}
