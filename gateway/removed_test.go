package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A removed device's id is remembered: an id both removed and in the
// devices is refused (its records and trust would carry over).
func TestConfigRefusesARemovedIDAmongTheDevices(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"removed_devices\": [\"bob-02\"],\n  \"devices\": [\n    {\"id\": \"bob-02\"},\n  ],\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadConfig(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":4:23: removed_devices[0]: \"bob-02\" was removed") {
		t.Errorf("got %v, want %s:4:23: removed_devices[0]: \"bob-02\" was removed...", err, file)
	}
}

// An agent a removed device had is refused on another device of a config
// edited by hand too (the gateway's load and reload): it would read every
// ask addressed to the removed device. A config without removed_agents
// (written before them) loads.
func TestConfigRefusesARemovedDevicesAgentOnAnotherDevice(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "g.jsonc")
	body := "{\n  \"secret_file\": \"s\",\n  \"audit_log\": \"a\",\n  \"removed_devices\": [\"echo1\"],\n  \"removed_agents\": {\"claude@echo\": \"echo1\"},\n  \"devices\": [\n    {\"id\": \"foxtrot\", \"label\": \"echo\", \"read\": [\"shared\"], \"agents\": [\"claude@echo\"]},\n  ],\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := LoadConfig(file)
	if err == nil || !strings.Contains(err.Error(), `devices[0].agents[0]: "claude@echo" was an agent of removed device echo1`) {
		t.Errorf("got %v, want the agent of removed device echo1 refused", err)
	} else if !strings.Contains(err.Error(), `deleting "claude@echo" from removed_agents in the config`) {
		t.Errorf("a hand-edited config's refusal gives only the CLI's fix: %v", err)
	}
	os.WriteFile(file, []byte(strings.Replace(body, "  \"removed_agents\": {\"claude@echo\": \"echo1\"},\n", "", 1)), 0o600)
	if _, err := LoadConfig(file); err != nil {
		t.Errorf("a config with a removed device and no removed_agents: %v", err)
	}
}

// A config edited by hand is held to the same comparison as live
// devices' agents: an agent that looks like a removed device's (another
// case, a Cyrillic letter) is refused at load, naming the agent it looks
// like (attack79 F6: compared exactly, each loaded).
func TestConfigRefusesALookAlikeOfARemovedDevicesAgent(t *testing.T) {
	t.Parallel()
	testRemovedAgents(t, []removedAgentCase{
		{"echo1", "foxtrot", "Claude@echo", `devices[0].agents[0]: "Claude@echo" looks like "claude@echo", an agent of removed device echo1 (removed_agents)`},
		{"echo1", "foxtrot", "claud\u0435@echo", `looks like "claude@echo", an agent of removed device echo1`},
	})
}

// An agent `device set` dropped from a live device is kept in
// removed_agents under that device's id: another device given it is
// refused, saying the device dropped it (not that it was removed); the
// device itself may have it again.
func TestConfigRefusesAnAgentALiveDeviceDroppedOnAnotherDevice(t *testing.T) {
	t.Parallel()
	testRemovedAgents(t, []removedAgentCase{
		{"golf", "foxtrot", "claude@echo", `devices[0].agents[0]: "claude@echo" was an agent of device golf, which dropped it (removed_agents)`},
		{"golf", "foxtrot", "Claude@echo", `"Claude@echo" looks like "claude@echo", an agent of device golf, which dropped it`},
		{"foxtrot", "foxtrot", "claude@echo", ""},
	})
}

// removedAgentCase is a config whose removed_agents gives claude@echo to
// removed, and whose device id (label echo) has agent: want is what its
// load is refused with ("": it loads).
type removedAgentCase struct{ removed, id, agent, want string }

// testRemovedAgents loads each case's config.
func testRemovedAgents(t *testing.T, cases []removedAgentCase) {
	file := filepath.Join(t.TempDir(), "g.jsonc")
	for _, c := range cases {
		body := `{"secret_file": "s", "audit_log": "a", "removed_agents": {"claude@echo": "` + c.removed + `"}, "devices": [
			{"id": "` + c.id + `", "label": "echo", "read": ["shared"], "agents": ["` + c.agent + `"]},
			{"id": "golf", "label": "golf", "read": ["shared"], "agents": ["pi@golf"]}]}`
		os.WriteFile(file, []byte(body), 0o600)
		_, err := LoadConfig(file)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+q on %s, removed_agents naming %s: got %v, want %q", c.agent, c.id, c.removed, err, c.want)
		}
	}
}
