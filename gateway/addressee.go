package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/invisible"
)

// addresseeWarning adds a "warning" to a coordination write's successful
// answer (resp) whose to_agent names no agent of any device of cfg
// (attack93 F2): the gateway shows an event only to the devices of its
// sender and addressee (and coordinators), and no mailbox lists an ask to
// a name nobody has, so the sender is told, with the agent it most likely
// meant. The write stands, as MemPalace took it: an agent added to a
// device later reads it, and so does a client of the primary that is no
// device of this gateway. A broadcast ("*") and an event addressed to
// nobody (no to_agent) are what they say (RFC 003 §7.4): not warned.
// Names are quoted ASCII-only (%+q: "claude@\u0430lice"), so a
// look-alike differs visibly from the agent it imitates (attack95 F3).
//
// to_agent is compared as MemPalace files it, stripped as Python's
// str.strip() strips (attack105 F1: " pi@laptop" is in pi@laptop's
// mailbox, and telling its sender otherwise has the ask sent twice).
// It is not refused padded, as a wing or room is (checkNames): the
// gateway authorizes no write by its to_agent, and every read by the
// to_agent MemPalace filed. An agent a removed device had (or a live one
// dropped: removed_agents) is told as such (attack105 F4): no device is
// given it again but by an operator's --take-removed-agents.
func addresseeWarning(cfg *Config, args map[string]any, resp []byte) []byte {
	raw, _ := args["to_agent"].(string)
	to := catalogue.SanitizedName(raw)
	if to == "" || to == "*" {
		return resp
	}
	var agents []string
	for _, d := range cfg.Devices {
		if slices.Contains(d.Agents, to) {
			return resp
		}
		agents = append(agents, d.Agents...)
	}
	const unread = "so no device's mailbox lists this event and only the sender's device and coordinators see it; it was written all the same"
	w := fmt.Sprintf("devbox-config gateway: to_agent %+q is no agent of any device, %s (a device given that agent later sees it)", to, unread)
	seen := withoutInvisible(to)
	name, was := cfg.RemovedAgent(seen)
	removed := name != ""
	if removed {
		w = removedAgentWarning(cfg, to, name, was, unread)
	}
	if meant := meantAgents(seen, agents); len(meant) > 0 {
		w += fmt.Sprintf("; did you mean %s? Addresses match exactly, case included: send it again to that one", strings.Join(meant, " or "))
	} else if !removed {
		w += "; an agent is addressed as <harness>@<label>, exactly as its device names it"
	}
	return withMembers(resp, map[string]any{"warning": w})
}

// removedAgentWarning is the warning of to_agent to, which is, or is
// (case, invisible characters or look-alikes aside: Config.RemovedAgent)
// name, an agent device was had (removed_agents; attack107 F3).
func removedAgentWarning(cfg *Config, to, name, was, unread string) string {
	given := "to a device with --take-removed-agents"
	if cfg.Device(was) != nil { // the device that dropped it takes it back without
		given = "back to device " + was + ", or to another with --take-removed-agents"
	}
	is := fmt.Sprintf("%+q was", to)
	if name != to {
		is = fmt.Sprintf("%+q looks like %+q, which was", to, name)
	}
	return fmt.Sprintf("devbox-config gateway: to_agent %s an agent of %s (removed_agents) and is no agent of any device now, %s, and no device reads it unless an operator gives that agent %s", is, cfg.FormerHolder(was), unread, given)
}

// withoutInvisible is s without the characters invisible.Is reports (a
// zero-width space, a BOM): "pi@lap\u200b" is compared as "pi@lap" for
// the agent it likely meant (attack107 F3), though MemPalace files it as
// sent, in a mailbox nobody reads.
func withoutInvisible(s string) string {
	return strings.Map(func(r rune) rune {
		if invisible.Is(r) {
			return -1
		}
		return r
	}, s)
}

// meantAgents are the agents (quoted) a to_agent that names none most
// likely meant: the one nearest it, case aside (confpos.Nearest: at most
// two edits), else, for a bare name, every agent <name>@<label>.
func meantAgents(to string, agents []string) []string {
	if a := confpos.Nearest(to, agents); a != "" {
		return []string{fmt.Sprintf("%+q", a)}
	}
	var out []string
	if strings.Contains(to, "@") {
		return nil
	}
	for _, a := range agents {
		if name, _, _ := strings.Cut(a, "@"); strings.EqualFold(name, to) {
			out = append(out, fmt.Sprintf("%+q", a))
		}
	}
	return out
}
