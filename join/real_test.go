package join

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Issue 26, point 4, against real MemPalace 3.11.0 on both sides: a
// palace holding the same diary text twice puts both entries on the
// primary, --verify all passes, and a second join sends none.
func TestRealJoinSendsEveryEqualDiaryEntry(t *testing.T) {
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, realpalace.DiaryEntry("opencode", "standup: nothing new"), realpalace.DiaryEntry("opencode", "standup: nothing new"),
		realpalace.DiaryEntry("opencode", "a one-off"), realpalace.Drawer("project", "notes", "a note"), realpalace.Fact("alice", "works_on", "devbox", "", ""))
	s.Stop()
	primary := realpalace.New(t).Serve(t, "tok-real-join")
	cfg := Config{URL: primary.URL, Token: func() string { return "tok-real-join" }, Child: local.MCPCommand(), ChildEnv: local.Env(),
		Palace: local.Dir, Home: local.Home, Agent: "opencode", Label: "lab", Timeout: 30 * time.Second, ChildStderr: io.Discard}
	count := func() int {
		res := primary.MustCall(t, "mempalace_list_drawers", map[string]any{"wing": "wing_opencode", "room": "diary", "limit": 100})
		n := 0
		rows, _ := res["drawers"].([]any)
		for _, x := range rows {
			if _, sfx, ok := catalogue.DiaryEntryID(x.(map[string]any)["drawer_id"].(string)); ok && sfx == catalogue.EntrySuffix("standup: nothing new") {
				n++
			}
		}
		return n
	}
	rep, err := Run(context.Background(), cfg, Options{Verify: All})
	if err != nil || !rep.OK() {
		t.Fatalf("join: %v %+v", err, rep)
	}
	if n := count(); n != 2 || rep.Sent[Diaries] != 3 {
		t.Fatalf("the primary holds %d of the 2 equal entries (sent %v)", n, rep.Sent)
	}
	rep, err = Run(context.Background(), cfg, Options{Verify: All})
	if err != nil || !rep.OK() || rep.Sent[Diaries] != 0 || count() != 2 {
		t.Fatalf("a second join: %v sent %v, the primary holds %d; %+v", err, rep.Sent, count(), rep)
	}
}
