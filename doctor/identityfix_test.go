package doctor

import (
	"os"
	"path/filepath"
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
		fs := identityMismatch(s, c.dev, nil)
		if len(fs) != 1 {
			t.Fatalf("%s: findings %v", c.name, fs)
		}
		has := strings.Contains(fs[0].Fix, "the fix is on the gateway: its operator runs `devbox-config gateway device set bare-1 --label bare --agents opencode@bare`")
		if has != c.gwSide {
			t.Errorf("%s: gateway-side fix %v, want %v: %s", c.name, has, c.gwSide, fs[0].Fix)
		}
	}
}

// attack84 F4: only the agent name is wrong, and the values come from the
// process environment (no .env sets them). device-identity says so, names
// where each wrong value was read, and its fix names only the agent name;
// before, it blamed ".env" and told the user to set the device id and
// label too, which were right. Read from a file, it names the file's line.
func TestDeviceIdentityNamesWhereTheWrongValueWasReadAndOnlyIt(t *testing.T) {
	dev := deviceinfo.Info{ID: "box-0001", Label: "box", Agents: []string{"pi@box"}}
	s := ladder.Settings{OriginDevice: "box-0001", OriginLabel: "box", AgentName: "x"}
	env := filepath.Join(t.TempDir(), "team.env")
	if err := os.WriteFile(env, []byte("MEMPALACE_ORIGIN_DEVICE=box-0001\nMEMPALACE_AGENT_NAME=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		files []string
		where string
	}{
		{nil, "the environment"},
		{[]string{filepath.Join(t.TempDir(), ".env")}, "the environment"}, // no such file: nothing was read from it
		{[]string{env}, env + ":2"},
	} {
		fs := identityMismatch(s, dev, c.files)
		if len(fs) != 1 {
			t.Fatalf("%v: findings %v, want device-identity", c.files, fs)
		}
		f := fs[0]
		if strings.Contains(f.Message, ".env says") || !strings.Contains(f.Message, `MEMPALACE_AGENT_NAME="x" (`+c.where+`): "x@box" is not one of`) {
			t.Errorf("%v: the message does not say the agent name came from %s: %s", c.files, c.where, f.Message)
		}
		if !strings.Contains(f.Fix, "MEMPALACE_AGENT_NAME in "+c.where+" to an agent of the device") {
			t.Errorf("%v: the fix does not name the agent name in %s: %s", c.files, c.where, f.Fix)
		}
		if strings.Contains(f.Fix, "MEMPALACE_ORIGIN_DEVICE") || strings.Contains(f.Fix, "MEMPALACE_ORIGIN_LABEL") {
			t.Errorf("%v: the fix names variables that are right: %s", c.files, f.Fix)
		}
	}
}
