package join

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A join cut short (Ctrl-C) while it sends, then run again: its report
// counts what it sent, the records the first run queued and it flushed
// included, and skips only what the first run had sent. Run again
// without the first run's --origin-device, its writes are other writes
// (added_by differs): it flushes what the first one queued, then finds
// its own writes on the primary. It said "sent 0, skipped 40" when it had
// sent 21 of them.
func TestJoinInterruptedThenRunAgainCountsWhatItSent(t *testing.T) {
	for _, c := range []struct{ name, firstDevice string }{{"same flags", ""}, {"origin-device dropped", "desk-1"}} {
		t.Run(c.name, func(t *testing.T) {
			p, pr := newPalace(t), newPrimary(t)
			const n = 12
			for i := range n {
				p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": fmt.Sprintf("interrupted note %d", i)})
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
			onPrimary := len(pr.pl.Dump().Drawers)
			if onPrimary == 0 || onPrimary == n || rep.Sent[Drawers] != onPrimary {
				t.Fatalf("the interrupted run: %d of %d on the primary, reported sent %d", onPrimary, n, rep.Sent[Drawers])
			}
			pr.pl.SetLatency("mempalace_add_drawer", 0)

			rep = run(t, cfg, Options{Verify: All})
			if !rep.OK() || len(pr.pl.Dump().Drawers) != n {
				t.Fatalf("the second run: %d of %d on the primary: %+v", len(pr.pl.Dump().Drawers), n, rep)
			}
			if rep.Sent[Drawers] != n-onPrimary || rep.Skipped[Drawers] != onPrimary {
				t.Fatalf("the second run reports sent %d, skipped %d; it sent %d, %d were there", rep.Sent[Drawers], rep.Skipped[Drawers], n-onPrimary, onPrimary)
			}
		})
	}
}
