package join

import (
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// A device that ran in edge mode replicated its drawers as it wrote them:
// the primary holds them, and a real join skips each ("already on the
// primary"). The dry run counted every one as to send (attack65 F8:
// "drawers 2 2", then the join sent 0 and skipped 2); it asks the primary
// by each drawer's id, read-only, and counts what the real run sends.
func TestJoinDryRunCountsWhatTheRealRunSends(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	remote := func(tool string, args map[string]any) map[string]any { return call(t, pr.pl, "mempalace_"+tool, args) }
	for _, c := range []string{"replicated by the edge", "flushed as well"} {
		fileAndUpdate(t, local, c, "")
		fileAndUpdate(t, remote, c, "")
	}
	fileAndUpdate(t, local, "written while the primary was away", "")
	p.save(t)
	c := config(t, p, pr)
	filed := writes(pr)
	dry := run(t, c, Options{DryRun: true})
	if dry.Pending[Drawers] != 1 || dry.Skipped[Drawers] != 2 || len(dry.Failed) != 0 {
		t.Fatalf("dry run: to send %v, skipped %v, failed %+v; want the one drawer the primary lacks", dry.Pending, dry.Skipped, dry.Failed)
	}
	if writes(pr) != filed {
		t.Fatal("the dry run wrote to the primary")
	}
	rep := run(t, c, Options{})
	if !rep.OK() || rep.Sent[Drawers] != dry.Pending[Drawers] || rep.Skipped[Drawers] != dry.Skipped[Drawers] {
		t.Fatalf("join: sent %v, skipped %v, failed %+v; the dry run said %v to send, %v skipped", rep.Sent, rep.Skipped, rep.Failed, dry.Pending, dry.Skipped)
	}
}

// A drawer never updated whose id the primary holds with other content
// (edited there): the real join's add names that id and is skipped; the
// dry run named it an "edited" mismatch (the review of dcc3bb4).
func TestJoinDryRunCountsADrawerEditedOnThePrimaryAsTheRealRunDoes(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fileAndUpdate(t, func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }, "filed here", "")
	fileAndUpdate(t, func(tool string, args map[string]any) map[string]any { return call(t, pr.pl, "mempalace_"+tool, args) }, "filed here", "edited on the primary")
	p.save(t)
	c := config(t, p, pr)
	dry := run(t, c, Options{DryRun: true})
	rep := run(t, c, Options{})
	if len(dry.Mismatches) != len(rep.Mismatches) || dry.Skipped[Drawers] != rep.Skipped[Drawers] || dry.Pending[Drawers] != rep.Sent[Drawers] {
		t.Fatalf("dry run: to send %v, skipped %v, mismatches %+v; the join: sent %v, skipped %v, mismatches %+v", dry.Pending, dry.Skipped, dry.Mismatches, rep.Sent, rep.Skipped, rep.Mismatches)
	}
}

// A never-updated drawer whose look-up by id gets no answer: the real
// join just sends it, so the dry run counts it to send; it listed it
// failed, "not sent: the next join looks again" (the review of dcc3bb4).
func TestJoinDryRunCountsADrawerItCouldNotLookUpAsToSend(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	fileAndUpdate(t, func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }, "only here", "")
	p.save(t)
	c := config(t, p, pr)
	proxy := realpalace.NewProxy(t, pr.srv.URL())
	c.URL = proxy.URL
	for range 4 { // each read and its one resend, the batch and the drawer alone
		proxy.Drop("mempalace_get_drawers", "mempalace_get_drawer")
	}
	dry := run(t, c, Options{DryRun: true})
	if dry.Pending[Drawers] != 1 || len(dry.Failed) != 0 {
		t.Fatalf("dry run: to send %v, failed %+v; want the drawer to send, as the real run sends it", dry.Pending, dry.Failed)
	}
}
