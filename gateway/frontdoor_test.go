package gateway

import (
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// attack75 F3: a request refused at the front door (a wrong Host or
// Origin) that carried a valid device token was counted by neither the
// device's read rate nor its source's: 2,000 in 0.4 s, a line each, never
// a 429. It counts as a read of the device its token names, as a 404
// does: past the read burst it is answered 429, and past the device's
// first few refusals by its rate with no line of its own.
func TestAFrontDoorRefusalWithATokenCountsAgainstItsDevice(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk := g.tokens["desk-9b21"]
	codes := map[int]int{}
	for i := range 300 { // read burst 100
		hdr := map[string]string{"Authorization": "Bearer " + desk, "Origin": "https://evil.example"}
		if i%2 == 1 {
			hdr = map[string]string{"Authorization": "Bearer " + desk, "Host": "evil.example"}
		}
		resp, _ := testbed.Request(t, "GET", g.http.URL+"/healthz", "", hdr)
		codes[resp.StatusCode]++
	}
	if codes[403] != 100 || codes[429] != 200 {
		t.Fatalf("300 requests with a wrong Host or Origin and a token at once: %v, want the read burst's 100 403s and the rest 429 (the server's clock stands still)", codes)
	}
	lines := 0
	for _, e := range g.auditLog() {
		if e.Rule == ruleFrontDoor || e.Rule == ruleRateRead {
			lines++
		}
	}
	if want := codes[403] + deviceLines; lines != want {
		t.Fatalf("%d lines for %v, want one per 403 and the first %d refusals by the read rate (%d)", lines, codes, deviceLines, want)
	}
	if _, rpc, status := g.call(g.tokens["laptop-7f3a"], "kg_stats", nil); status != 200 || rpc != nil {
		t.Fatalf("another device from the same address: HTTP %d, %v", status, rpc)
	}
}
