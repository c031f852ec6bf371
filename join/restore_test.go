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
