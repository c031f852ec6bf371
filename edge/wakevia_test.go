package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// askAttributed is askVia for an admin's write attributed to device
// claim (a join's params._meta[origin.MetaKey]); its event id.
func askAttributed(t *testing.T, url, token, claim, from, to, body string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name":      "mempalace_event_append",
		"arguments": map[string]any{"type": "task.request", "stream": "devbox", "room": "r", "from_agent": from, "to_agent": to, "status": "open", "body": body},
		"_meta":     map[string]any{origin.MetaKey: claim}}})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Result struct{ Content []struct{ Text string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Result.Content) == 0 {
		t.Fatalf("event_append attributed to %s: %v %+v", claim, err, r)
	}
	var m struct{ Event struct{ ID string } }
	if json.Unmarshal([]byte(r.Result.Content[0].Text), &m) != nil || m.Event.ID == "" {
		t.Fatalf("event_append attributed to %s: %s", claim, r.Result.Content[0].Text)
	}
	return m.Event.ID
}

// An ask an admin (ops) wrote attributed to the laptop is vouched for by
// both: once desk trusts only the laptop, the next session is not told
// of it as from a trusted sender, even from the view an earlier session
// kept under a wider set (its own read of the owed asks still out),
// while the laptop's own ask is.
func TestWakeTrustsAnAttributedAskOnlyWithItsJoiner(t *testing.T) {
	t.Parallel() // it waits out graces, not the CPU: alongside the others of its kind
	url, tokens, gw := testGatewayServer(t, func() string { _, srv := startPrimary(t); return srv.URL() }(),
		gateway.Device{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, Agents: []string{"pi@ops"}},
		gateway.Device{ID: "laptop-7f3a", Label: "laptop", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@laptop"}},
		gateway.Device{ID: "desk-9b21", Label: "edge-test", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	fromLaptop := askVia(t, url, tokens["laptop-7f3a"], "pi@laptop", "opencode@edge-test", "rotate the fleet token")
	viaOps := askAttributed(t, url, tokens["ops-0001"], "laptop-7f3a", "pi@ops", "opencode@edge-test", "push this to main")
	h := start(t, harnessOpts{primaryURL: url, token: tokens["desk-9b21"], wakeWait: 10 * time.Second})
	if in := instructionsOf(h); !strings.Contains(in, fromLaptop) || !strings.Contains(in, viaOps) {
		t.Fatalf("trusting every device, the session was not told of both asks:\n%s", in)
	}
	h.s.Close()

	c, err := gateway.LoadConfig(gw.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	c.Devices[2].Trusts = []string{"laptop-7f3a"}
	if err := c.Save(gw.ConfigFile); err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
	// It waits for the device header, however long a loaded machine takes
	// (the 1 s of wakeTrustWait ran out before it), not the bound.
	h2 := start(t, harnessOpts{palace: h.palace, primaryURL: holdingProxy(t, url), token: tokens["desk-9b21"], trustWait: time.Minute})
	if in := instructionsOf(h2); strings.Contains(in, viaOps) || !strings.Contains(in, fromLaptop) {
		t.Errorf("desk trusts only the laptop, and the next session was told:\n%s", in)
	}
}
