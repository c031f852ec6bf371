package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/trash"
)

// A diary entry whose kept delete never happened (unconfirmed), its text
// changed since by an update_drawer, is put back in place by a restore,
// and the text it replaces is kept in the trash (review28b F7). Before,
// the restore found the id there, said it was already there, and the
// entry kept the update's text. While its delete is still in flight
// (pending, recent) the restore is refused, and the entry is not
// recorded restored; pending past any send's bound, it is.
func TestADiaryRestoreComparesTheEntrysText(t *testing.T) {
	t.Parallel()
	diaryRestoreCompares(t, newGW(t, devices))
}

// diaryRestoreCompares is TestADiaryRestoreComparesTheEntrysText through g.
func diaryRestoreCompares(t *testing.T, g *gw) {
	desk := g.tokens["desk-9b21"]
	ctx := context.Background()
	entry := func(text string) trash.Drawer {
		t.Helper()
		w, rpc, _ := g.call(desk, "diary_write", map[string]any{"agent_name": "pi", "entry": text, "topic": "ci"})
		got, _, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": str(w["entry_id"])})
		if rpc != nil || got == nil {
			t.Fatalf("diary_write: %v %v", w, rpc)
		}
		return keptDrawer("delete_drawer", got, "")
	}
	text := func(id string) string {
		got, _, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": id})
		return str(got["content"])
	}

	dr := entry("found the flaky test")
	g.keepUnmade(t, dr, trash.StateUnconfirmed)
	del := g.kept(t)[0].ID
	if _, rpc, _ := g.call(desk, "update_drawer", map[string]any{"drawer_id": dr.ID, "content": "rewritten after the delete was kept"}); rpc != nil {
		t.Fatal(rpc)
	}
	rs, err := g.restorer(t).Restore(ctx, []string{fmt.Sprint(del)})
	if err != nil || rs[0].Err != nil || rs[0].Already || rs[0].As != dr.ID || rs[0].Kept == 0 {
		t.Fatalf("restore of an entry rewritten since: %+v %v (want put back in place, the rewrite kept)", rs, err)
	}
	if got := text(dr.ID); got != "found the flaky test" {
		t.Errorf("the entry after the restore: %q, want the kept text", got)
	}
	if r, _, _ := g.call(desk, "diary_read", map[string]any{"agent_name": "pi"}); len(r["entries"].([]any)) != 1 {
		t.Errorf("diary_read after the restore: %v, want the one entry (no second copy)", r)
	}

	dr = entry("bisected it to the clock")
	g.keepUnmade(t, dr, trash.StateUnconfirmed)
	if rs, err := g.restorer(t).Restore(ctx, []string{dr.ID}); err != nil || rs[0].Err != nil || !rs[0].Already {
		t.Errorf("restore of an entry with its own text still there: %+v %v, want already there", rs, err)
	}

	dr = entry("the clock was the culprit")
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bin.Keep(ctx, trash.Delete{Device: "admin-0001", Tool: "delete_drawer", Drawers: []trash.Drawer{dr}}); err != nil {
		t.Fatal(err)
	}
	rs, err = g.restorer(t).Restore(ctx, []string{dr.ID})
	if err != nil || !errors.Is(rs[0].Err, errDeleteInFlight) || !strings.Contains(rs[0].Err.Error(), "restore again once it is settled") {
		t.Fatalf("restore while the delete is in flight: %+v %v, want refused", rs, err)
	}
	if k := g.kept(t)[0].Drawers[0]; k.RestoredAt != nil || k.RestoringAt != nil {
		t.Errorf("the trash's record after the refused restore: %+v, want neither restored nor taken", k)
	}
	g.advance(writeBound + time.Minute) // pending for good: the gateway stopped mid-delete
	if rs, err := g.restorer(t).Restore(ctx, []string{dr.ID}); err != nil || rs[0].Err != nil || !rs[0].Already {
		t.Errorf("restore once no gateway can be sending the delete: %+v %v, want already there", rs, err)
	}
}
