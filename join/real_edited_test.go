package join

import (
	"io"
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// attack99 F9, against real MemPalace 3.11.0 on both sides: two diary
// entries edited with update_drawer (one short, one longer than a
// list_drawers preview) are on the primary already, edited there too (the
// edge replicated the writes and the edits): the join sends neither
// again, only a third entry written with one edited text (equal entries
// are each a write), and a second join sends nothing. Before, the join
// counted the primary's entries by the hash in their ids, of the text
// they were filed with, and sent each edited entry a second time.
func TestRealJoinSendsNoEditedDiaryEntryTheEdgeReplicated(t *testing.T) {
	t.Parallel()
	short, lng := "entry EDITED offline", "online entry EDITED: "+long("the rest of the edit", 300) // past a 200-character preview
	write := func(c *realpalace.Client, text string) string {
		return str(c.MustCall(t, "mempalace_diary_write", map[string]any{"agent_name": "opencode", "entry": text}), "entry_id")
	}
	edit := func(c *realpalace.Client, text, edited string) {
		c.MustCall(t, "mempalace_update_drawer", map[string]any{"drawer_id": write(c, text), "content": edited})
	}
	local := realpalace.New(t)
	s := local.Stdio(t)
	edit(s.Client, "entry to edit offline", short)
	edit(s.Client, "online entry to edit", lng)
	write(s.Client, short)
	s.Stop()
	primary := realpalace.New(t).Serve(t, "tok-real-join")
	edit(primary.Client, "entry to edit offline", short)
	edit(primary.Client, "online entry to edit", lng)
	cfg := realConfig(local, primary)
	cfg.ChildStderr = io.Discard
	count := func(text string) int {
		res := primary.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "wing_opencode", "room": "diary", "limit": 100})
		n := 0
		rows, _ := res["drawers"].([]any)
		for _, x := range rows {
			got := primary.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": str(x.(map[string]any), "drawer_id")})
			if str(got, "content") == text {
				n++
			}
		}
		return n
	}
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.Sent[Diaries] != 1 || rep.Skipped[Diaries] != 2 || count(short) != 2 || count(lng) != 1 {
		t.Fatalf("join: sent %v skipped %v; the primary holds the short edit %d times (want 2), the long one %d (want 1); failed %+v mismatches %+v", rep.Sent, rep.Skipped, count(short), count(lng), rep.Failed, rep.Mismatches)
	}
	rep = run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.Sent[Diaries] != 0 || count(short) != 2 || count(lng) != 1 {
		t.Fatalf("a second join: sent %v; %+v", rep.Sent, rep)
	}
}
