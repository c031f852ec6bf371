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
	if _, err := LoadConfig(file); err == nil || !strings.Contains(err.Error(), `devices[0].agents[0]: "claude@echo" was an agent of removed device echo1`) {
		t.Errorf("got %v, want the agent of removed device echo1 refused", err)
	}
	os.WriteFile(file, []byte(strings.Replace(body, "  \"removed_agents\": {\"claude@echo\": \"echo1\"},\n", "", 1)), 0o600)
	if _, err := LoadConfig(file); err != nil {
		t.Errorf("a config with a removed device and no removed_agents: %v", err)
	}
}
