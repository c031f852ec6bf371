package edge

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// A primary that answers 307 to another host or port does not get the
// token sent there: the edge's client (its session, the check `edge
// status` and `edge flush` make) follows no redirect, and says where the
// primary pointed and what to set. Before, the bearer transport put the
// token on the followed request too (attack61 F5).
func TestThePrimarysRedirectIsNotFollowedWithTheToken(t *testing.T) {
	t.Parallel()
	primaryURL, target, carried := testbed.Redirecting(t)

	p := NewPrimary(primaryURL+"/mcp", func() string { return "tok-secret" }, slog.New(slog.DiscardHandler),
		PrimaryOptions{Timeout: 5 * time.Second, Probe: time.Hour, Quiet: true})
	defer p.Close()
	got := p.Check(context.Background())
	if n := carried(); n != 0 {
		t.Errorf("%d requests carried the token to the redirect's target", n)
	}
	want := "the primary answered a redirect (HTTP 307) to " + target + ": set MEMPALACE_REMOTE_URL to the final URL"
	if !strings.Contains(got, want) || strings.Contains(got, "k=v") {
		t.Errorf("Check = %q, want it to hold %q (the target's query left out)", got, want)
	}
}
