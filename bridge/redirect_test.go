package bridge

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary that answers 307 to another host or port does not get the
// token sent there by the bridge: the redirect is not followed, and the
// bridge's start fails saying where it pointed and what to set. Before,
// the bearer transport put the token on the followed request (as the
// edge's and the mailbox's did, attack61 F5).
func TestBridgeFollowsNoRedirectWithTheToken(t *testing.T) {
	const token = "tok-SECRET-bridge-redirect"
	primaryURL, target, carried := testbed.Redirecting(t)
	b, err := New(Config{URL: primaryURL + "/mcp", Token: func() string { return token }, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, w := io.Pipe()
	err = b.Serve(context.Background(), r, nopCloser{io.Discard})
	w.Close()
	if n := carried(); n != 0 {
		t.Errorf("%d requests carried the token to the redirect's target", n)
	}
	if want := "the primary answered a redirect (HTTP 307) to " + target; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Serve: %v; want it to say %q", err, want)
	}
}
