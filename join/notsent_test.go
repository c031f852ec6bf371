package join

import (
	"strings"
	"testing"
	"time"
)

// attack30 f6: what a join leaves unsent is named truly. A write whose
// answer was lost after it landed is not called unsent and waiting for a
// primary that was unreachable; a record never tried, with the primary
// down, is not said to wait for ops before it.
func TestJoinNamesWhyARecordIsNotSent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		break_    func(pr *primary)
		want, not string
		stall     time.Duration // the primary down refuses at once: nothing to wait for
	}{
		{"answers lost", func(pr *primary) { pr.srv.DropAfterApplyTool("mempalace_add_drawer", 1000) }, "answer was lost", "not sent yet (queued): lost", time.Second},
		{"primary down", func(pr *primary) { pr.srv.Stop() }, "not tried", "waiting for the ops before it", 300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, pr := newPalace(t), newPrimary(t)
			fill(t, p, "a")
			p.save(t)
			c.break_(pr)
			rep := run(t, config(t, p, pr), Options{Stall: c.stall})
			var said []string
			for _, f := range rep.Failed {
				if f.Kind != "primary" {
					said = append(said, f.Error)
				}
			}
			all := strings.Join(said, "\n")
			if len(said) == 0 || !strings.Contains(all, c.want) || strings.Contains(all, c.not) {
				t.Fatalf("want every unsent record to say %q, none %q:\n%s", c.want, c.not, all)
			}
		})
	}
}
