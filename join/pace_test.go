package join

import (
	"fmt"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
)

// attack48 F3: a join through a gateway meets the device's write rate a
// few times, then paces its writes to it; it met it several times a write
// (8,909 refusals, each an audit line, for 2,000 drawers). Every attempt
// is a call the report counts, so the calls beyond the drawers are the
// refusals.
func TestJoinPacesItsWritesToTheGatewaysRate(t *testing.T) {
	if testing.Short() {
		t.Skip("sends at a paced rate for seconds: the integration tier")
	}
	t.Parallel()
	const drawers, rate = 200, 100 // the burst is as large as the rate: about 1 s of sending
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"*"}, KG: "write", WriteRate: rate, Agents: []string{"opencode@desk"}}})
	p := newPalace(t)
	for i := range drawers {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "r", "content": fmt.Sprintf("paced note %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	began := time.Now()
	rep := run(t, c, Options{})
	if !rep.OK() || rep.Sent[Drawers] != drawers {
		t.Fatalf("join: sent %v, failed %+v", rep.Sent, rep.Failed)
	}
	refused := rep.Calls["primary add_drawer"] - drawers
	t.Logf("%d drawers at %d writes/s (burst %d): %d refusals, %s", drawers, rate, rate, refused, time.Since(began).Round(time.Millisecond))
	if refused > drawers/10 {
		t.Fatalf("the gateway refused %d of %d writes for rate (calls %v): the join did not pace itself", refused, rep.Calls["primary add_drawer"], rep.Calls)
	}
}
