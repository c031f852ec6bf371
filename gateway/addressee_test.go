package gateway

import (
	"strings"
	"testing"
)

// An ask to a name no device's agent has (another case, a typo, a bare
// name) is written, and its sender is warned with the agent it likely
// meant (attack93 F2), its name escaped past ASCII so a look-alike is
// seen (attack95 F3); an ask to an agent, a broadcast or nobody is not.
func TestAddresseeWarning(t *testing.T) {
	t.Parallel()
	g := newGW(t, artRefDevices)
	for _, c := range []struct{ to, want string }{
		{"Claude@Alice", `did you mean "claude@alice"?`},
		{"claude@alise", `did you mean "claude@alice"?`},
		{"claude", `did you mean "claude@alice"?`},
		{"gemini@nowhere", "<harness>@<label>"},
		// a look-alike shows where it differs (attack95 F3): Cyrillic а
		{"claude@\u0430lice", `to_agent "claude@\u0430lice" is no agent`},
		{"claude@alice", ""},
		// MemPalace strips to_agent as Python's str.strip() does and files
		// it in that agent's mailbox: no false warning (attack105 F1), so
		// the sender does not send the ask twice; a typo past the blanks
		// still warns, and names what was filed.
		{" claude@alice", ""},
		{"claude@alice\t", ""},
		{"claude@alice\x1f\u3000", ""},
		{" * ", ""},
		{" claude@alise ", `to_agent "claude@alise" is no agent of any device`},
		// an invisible character is no edit a reader sees (attack107 F3):
		// the ask is filed as sent, in a mailbox nobody reads, and the
		// agent it differs from by nothing visible is suggested
		{"claude@alice\u200b", `to_agent "claude@alice\u200b" is no agent of any device`},
		{"claude@alice\u200b", `did you mean "claude@alice"?`},
		{"\ufeffclaude@alice", `did you mean "claude@alice"?`},
		{"claude@al\u200c\u200d\u2060ice", `did you mean "claude@alice"?`},
		{"Claude@Alice\u200b\u200b\u200b", `did you mean "claude@alice"?`},
		{"", ""},
	} {
		args := map[string]any{"type": "task.request", "stream": "devbox", "room": "general", "from_agent": "pi@bob", "correlation_id": "c-" + c.to, "status": "open", "body": "an ask"}
		if c.to != "" {
			args["to_agent"] = c.to
		}
		res, e, _ := g.call(g.tokens["bob"], "event_append", args)
		if e != nil || res["success"] != true {
			t.Errorf("to_agent %q: not written: %v %v", c.to, res, e)
			continue
		}
		w, _ := res["warning"].(string)
		switch {
		case c.want == "" && w != "":
			t.Errorf("to_agent %q: warned %q", c.to, w)
		case c.want != "" && !strings.Contains(w, c.want):
			t.Errorf("to_agent %q: warning %q, want it to say %q", c.to, w, c.want)
		}
	}
}

// An ask to an agent a removed device had, or one a live device dropped
// (removed_agents), is warned as such (attack105 F4): no device is given
// that agent again but with --take-removed-agents, so the sender is not
// told a device given it later sees it.
func TestAddresseeWarningRemovedAgent(t *testing.T) {
	t.Parallel()
	g := newGW(t, artRefDevices)
	g.configure(t, func(c *Config) {
		c.RemovedDevices = []string{"temp"}
		c.RemovedAgents = map[string]string{"codex@temp": "temp", "claude@old": "alice"}
	})
	for to, want := range map[string]string{
		"codex@temp": `to_agent "codex@temp" was an agent of removed device temp (removed_agents) and is no agent of any device now, so no device's mailbox lists this event`,
		"claude@old": `to_agent "claude@old" was an agent of device alice, which dropped it (removed_agents)`,
		// in another case, or with an invisible character, it is still
		// the removed one's name, not one a device may be given later
		// (attack107 F3)
		"Codex@Temp":       `to_agent "Codex@Temp" looks like "codex@temp", which was an agent of removed device temp (removed_agents)`,
		"codex@temp\u200b": `to_agent "codex@temp\u200b" looks like "codex@temp", which was an agent of removed device temp (removed_agents)`,
	} {
		args := map[string]any{"type": "task.request", "stream": "devbox", "room": "general", "from_agent": "pi@bob", "to_agent": to, "status": "open", "body": "an ask"}
		res, e, _ := g.call(g.tokens["bob"], "event_append", args)
		w, _ := res["warning"].(string)
		if e != nil || res["success"] != true {
			t.Errorf("to_agent %q: not written: %v %v", to, res, e)
		} else if !strings.Contains(w, want) || !strings.Contains(w, "no device reads it unless an operator gives that agent ") || !strings.Contains(w, "--take-removed-agents") || strings.Contains(w, "later sees it") {
			t.Errorf("to_agent %q: warning %q, want it to say %q and that no device reads it but by --take-removed-agents", to, w, want)
		} else if to == "claude@old" && !strings.Contains(w, "back to device alice, or to another with --take-removed-agents") {
			t.Errorf("to_agent %q: warning %q, want it to say alice takes it back without the flag", to, w)
		}
	}
}
