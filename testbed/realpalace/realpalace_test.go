package realpalace

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
)

func TestVectorIsDeterministicAndNearForSharedWords(t *testing.T) {
	a, b := Vector("the edge proxy keeps the palace"), Vector("the edge proxy keeps the palace")
	c, d := Vector("local palace proxy"), Vector("bananas are yellow fruit")
	dot := func(x, y []float64) (s float64) {
		for i := range x {
			s += x[i] * y[i]
		}
		return s
	}
	if len(a) != fakepalace.Dim || math.Abs(dot(a, a)-1) > 1e-9 {
		t.Fatalf("not a unit vector of %d: len %d, norm² %v", fakepalace.Dim, len(a), dot(a, a))
	}
	if dot(a, b) < 1-1e-12 {
		t.Fatal("the same text got two vectors")
	}
	if dot(a, c) <= dot(a, d)+0.2 {
		t.Fatalf("shared words are not nearer: %v vs %v", dot(a, c), dot(a, d))
	}
	if e := Vector("  "); math.Abs(dot(e, e)-1) > 1e-9 {
		t.Fatal("a text without words must still get a unit vector")
	}
}

// TestRealBothWires starts real MemPalace on one palace over stdio, seeds
// it, then serves the same palace over HTTP with a bearer and reads the
// seeded drawer back; cleanup checks that nothing is left running.
func TestRealBothWires(t *testing.T) {
	p := New(t)
	s := p.Stdio(t)
	ids := s.Seed(t, Drawer("w", "r", "the edge proxy keeps the local palace writable"), DiaryEntry("pi", "shipped"), Fact("edge", "uses", "sqlite", "", ""))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := p.Serve(t, "tok-123")
	r, err := srv.RPC("initialize", map[string]any{"protocolVersion": "2025-06-18"})
	var init struct{ ServerInfo struct{ Version string } }
	if err != nil || json.Unmarshal(r.Result, &init) != nil || init.ServerInfo.Version != Version {
		t.Fatalf("initialize: %v %s", err, r.Result)
	}
	hit := srv.MustCall(t, "mempalace_search", map[string]any{"query": "local palace proxy", "limit": 1})
	res, _ := hit["results"].([]any)
	if len(res) != 1 || res[0].(map[string]any)["drawer_id"] != ids[0]["drawer_id"] {
		t.Fatalf("search over serve: %v (seeded %v)", hit, ids[0])
	}
	if _, err := HTTPClient(srv.URL, "wrong").Tools(); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong bearer: %v", err)
	}
	// A start whose port another serve took between the check and the
	// bind sees that server healthy; the ping with its own token tells
	// them apart, and the start is retried on another port.
	if err := srv.ownsPort(); err != nil {
		t.Fatalf("serve's own port: %v", err)
	}
	if err := (&Server{Port: srv.Port, URL: srv.URL, Token: "another-test's-token"}).ownsPort(); err == nil || !strings.Contains(err.Error(), "another server's") {
		t.Fatalf("a port another serve holds: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if tools, err := srv.Tools(); err != nil || len(tools) < 40 {
		t.Fatalf("after restart: %d tools, %v", len(tools), err)
	}
}
