package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestRealStreamShareHoldsAtThePrimary: against real MemPalace serve,
// whose 8 stream slots six other clients hold, a device that opens and
// closes its streams one at a time is refused 429 once its ended streams
// fill its share of 2, and, after the Retry-After it is given
// (upstreamSlotLinger), the primary has freed both their slots: the
// device's next two streams open (attack111 F2: it held every slot the
// primary had, and others met its 503). This also checks the constant
// against the real server (and the reset that frees a slot at the
// primary's first ping): 20 s is real time here.
func TestRealStreamShareHoldsAtThePrimary(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, []Device{{ID: "alice", Label: "alice", Read: []string{"shared"}, Agents: []string{"pi@alice"}, ReadRate: 1e9}}, u)
	open := func(base, token string) (int, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/logstream/stream?to_agent=pi@alice", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
		}
		return resp.StatusCode, cancel
	}
	for i := range 6 {
		if code, _ := open(srv.Base, srv.Token); code != 200 {
			t.Fatalf("the primary's stream %d: %d", i, code)
		}
	}
	cycle := func(what string) {
		t.Helper()
		for i := range 2 {
			code, hangUp := open(g.http.URL, g.tokens["alice"])
			if code != 200 {
				t.Fatalf("%s: alice's stream %d: %d", what, i, code)
			}
			hangUp()
			for deadline := time.Now().Add(5 * time.Second); len(g.srv.open.all()) > 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the gateway still holds the stream alice hung up")
				}
			}
		}
	}
	cycle("first")
	if code, _ := open(g.http.URL, g.tokens["alice"]); code != http.StatusTooManyRequests {
		t.Fatalf("alice's third stream within %s: %d, want 429", upstreamSlotLinger, code)
	}
	time.Sleep(upstreamSlotLinger)
	g.advance(upstreamSlotLinger)
	cycle("after the Retry-After")
}
