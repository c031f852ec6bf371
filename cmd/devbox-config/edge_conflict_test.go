package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed"
)

// edge outbox drop of an update refused as changed on the primary says
// this device's palace takes the primary's text (before: only "dropped").
func TestDropOfAChangedOnPrimaryEditSaysThePalaceTakesTheirs(t *testing.T) {
	op, _ := deadThenTold(t, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"mine"}`)},
		&outbox.RPCError{Code: ledger.CodeChangedOnPrimary, Message: "devbox-config gateway: drawer drawer_w_r_1 changed on the primary since this edit was made (last written by device desk-9b21 at 2026-12-06T16:31:46Z)"})
	var out, errb bytes.Buffer
	if code := run([]string{"edge", "outbox", "drop", op.Short()}, &out, &errb); code != 0 || !strings.Contains(out.String(), "this device's palace takes the primary's text of the drawer (at once if an edge runs on this palace, else at the edge's next start)") {
		t.Errorf("drop: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

// closing answers every call as a gateway answers the second end of a
// fact: success, already_closed, and a note.
type closing struct{}

func (closing) Up() bool { return true }
func (closing) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	return map[string]any{"success": true, "already_closed": "2026-06-01", "note": "devbox-config gateway: this fact was already closed on the primary (ended 2026-06-01) before this invalidate arrived; nothing changed: its end stays 2026-06-01, not 2026-07-01"}, nil
}

// edge status lists a kg_invalidate whose fact the primary held closed
// already (before: only edge outbox list --all showed it).
func TestEdgeStatusListsAnEndOfAFactClosedAlready(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op, _ := s.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_invalidate", Payload: []byte(`{"subject":"svc","predicate":"runs_on","object":"hostA","ended":"2026-07-01"}`)})
	(&outbox.Flusher{S: s, P: closing{}}).Drain(ctx)
	s.Close()
	var out, errb bytes.Buffer
	run([]string{"edge", "status"}, &out, &errb)
	if want := "CLOSED     " + op.Short() + " mempalace_kg_invalidate, done: this fact was already closed on the primary (ended 2026-06-01)"; !strings.Contains(out.String(), want) {
		t.Errorf("edge status lacks %q:\n%s%s", want, out.String(), errb.String())
	}
}

// edge status's DEAD line of an edit refused as changed on the primary
// names who changed it and when, and of one whose drawer the operator
// restored under a new id, that id; each says its own fix, not "fix the
// cause, then retry" (attack66 N4: both cut at 100 characters, before
// the part that matters, and told to retry).
func TestEdgeStatusSaysEachDeadKindsOwnFix(t *testing.T) {
	long := "drawer_shared_c66_34dfe2bc809be78a6f6cef8e"
	changed, said := deadThenTold(t, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"` + long + `","content":"mine"}`)},
		&outbox.RPCError{Code: ledger.CodeChangedOnPrimary, Message: "devbox-config gateway: drawer " + long + " changed on the primary since this edit was made (last written by device desk-9b21 at 2026-12-06T16:31:46Z): its text there is not the one this device's palace held"})
	for _, want := range []string{"last written by device desk-9b21 at 2026-12-06T16:31:46Z", "`devbox-config edge outbox retry " + changed.Short() + "` overwrites the primary's text", "`drop " + changed.Short() + "` keeps it"} {
		if !strings.Contains(said["edge status"], want) {
			t.Errorf("edge status of a changed-on-primary edit lacks %q:\n%s", want, said["edge status"])
		}
	}
	if strings.Contains(said["edge status"], "fix the cause") {
		t.Errorf("a changed-on-primary edit is told to fix the cause:\n%s", said["edge status"])
	}
	restored, said := deadThenTold(t, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_shared_c63_9d6b00000000000000000000","content":"mine"}`)},
		&outbox.RPCError{Code: ledger.CodeDeletedOnPrimary, Message: "devbox-config gateway: restored by the operator as drawer_shared_c63_ad1130000000000000000000: update drawer_shared_c63_ad1130000000000000000000 (this id, drawer_shared_c63_9d6b00000000000000000000, is not on the primary: an admin deleted it); nothing was written"})
	for _, want := range []string{"restored by the operator as drawer_shared_c63_ad1130000000000000000000", "make the edit again on the new id, then `devbox-config edge outbox drop " + restored.Short() + "`"} {
		if !strings.Contains(said["edge status"], want) {
			t.Errorf("edge status of an edit of a drawer restored under a new id lacks %q:\n%s", want, said["edge status"])
		}
	}
	for _, s := range said {
		if strings.Contains(s, "fix the cause") {
			t.Errorf("told to fix the cause:\n%s", s)
		}
	}
}

