package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary that answers 307 to another host or port does not get the
// token sent there by `devbox-config mailbox`: the redirect is not
// followed and the error says where it pointed and what to set. Before,
// the mailbox's bearer transport put the token on the followed request
// (attack61 F5).
func TestMailboxFollowsNoRedirectWithTheToken(t *testing.T) {
	const token = "tok-SECRET-redirect"
	primaryURL, target, carried := testbed.Redirecting(t)
	t.Setenv("MEMPALACE_REMOTE_URL", primaryURL+"/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", token)
	for _, k := range []string{"MEMPALACE_AGENT_NAME", "MEMPALACE_EDGE", "MEMPALACE_EDGE_HARNESS", "MEMPALACE_ORIGIN_LABEL"} {
		t.Setenv(k, "")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"mailbox", "--agent", "pi@box"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if n := carried(); n != 0 {
		t.Errorf("%d requests carried the token to the redirect's target", n)
	}
	if want := "the primary answered a redirect (HTTP 307) to " + target; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, errb.String())
	}
}
