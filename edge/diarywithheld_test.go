package edge

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// withheldDevices: laptop (the edge under test) withholds what devices
// it does not trust write; rogue, which it does not trust, writes the
// same diary wing straight to the gateway.
func withheldDevices() []gateway.Device {
	dev := func(id string) gateway.Device {
		return gateway.Device{ID: id, Label: id, Read: []string{"*"}, Write: []string{"*"}, KG: "write",
			Agents: []string{"opencode@" + id}, WriteRate: 10000, ReadRate: 10000}
	}
	laptop := dev("laptop")
	laptop.Trusts, laptop.Untrusted = []string{"laptop"}, gateway.UntrustedWithhold
	return []gateway.Device{laptop, dev("rogue")}
}

// diaryPastWithheld: laptop writes a diary line, it reaches the primary;
// then rogue writes three newer lines to the same diary. laptop's
// diary_read of the last three must show its own line as palace both
// (its copy is the newest laptop may see on the primary). Before, the
// gateway cut MemPalace's page of three (rogue's) to none, and the merge
// showed laptop's line as palace local, as if never replicated (outside
// tester, attack36 N5).
func diaryPastWithheld(t *testing.T, h *harness, url, rogueToken string, copies func() int) {
	t.Helper()
	const text = "Okapi beta line from laptop."
	h.eventually("the gateway's device header", func() bool { in, ok := h.edge.device(); return ok && in.ID == "laptop" })
	if w, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": text}); w["entry_id"] == nil {
		t.Fatalf("diary_write: %v", w)
	}
	h.drained()
	waitFor(t, 30*time.Second, "laptop's copy on the primary", func() bool { return copies() == 1 })
	rogue := NewPrimary(url, func() string { return rogueToken }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 30 * time.Second})
	defer rogue.Close()
	for i := range 3 {
		if res, err := FlushTarget(rogue).Call(context.Background(), "mempalace_diary_write", []byte(fmt.Sprintf(`{"agent_name":"opencode","entry":"rogue line %d"}`, i))); err != nil || res["success"] != true {
			t.Fatalf("rogue's diary_write: %v %v", res, err)
		}
	}
	waitFor(t, 30*time.Second, "rogue's lines on the primary", func() bool { return copies() == 4 })
	d, _ := h.call("diary_read", map[string]any{"agent_name": "opencode", "last_n": 3})
	es, _ := d["entries"].([]any)
	var got []string
	for _, x := range es {
		e, _ := x.(map[string]any)
		o, _ := e["origin"].(map[string]any)
		got = append(got, fmt.Sprintf("%v %v %v", e["content"], o["palace"], o["device"]))
	}
	if len(got) != 1 || got[0] != text+" both laptop" {
		t.Errorf("laptop's diary_read of the last 3 past rogue's withheld lines: %q, want its own line alone, palace both (%v)", got, d)
	}
}

func TestDiaryEntryPastWithheldEntriesShowsBoth(t *testing.T) {
	t.Parallel()
	primary, srv := startPrimary(t)
	url, tokens, _ := testGatewayServer(t, srv.URL(), withheldDevices()...)
	h := start(t, harnessOpts{primaryURL: url, token: tokens["laptop"], identity: "opencode@laptop"})
	diaryPastWithheld(t, h, url, tokens["rogue"], func() int {
		n := 0
		for _, d := range primary.Dump().Drawers {
			if d.Diary {
				n++
			}
		}
		return n
	})
}

// TestRealDiaryEntryPastWithheldEntriesShowsBoth is the same against real
// MemPalace 3.11.0, whose diary_read cuts the page before the gateway
// withholds.
func TestRealDiaryEntryPastWithheldEntriesShowsBoth(t *testing.T) {
	if testing.Short() {
		t.Skip("real MemPalace")
	}
	srv := realpalace.New(t).Serve(t, testToken)
	url, tokens, _ := testGatewayServer(t, srv.URL, withheldDevices()...)
	h := start(t, harnessOpts{realLocal: realpalace.New(t), primaryURL: url, token: tokens["laptop"], identity: "opencode@laptop", timeout: 30 * time.Second})
	diaryPastWithheld(t, h, url, tokens["rogue"], func() int {
		page := srv.MustCall(t, "mempalace_diary_read", map[string]any{"agent_name": "opencode", "last_n": 10})
		es, _ := page["entries"].([]any)
		return len(es)
	})
}
