package join

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// attack30 f12: a join refused in one wing (the device may not write
// wing_pi), then `--wing 'nomatch_*'`: it says the glob selects none of
// the palace's wings, and the refused op of wing_pi, not selected, is not
// this run's failure (a join without --wing reports it).
func TestJoinWingSelectingNothingSaysSo(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"project"}, KG: "write", Agents: []string{"opencode@desk"}}})
	p := newPalace(t)
	p.do(t, "add_drawer", map[string]any{"wing": "project", "room": "notes", "content": "a note"})
	p.do(t, "diary_write", map[string]any{"agent_name": "pi", "entry": "pi's entry"})
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	// A diary entry is named by its wing alone (attack30 f1: "wing_pi/: ...").
	if rep := run(t, c, Options{}); len(rep.Failed) != 1 || rep.Failed[0].Record != `wing_pi: "pi's entry"` {
		t.Fatalf("first join: want wing_pi's entry refused, failed %+v", rep.Failed)
	}
	rep := run(t, c, Options{Wings: []string{"nomatch_*"}})
	said := strings.Join(rep.Notes, "\n")
	if !rep.OK() || !strings.Contains(said, "--wing selects none of this palace's wings") || !strings.Contains(said, "not selected") {
		t.Fatalf("join --wing 'nomatch_*': ok %v, failed %+v, notes %q", rep.OK(), rep.Failed, rep.Notes)
	}
	if rep := run(t, c, Options{}); len(rep.Failed) != 1 || rep.Failed[0].Wing != "wing_pi" {
		t.Fatalf("a join without --wing after it: want wing_pi's entry still refused, failed %+v", rep.Failed)
	}
}