// edge status's DEAD line of a delete refused as changed on the primary
// says a retry deletes the primary's text and a drop keeps theirs, and
// an update in doubt that a retry overwrites whatever the primary holds
// now (attack68 F3: the delete was told the update's "retry overwrites
// …, drop keeps it (this device's palace takes it)", the in-doubt edit
// only "retry sends it again").
func TestEdgeStatusSaysADeadDeletesAndAnInDoubtEditsFix(t *testing.T) {
	del, said := deadThenTold(t, outbox.Write{Name: "mempalace_delete_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1"}`)},
		&outbox.RPCError{Code: ledger.CodeChangedOnPrimary, Message: "devbox-config gateway: drawer drawer_w_r_1 changed on the primary since this delete was made (last written by device desk-9b21 at 2026-12-06T16:31:46Z)"})
	for _, want := range []string{"`devbox-config edge outbox retry " + del.Short() + "` deletes the primary's text", "`drop " + del.Short() + "` keeps theirs (this device reads it again)"} {
		if !strings.Contains(said["edge status"], want) {
			t.Errorf("edge status of a dead delete lacks %q:\n%s", want, said["edge status"])
		}
	}
	if s := said["edge status"]; strings.Contains(s, "overwrites") || strings.Contains(s, "palace takes it") {
		t.Errorf("a dead delete is told an update's fix:\n%s", s)
	}
	up, said := deadThenTold(t, outbox.Write{Name: "mempalace_update_drawer", Payload: []byte(`{"drawer_id":"drawer_w_r_1","content":"mine"}`)},
		&outbox.RPCError{Code: ledger.CodeInDoubt, Message: "devbox-config gateway: this op may have landed"})
	if want := "IN DOUBT   " + up.Short() + " mempalace_update_drawer: it may have landed and nothing can look it up: devbox-config edge outbox retry " + up.Short() + " sends it again (overwriting whatever the primary holds now"; !strings.Contains(said["edge status"], want) {
		t.Errorf("edge status of an edit in doubt lacks %q:\n%s", want, said["edge status"])
	}
}

// A dead replay of a drawer the operator purged from the gateway's trash
// never lands (no restore brings it back, and the gateway refuses its id
// for good): edge status and edge flush offer drop alone, for the
// gateway's words to a device and to an admin. Before, the generic "fix
// the cause, then retry (or drop)" put the one useful action second, in
// brackets (outside tester, attack78 F5).
func TestADeadReplayOfAPurgedDrawerIsToldToBeDropped(t *testing.T) {
	for _, words := range []string{
		"devbox-config gateway: this drawer was deleted on the primary, and the gateway's operator purged it for good; this device's palace held it before the delete (wing wing_bravo; nothing was written)",
		"devbox-config gateway: this drawer was deleted on the primary, and the operator purged it from the gateway's trash: drawer_wing_bravo_rot_1 (wing_bravo/rot), removed by delete 2 (delete_drawers by alpha), purged 2026-12-07T01:00:00Z; no restore brings it back, and this device's palace held it before the delete; nothing was written",
	} {
		op, said := deadThenTold(t, outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"wing_bravo","room":"rot","content":"rotation batch item 4"}`)},
			&outbox.RPCError{Code: ledger.CodeDeletedOnPrimary, Message: words})
		for cmd, got := range said {
			if !strings.Contains(got, "`devbox-config edge outbox drop "+op.Short()+"`") || strings.Contains(got, "retry") {
				t.Errorf("%s of a dead replay of a purged drawer, want drop alone:\n%s", cmd, got)
			}
		}
	}
}

// holding answers every call as a gateway answers a kg_add of a fact
// another device's current fact holds: success, held_by, and a note.
type holding struct{}

func (holding) Up() bool { return true }
func (holding) Call(context.Context, string, json.RawMessage) (map[string]any, error) {
	return map[string]any{"success": true, "held_by": "alpha", "valid_from_kept": "2026-12-01", "note": "devbox-config gateway: the primary held this fact current already, device alpha's (label alpha), from 2026-12-01, before this add arrived: nothing was filed, so this add's dates (from 2026-11-15 to -) were not kept"}, nil
}

// edge status lists a kg_add the gateway held by another device's fact
// (attack99 F1: nothing listed it; its agent was answered success), and a
// kg_supersede it held by another current value (attack105 F2).
func TestEdgeStatusListsAnAddOfAFactHeldAlready(t *testing.T) {
	palace := filepath.Join(t.TempDir(), "palace")
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "tok"})
	t.Setenv("MEMPALACE_PALACE_PATH", palace)
	t.Setenv("MEMPALACE_REMOTE_URL", srv.URL())
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op, _ := s.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_add", Payload: []byte(`{"subject":"service_x","predicate":"runs_on","object":"host_1","valid_from":"2026-11-15"}`)})
	sup, _ := s.Enqueue(ctx, outbox.Write{Name: "mempalace_kg_supersede", Payload: []byte(`{"subject":"service_y","predicate":"runs_on","old_object":"host_1","new_object":"host_3"}`)})
	(&outbox.Flusher{S: s, P: holding{}}).Drain(ctx)
	s.Close()
	var out, errb bytes.Buffer
	run([]string{"edge", "status"}, &out, &errb)
	for _, want := range []string{"NOT FILED  " + op.Short() + " mempalace_kg_add, done: the primary held this fact current already, device alpha's", "NOT FILED  " + sup.Short() + " mempalace_kg_supersede, done: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("edge status lacks %q:\n%s%s", want, out.String(), errb.String())
		}
	}
}
