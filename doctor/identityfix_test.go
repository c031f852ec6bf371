package doctor

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/ladder"
)

// When no agent of the device is one a session can be (a bare
// "opencode", or none at all), device-identity's fix names the gateway's
// command; before, it sent the user to set MEMPALACE_AGENT_NAME "to an
// agent of the device", which no .env line could (attack65 F4). A device
// whose agents carry its label keeps the .env fix alone.
func TestDeviceIdentityNamesTheGatewaysFixWhenNoAgentCanMatch(t *testing.T) {
	s := ladder.Settings{OriginDevice: "bare-1", OriginLabel: "bare", AgentName: "opencode"}
	for _, c := range []struct {
		name   string
		dev    deviceinfo.Info
		gwSide bool
	}{
		{"a bare agent", deviceinfo.Info{ID: "bare-1", Label: "bare", Agents: []string{"opencode"}}, true},
		{"no agents", deviceinfo.Info{ID: "bare-1", Label: "bare"}, true},
		{"another label", deviceinfo.Info{ID: "bare-1", Label: "bare", Agents: []string{"opencode@other"}}, true},
		{"agents of its label", deviceinfo.Info{ID: "bare-1", Label: "bare", Agents: []string{"pi@bare"}}, false},
	} {
		fs := identityMismatch(s, c.dev)
		if len(fs) != 1 {
			t.Fatalf("%s: findings %v", c.name, fs)
		}
		has := strings.Contains(fs[0].Fix, "the fix is on the gateway: its operator runs `devbox-config gateway device set bare-1 --label bare --agents opencode@bare`")
		if has != c.gwSide {
			t.Errorf("%s: gateway-side fix %v, want %v: %s", c.name, has, c.gwSide, fs[0].Fix)
		}
	}
}
