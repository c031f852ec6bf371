package join

import (
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway"
)

// restoreDevices are a device that joins and an admin that deletes (a
// fresh slice each: issuing tokens records them in it).
func restoreDevices() []gateway.Device {
	return []gateway.Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"wing_*"}, Agents: []string{"opencode@desk"}},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
	}
}

// A drawer a join found deleted on the primary, which the operator then
// restores from the gateway's trash: the next join finds it there (skipped,
// verified), as operator.md says, not "deleted on the primary" forever.
func TestJoinFindsADrawerRestoredAfterAnEarlierJoinFoundItDeleted(t *testing.T) {
	t.Parallel()
	pr, url, tokens, restore := gatewayAndTrash(t, restoreDevices(), false, fakepalace.Options{})
	drawer := map[string]any{"wing": "wing_notes", "room": "r", "content": "a note the admin deleted"}
	p := newPalace(t)
	p.do(t, "add_drawer", drawer)
	p.save(t)
	id := gwCall(t, url, tokens["desk-9b21"], "add_drawer", drawer)["drawer_id"].(string)
	if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": id}); res["success"] != true {
		t.Fatalf("the admin's delete: %v", res)
	}
	cfg := config(t, p, pr)
	cfg.URL, cfg.Token = url, func() string { return tokens["desk-9b21"] }
	if rep := run(t, cfg, Options{Verify: All}); !rep.OK() || rep.DeletedOnPrimary[Drawers] != 1 {
		t.Fatalf("join: deleted %v sent %v failed %+v", rep.DeletedOnPrimary, rep.Sent, rep.Failed)
	}
	dry := cfg
	dry.Token = nil
	if rep := run(t, dry, Options{DryRun: true}); strings.Contains(strings.Join(rep.Notes, "\n"), "updated since") {
		t.Fatalf("a dry run without a token counts the deleted drawer as updated: %q", rep.Notes)
	}
	restore(id)
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.DeletedOnPrimary[Drawers] != 0 || rep.Skipped[Drawers] != 1 || rep.Verified != 1 || pr.pl.Dump().CountContent("a note the admin deleted") != 1 {
		t.Fatalf("a join after the restore: deleted %v skipped %v sent %v verified %d; failed %+v mismatches %+v", rep.DeletedOnPrimary, rep.Skipped, rep.Sent, rep.Verified, rep.Failed, rep.Mismatches)
	}
}

// Of four equal diary entries, two on the primary and one of them deleted
// by an admin: the first join skips one, counts one deleted and sends two.
// The operator restores the deleted one: the next join finds all four
// there, and --verify all checks each against a copy of its own.
func TestJoinFindsAnEqualDiaryEntryRestoredAfterAnEarlierJoinFoundItDeleted(t *testing.T) {
	t.Parallel()
	const text = "standup: same"
	pr, url, tokens, restore := gatewayAndTrash(t, restoreDevices(), false, fakepalace.Options{})
	entry := map[string]any{"agent_name": "opencode", "entry": text, "topic": "standup"}
	p := newPalace(t)
	for range 4 {
		p.do(t, "diary_write", entry)
	}
	p.save(t)
	var ids []string
	for range 2 {
		ids = append(ids, gwCall(t, url, tokens["desk-9b21"], "diary_write", entry)["entry_id"].(string))
	}
	if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": ids[0]}); res["success"] != true {
		t.Fatalf("the admin's delete: %v", res)
	}
	cfg := config(t, p, pr)
	cfg.URL, cfg.Token = url, func() string { return tokens["desk-9b21"] }
	if rep := run(t, cfg, Options{Verify: All}); !rep.OK() || rep.DeletedOnPrimary[Diaries] != 1 || rep.Sent[Diaries] != 2 {
		t.Fatalf("join: deleted %v sent %v failed %+v", rep.DeletedOnPrimary, rep.Sent, rep.Failed)
	}
	restore(ids[0])
	rep := run(t, cfg, Options{Verify: All})
	if n := pr.pl.Dump().CountContent(text); !rep.OK() || n != 4 || rep.DeletedOnPrimary[Diaries] != 0 || rep.Skipped[Diaries] != 4 || rep.Verified != 4 {
		t.Fatalf("a join after the restore: the primary holds %d; deleted %v skipped %v sent %v verified %d; failed %+v mismatches %+v", n, rep.DeletedOnPrimary, rep.Skipped, rep.Sent, rep.Verified, rep.Failed, rep.Mismatches)
	}
}

// attack118 F2: three equal diary entries an earlier join sent, one of
// them deleted on the primary by an admin since: the next join counts two
// skipped and one deleted (it counts the wing, as for one a join found
// deleted), sends nothing, and --verify calls none missing (it called all
// three on the primary and one missing, exit 1). The operator's restore
// brings it back: then all three are skipped.
func TestJoinCountsAnEntryDeletedAfterAnEarlierJoinSentIt(t *testing.T) {
	t.Parallel()
	const text = "standup: nothing new"
	pr, url, tokens, restore := gatewayAndTrash(t, restoreDevices(), false, fakepalace.Options{})
	entry := map[string]any{"agent_name": "opencode", "entry": text, "topic": "standup"}
	p := newPalace(t)
	for range 3 {
		p.do(t, "diary_write", entry)
	}
	p.save(t)
	cfg := config(t, p, pr)
	cfg.URL, cfg.Token = url, func() string { return tokens["desk-9b21"] }
	if rep := run(t, cfg, Options{}); !rep.OK() || rep.Sent[Diaries] != 3 {
		t.Fatalf("first join: sent %v failed %+v", rep.Sent, rep.Failed)
	}
	var id string
	for _, d := range pr.pl.Dump().Drawers {
		if d.Content == text {
			id = d.ID
		}
	}
	if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": id}); res["success"] != true {
		t.Fatalf("the admin's delete: %v", res)
	}
	for range 2 {
		rep := run(t, cfg, Options{Verify: All})
		if !rep.OK() || rep.Skipped[Diaries] != 2 || rep.DeletedOnPrimary[Diaries] != 1 || rep.Sent[Diaries] != 0 || rep.Verified != 2 || pr.pl.Dump().CountContent(text) != 2 {
			t.Fatalf("a join after the delete: skipped %v deleted %v sent %v verified %d; failed %+v mismatches %+v", rep.Skipped, rep.DeletedOnPrimary, rep.Sent, rep.Verified, rep.Failed, rep.Mismatches)
		}
	}
	restore(id)
	if rep := run(t, cfg, Options{Verify: All}); !rep.OK() || rep.Skipped[Diaries] != 3 || rep.DeletedOnPrimary[Diaries] != 0 || rep.Verified != 3 {
		t.Fatalf("a join after the restore: skipped %v deleted %v verified %d; mismatches %+v", rep.Skipped, rep.DeletedOnPrimary, rep.Verified, rep.Mismatches)
	}
}
