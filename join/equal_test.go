package join

import "testing"

// Issue 26, point 4, in join: a palace holding the same diary text twice
// (one standup each day) puts both on the primary, and a second join adds
// none. Before, join took two equal entries for one write and sent one,
// and --verify all passed.
func TestJoinSendsEveryEqualDiaryEntry(t *testing.T) {
	p, pr := newPalace(t), newPrimary(t)
	for range 2 {
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "standup: nothing new"})
	}
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "a one-off"})
	p.save(t)
	cfg := config(t, p, pr)
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() {
		t.Fatalf("join: %+v", rep)
	}
	if n := pr.pl.Dump().CountContent("standup: nothing new"); n != 2 {
		t.Fatalf("the primary holds %d of the 2 equal entries (sent %v)", n, rep.Sent)
	}
	rep = run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.Sent[Diaries] != 0 || pr.pl.Dump().CountContent("standup: nothing new") != 2 {
		t.Fatalf("a second join: sent %v, the primary holds %d", rep.Sent, pr.pl.Dump().CountContent("standup: nothing new"))
	}
}
