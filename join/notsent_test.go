package join

import (
	"fmt"
	"github.com/joakimp/devbox-config/gateway"
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
					said = append(said, f.Record+": "+f.Error) // as the FAILED line reads
				}
			}
			all := strings.Join(said, "\n")
			if len(said) == 0 || !strings.Contains(all, c.want) || strings.Contains(all, c.not) {
				t.Fatalf("want every unsent record to say %q, none %q:\n%s", c.want, c.not, all)
			}
		})
	}
}

// A diary entry queued behind one the primary refused names the op it
// waits for and what they share, the wing: distinct entries are not "the
// same record" (attack91 F3).
func TestADiaryEntryBehindARefusedOneNamesItsWing(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, KG: "write"}})
	p := newPalace(t)
	for i := range 3 {
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": fmt.Sprintf("entry %d", i)})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, c, Options{})
	var refused string
	behind := 0
	for _, f := range rep.Failed {
		switch {
		case strings.Contains(f.Error, "the primary refused it"):
			_, refused, _ = strings.Cut(f.Error, "(op ")
			refused, _, _ = strings.Cut(refused, " ")
		case strings.Contains(f.Error, "it waits for op "+refused+" in the same diary wing") && refused != "":
			behind++
		default:
			t.Errorf("%s %s: %s", f.Kind, f.Record, f.Error)
		}
	}
	if behind != 2 || rep.NotTried != 0 {
		t.Fatalf("want the 2 entries behind the refused one (op %q) to name it and their wing, and none counted not tried for the run's reason (%d): %+v", refused, rep.NotTried, rep.Failed)
	}
}
