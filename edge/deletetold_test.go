package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// A device that is not admin deletes a drawer only the primary holds:
// its delete is not sent, the drawer is hidden from this device's reads
// and stays on the primary. The answer says so, and that an admin device
// can delete it there: before, it was MemPalace's "Drawer not found",
// success false, while the drawer had vanished from this device's reads
// (outside tester, attack16 f8).
func TestANonAdminDeleteOfAPrimaryOnlyDrawerSaysWhatHappened(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := routerUnderTest(t)
	primary.device = deviceinfo.Info{ID: "nar-03", Trash: true, DeleteCap: 10}
	id := sharedDrawer(t, primary, "shared", "ops doc for nar to delete")
	m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	msg := fmt.Sprint(m["message"])
	if m["success"] != true || strings.HasPrefix(fmt.Sprint(m["error"]), "Drawer not found") {
		t.Errorf("answered %s, want success: the drawer is hidden here", mustJSON(m))
	}
	for _, want := range []string{"hidden from this device's reads", "stays on the primary", "not admin", "an admin device can delete it", "edge status"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the answer's message lacks %q: %s", want, msg)
		}
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("queued: %+v", ops)
	}
	if ts, _ := ob.Tombstones(context.Background()); len(ts) != 1 {
		t.Errorf("tombstones %+v, want the drawer's", ts)
	}
}

// An admin device deletes a drawer, then deletes it again once the first
// delete reached the primary: the answer says it is already deleted, not
// that the local palace holds no drawers yet (a palace that never held
// one: outside tester, attack16 f5) nor a bare "Drawer not found".
func TestASecondDeleteSaysAlreadyDeleted(t *testing.T) {
	t.Parallel()
	for _, empty := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty local palace %v", empty), func(t *testing.T) {
			t.Parallel()
			e, _, primary, _ := adminRouter(t)
			if empty {
				e.localServer, e.cfg.Palace = emptyLocal{}, t.TempDir()
			}
			id := sharedDrawer(t, primary, "shared", "eve wrote this runbook step")
			if m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
				t.Fatalf("the first delete: %s", mustJSON(m))
			}
			aroundTheEdge(t, primary, "mempalace_delete_drawer", map[string]any{"drawer_id": id}) // the queued delete, sent
			m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
			if s := mustJSON(m); m["success"] == true || !strings.Contains(s, "already deleted") || strings.Contains(s, "no drawers yet") {
				t.Errorf("the second delete: %s", s)
			}
		})
	}
}

// aroundTheEdge calls a tool on the in-process primary, around the edge.
func aroundTheEdge(t *testing.T, primary *inProcess, tool string, args map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if _, err := primary.pl.Handle(wire.Request("x", "tools/call", b)); err != nil {
		t.Fatal(err)
	}
}

// A device that is not admin deletes a drawer the primary holds (the
// primary keeps it: an operator restored it, or the delete was never
// sent). get_drawer and get_drawers of it say it is hidden by this
// device's own delete and how to show it again, not "Drawer not found",
// which reads as gone from the fleet (outside tester, attack35 F8).
func TestAGetOfADrawerThisDeviceDeletedSaysItIsHidden(t *testing.T) {
	t.Parallel()
	e, _, primary, _ := routerUnderTest(t)
	primary.device = deviceinfo.Info{ID: "nar-03", Trash: true, DeleteCap: 10}
	id := sharedDrawer(t, primary, "shared", "ops doc the operator restored")
	if m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id}); m["success"] != true {
		t.Fatalf("the delete: %s", mustJSON(m))
	}
	one := routed(t, e, "mempalace_get_drawer", map[string]any{"drawer_id": id})
	many := routed(t, e, "mempalace_get_drawers", map[string]any{"drawer_ids": []any{id}})
	slots, _ := many["results"].([]any)
	if len(slots) != 1 {
		t.Fatalf("get_drawers answered %s", mustJSON(many))
	}
	for name, msg := range map[string]string{"get_drawer": fmt.Sprint(one["error"]), "get_drawers": fmt.Sprint(slots[0].(map[string]any)["error"])} {
		if strings.HasPrefix(msg, "Drawer not found") {
			t.Errorf("%s answers %q, want it hidden by this device's delete", name, msg)
		}
		for _, want := range []string{"hidden by this device's own delete", "the primary may still hold it", "add_drawer its content"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s's error lacks %q: %s", name, want, msg)
			}
		}
	}
}

// An admin device deletes, with the primary down, a drawer its local
// palace never held: the delete stays local (deletes are sent only while
// the primary is up), and the answer says to delete it again once the
// primary is back, not that "an admin device can delete it there" (it is
// one: outside tester, attack63 F3).
func TestAnAdminDeleteWhileThePrimaryIsDownSaysToDeleteAgain(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := adminRouter(t)
	id := sharedDrawer(t, primary, "shared", "eve's step, deleted while the primary is down")
	primary.down = true
	m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	msg := fmt.Sprint(m["message"])
	if !strings.Contains(msg, "delete it again once the primary is back") || strings.Contains(msg, "an admin device can delete it") {
		t.Errorf("the answer: %s", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("queued: %+v", ops)
	}
}

// An admin device deletes another device's diary entry by the id the
// primary lists it under: the edge does not send it (it sends a diary
// entry's delete only for this device's own write), and the answer tells
// the admin how to delete it there, not that "an admin device can delete
// it there" (it is one: outside tester, attack118 F5).
func TestAnAdminDeleteOfAnotherDevicesDiaryEntrySaysHow(t *testing.T) {
	t.Parallel()
	e, _, primary, ob := adminRouter(t)
	entry := primaryTool(t, primary, "mempalace_diary_write", map[string]any{"agent_name": "eve", "entry": "eve's standup, written on another device"})
	id, _ := entry["entry_id"].(string)
	if id == "" {
		t.Fatalf("the primary's diary_write: %v", entry)
	}
	m := routed(t, e, "mempalace_delete_drawer", map[string]any{"drawer_id": id})
	msg := fmt.Sprint(m["message"])
	if !strings.Contains(msg, "sent to the gateway itself, not through an edge") || strings.Contains(msg, "an admin device can delete it") {
		t.Errorf("the answer: %s", mustJSON(m))
	}
	if ops := pending(t, ob); len(ops) != 0 {
		t.Errorf("queued: %+v", ops)
	}
}
