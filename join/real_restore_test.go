package join

import (
	"testing"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Against real MemPalace 3.11.0 serve behind the gateway: a drawer and one
// of three equal diary entries an admin deleted are counted deleted by a
// join; once the operator restores them from the trash (the drawer under
// its id, the entry as a new entry of the same text), the next join finds
// both there (skipped, --verify all clean) and sends nothing.
func TestRealJoinFindsWhatTheOperatorRestored(t *testing.T) {
	t.Parallel()
	const text = "standup: nothing new"
	drawer := realpalace.Drawer("wing_notes", "r", "a note the admin deleted")
	entry := realpalace.DiaryEntry("opencode", text)
	local := realpalace.New(t)
	s := local.Stdio(t)
	s.Seed(t, drawer, entry, entry, entry)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := realpalace.New(t).Serve(t, "tok-upstream-restore")
	url, tokens, restore := gatewayOver(t, restoreDevices(), false, srv.URL, srv.Token)
	id := gwCall(t, url, tokens["desk-9b21"], "add_drawer", drawer.Args)["drawer_id"].(string)
	var entries []string
	for range 2 {
		entries = append(entries, gwCall(t, url, tokens["desk-9b21"], "diary_write", entry.Args)["entry_id"].(string))
	}
	for _, d := range []string{id, entries[0]} {
		if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": d}); res["success"] != true {
			t.Fatalf("the admin's delete of %s: %v", d, res)
		}
	}
	cfg := realConfig(local, srv)
	cfg.URL, cfg.Token = url, func() string { return tokens["desk-9b21"] }
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.DeletedOnPrimary[Drawers] != 1 || rep.DeletedOnPrimary[Diaries] != 1 || rep.Sent[Diaries] != 1 || rep.Skipped[Diaries] != 1 {
		t.Fatalf("join: deleted %v sent %v skipped %v; failed %+v mismatches %+v", rep.DeletedOnPrimary, rep.Sent, rep.Skipped, rep.Failed, rep.Mismatches)
	}
	restore(id)
	restore(entries[0])
	rep = run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.DeletedOnPrimary[Drawers]+rep.DeletedOnPrimary[Diaries] != 0 || rep.Skipped[Drawers] != 1 || rep.Skipped[Diaries] != 3 || rep.Verified != 4 || primaryWrites(rep) != 0 {
		t.Fatalf("a join after the restore: deleted %v skipped %v sent %v verified %d calls %v; failed %+v mismatches %+v", rep.DeletedOnPrimary, rep.Skipped, rep.Sent, rep.Verified, rep.Calls, rep.Failed, rep.Mismatches)
	}
}
