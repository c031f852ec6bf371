package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/trash"
)

// A diary entry whose kept delete never happened (unconfirmed), its text
// changed since by an update_drawer, is put back in place by a restore,
// and the text it replaces is kept in the trash (review28b F7). Before,
// the restore found the id there, said it was already there, and the
// entry kept the update's text. While its delete is still in flight
// (pending or unconfirmed, recent) the restore is refused, and the entry
// is not recorded restored; past any send's bound, it is. Before, an
// unconfirmed one was restored and then removed by its delete landing
// (review29 F5).
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
	if rs, err := g.restorer(t).Restore(ctx, []string{fmt.Sprint(del)}); err != nil || !errors.Is(rs[0].Err, errDeleteInFlight) {
		t.Fatalf("restore while the unconfirmed delete may still reach the primary: %+v %v, want refused (review29 F5)", rs, err)
	}
	g.advance(writeBound + time.Minute) // unconfirmed past any send's bound: never made
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
	g.advance(writeBound + time.Minute)
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

// A restore refused because the diary entry's delete may still be in
// flight leaves that delete's op as the op-id ledger held it (in doubt),
// not recorded as applied by a restore that restored nothing (review29
// F6: it was settled "the operator restored what this op removed" first).
func TestARestoreRefusedInFlightSettlesNoOp(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	ctx := context.Background()
	l, err := ledger.Open(filepath.Join(t.TempDir(), ledger.FileName), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	call := ledger.Call{Device: "desk-9b21", OpID: opOf('d'), Tool: "mempalace_delete_drawer", ArgsDigest: "d"}
	lost := func(context.Context) (ledger.Answer, error) {
		return ledger.Answer{Status: 502, MaybeApplied: true}, nil
	}
	if _, _, err := l.Do(ctx, call, lost); err != nil {
		t.Fatal(err)
	}
	w, rpc, _ := g.call(g.tokens["desk-9b21"], "diary_write", map[string]any{"agent_name": "pi", "entry": "the clock was the culprit", "topic": "ci"})
	got, _, _ := g.call(g.tokens["desk-9b21"], "get_drawer", map[string]any{"drawer_id": str(w["entry_id"])})
	if rpc != nil || got == nil {
		t.Fatalf("diary_write: %v %v", w, rpc)
	}
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bin.Keep(ctx, trash.Delete{Device: call.Device, OpID: call.OpID, Tool: "delete_drawer", Drawers: []trash.Drawer{keptDrawer("delete_drawer", got, "")}}); err != nil {
		t.Fatal(err)
	}
	r := g.restorer(t)
	r.Ledger = l
	if rs, err := r.Restore(ctx, []string{str(w["entry_id"])}); err != nil || !errors.Is(rs[0].Err, errDeleteInFlight) {
		t.Fatalf("restore while the delete is in flight: %+v %v, want refused", rs, err)
	}
	if _, outcome, err := l.Do(ctx, call, lost); !errors.Is(err, ledger.ErrInDoubt) {
		t.Errorf("the delete's op after the refused restore: %v %v, want still in doubt", outcome, err)
	}
}

// A diary entry whose delete a gateway process that has since been killed
// kept (pending: the request swallowed, the answer never recorded) is
// restored at once, as docs/trash.md says: the op's ledger claim is seen
// as ended by its process's lock, as the ledger sees it, and the edge's
// resend is answered from the ledger, deleting nothing. Before, it was
// refused "still in flight" for the write bound, 11½ minutes, while the
// resend could delete the entry (attack94 F1).
func TestADiaryRestoreAfterAKilledGatewayIsNotRefused(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), ledger.FileName)
	killed, err := ledger.Open(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killed.Close() })
	call := ledger.Call{Device: "desk-9b21", OpID: opOf('e'), Tool: "mempalace_delete_drawer", ArgsDigest: "e"}
	forwarding, stop := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() {
		_, _, err := killed.Do(ctx, call, func(context.Context) (ledger.Answer, error) { // the delete, held on its way
			close(forwarding)
			<-stop
			return ledger.Answer{Status: 502, MaybeApplied: true}, nil
		})
		if err != nil {
			t.Error(err)
			close(forwarding)
		}
	})
	<-forwarding
	os.RemoveAll(path + ".live") // its lock gone, as a killed process's is (ledger's live.go)
	l, err := ledger.OpenOptions(path, ledger.Options{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(ledger.DefaultStaleGrace) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	w, rpc, _ := g.call(g.tokens["desk-9b21"], "diary_write", map[string]any{"agent_name": "pi", "entry": "kept by a killed gateway", "topic": "ci"})
	got, _, _ := g.call(g.tokens["desk-9b21"], "get_drawer", map[string]any{"drawer_id": str(w["entry_id"])})
	if rpc != nil || got == nil {
		t.Fatalf("diary_write: %v %v", w, rpc)
	}
	bin, err := g.srv.Trash()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bin.Keep(ctx, trash.Delete{Device: call.Device, OpID: call.OpID, Tool: "delete_drawer", Drawers: []trash.Drawer{keptDrawer("delete_drawer", got, "")}}); err != nil {
		t.Fatal(err)
	}
	r := g.restorer(t)
	r.Ledger = l
	if rs, err := r.Restore(ctx, []string{str(w["entry_id"])}); err != nil || rs[0].Err != nil || !rs[0].Already {
		t.Fatalf("restore after the gateway that kept the delete was killed: %v (%v), want already there, at once", err, rs[0].Err)
	}
	if _, outcome, err := l.Do(ctx, call, func(context.Context) (ledger.Answer, error) {
		t.Error("the edge's resend was forwarded: it would delete the restored entry")
		return ledger.Answer{}, nil
	}); err != nil || outcome != ledger.OutcomeReplayed {
		t.Errorf("the edge's resend: %v %v, want answered from the ledger", outcome, err)
	}
}
