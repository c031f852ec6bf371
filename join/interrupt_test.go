package join

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/gateway"
)

// A join cut short (Ctrl-C) while it sends, then run again: its report
// counts what it sent, the records the first run queued and it flushed
// included, and skips only what the first run had sent. Run again
// without the first run's --origin-device, its writes are other writes
// (added_by differs): it flushes what the first one queued, then finds
// its own writes on the primary. It said "sent 0, skipped 40" when it had
// sent 21 of them. Records the first run queued that are gone from the
// palace since are counted apart, as sent for the earlier run.
func TestJoinInterruptedThenRunAgainCountsWhatItSent(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	for _, c := range []struct {
		name, firstDevice string
		gone              int // local drawers deleted between the runs
	}{{"same flags", "", 0}, {"origin-device dropped", "desk-1", 0}, {"records gone", "", 6}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, pr := newPalace(t), newPrimary(t)
			const n = 12
			var ids []string
			for i := range n {
				d := p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("interrupted note %d", i)})
				ids = append(ids, d["drawer_id"].(string))
			}
			p.save(t)
			cfg := config(t, p, pr)
			first := cfg
			first.Device = c.firstDevice
			pr.pl.SetLatency("mempalace_add_drawer", 150*time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			go func() { // Ctrl-C once some, not all, have arrived
				for pr.pl.Calls("mempalace_add_drawer") < 4 {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			}()
			rep, err := Run(ctx, first, Options{})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // a call cut short by Ctrl-C may still land
			onPrimary := len(pr.pl.Dump().Drawers)
			if onPrimary == 0 || onPrimary == n || rep.Sent[Drawers] > onPrimary {
				t.Fatalf("the interrupted run: %d of %d on the primary, reported sent %d", onPrimary, n, rep.Sent[Drawers])
			}
			// doctor and edge status say so, with the fix (before: "nothing
			// to fix", and edge status silent).
			if fs := doctor.UnfinishedJoins(p.dir, time.Now()); len(fs) != 1 || fs[0].ID != doctor.IDJoinInterrupted || !strings.Contains(fs[0].Fix, "devbox-config join --resume") || !strings.Contains(fs[0].Message, rep.Target) {
				t.Fatalf("after the interrupted run: %+v", fs)
			}
			pr.pl.SetLatency("mempalace_add_drawer", 0)
			for _, id := range ids[:c.gone] {
				p.do(t, "delete_drawer", map[string]any{"drawer_id": id})
			}
			p.save(t)

			rep = run(t, cfg, Options{Verify: All})
			if !rep.OK() || len(pr.pl.Dump().Drawers) != n {
				t.Fatalf("the second run: %d of %d on the primary: %+v", len(pr.pl.Dump().Drawers), n, rep)
			}
			if fs := doctor.UnfinishedJoins(p.dir, time.Now()); len(fs) != 0 {
				t.Fatalf("after the join finished: %+v", fs)
			}
			sent, skipped, earlier := rep.Sent[Drawers], rep.Skipped[Drawers], rep.SentQueuedEarlier[Drawers]
			if sent+earlier != n-onPrimary || sent+skipped != n-c.gone || (c.gone == 0) != (earlier == 0) {
				t.Fatalf("the second run reports sent %d, skipped %d, sent for the earlier run %d; it sent %d, %d were there, %d of %d are gone", sent, skipped, earlier, n-onPrimary, onPrimary, c.gone, n)
			}
		})
	}
}

// Through a gateway with its op-id ledger (as `gateway serve` runs), a
// join cut short by Ctrl-C while a drawer is in flight: the gateway
// finishes that call, the drawer lands, and the ledger records its
// answer. The next run sends the op again and gets the recorded answer
// back: that drawer landed in the interrupted run, so it is skipped
// (already on the primary), not sent by this run. It said one more sent
// than it sent (fleet repro: "sent 9, skipped 31" with 32 already there).
func TestJoinInterruptedThroughALedgerSkipsWhatLandedInFlight(t *testing.T) {
	t.Parallel() // it waits on the palaces and the network, not the CPU: alongside the others of its kind
	pr, url, tokens := gatewayFront(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, Agents: []string{"opencode@desk"}}}, true)
	p := newPalace(t)
	const n = 12
	for i := range n {
		p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("in-flight note %d", i)})
	}
	p.save(t)
	cfg := config(t, p, pr)
	cfg.URL, cfg.Token = url, func() string { return tokens["desk-9b21"] }
	pr.pl.SetLatency("mempalace_add_drawer", 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // Ctrl-C while the 4th drawer is on its way
		for pr.pl.Calls("mempalace_add_drawer") < 4 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	if _, err := Run(ctx, cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(500 * time.Millisecond) // the gateway finishes the call in flight
	onPrimary := len(pr.pl.Dump().Drawers)
	if onPrimary == 0 || onPrimary == n {
		t.Fatalf("the interrupted run left %d of %d on the primary", onPrimary, n)
	}
	pr.pl.SetLatency("mempalace_add_drawer", 0)

	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() || len(pr.pl.Dump().Drawers) != n {
		t.Fatalf("the second run: %d of %d on the primary: %+v", len(pr.pl.Dump().Drawers), n, rep)
	}
	sent, skipped, earlier := rep.Sent[Drawers], rep.Skipped[Drawers], rep.SentQueuedEarlier[Drawers]
	if sent != n-onPrimary || skipped != onPrimary || earlier != 0 {
		t.Fatalf("the second run reports sent %d, skipped %d, sent for the earlier run %d; %d were on the primary already, it sent %d", sent, skipped, earlier, onPrimary, n-onPrimary)
	}
}
