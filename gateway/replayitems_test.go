package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// checkpointAfterDelete is the replay tester's sequence with a checkpoint:
// device desk files a drawer through its edge, an admin deletes it on the
// primary, and desk checkpoints the same words beside a new item. Its
// local palace lists the first among the checkpoint's duplicates; the op
// is returned once done, with the deleted drawer's id and the new one's.
func checkpointAfterDelete(t *testing.T, g *gw, s *mcp.ClientSession, palace string, onPrimary func(string) bool) (gone, fresh string, o outbox.Op) {
	t.Helper()
	old := map[string]any{"wing": "shared", "room": "gone", "content": "Desk secret token pasted by mistake: hunter2."}
	gone, _ = edgeCall(t, s, "add_drawer", old)["drawer_id"].(string)
	waitUntil(t, "the drawer on the primary", func() bool { return onPrimary(gone) })
	if res, rpc, _ := g.call(g.tokens[adminOf(g)], "delete_drawer", map[string]any{"drawer_id": gone}); rpc != nil || res["success"] != true {
		t.Fatalf("the admin's delete: %v %v", res, rpc)
	}
	item := map[string]any{"wing": "shared", "room": "plans", "content": "Quarterly roadmap: migrate the billing cluster to ARM machines by March."}
	fresh = catalogue.DrawerID("shared", "plans", item["content"].(string))
	cp := edgeCall(t, s, "checkpoint", map[string]any{"items": []any{old, item}})
	op, _ := cp["edge"].(map[string]any)["op_id"].(string)
	if dups, _ := cp["duplicates"].([]any); len(dups) != 1 || op == "" {
		t.Fatalf("the local palace's checkpoint answer: %v", cp)
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	o = settledOp(t, ob, op, "the checkpoint's send settled")
	return gone, fresh, o
}

// wantItemNotFiled fails unless the checkpoint op is done, its new item
// filed on the primary, the deleted one not, the trash still saying
// deleted, and the gateway's answer naming the item it did not file.
func wantItemNotFiled(t *testing.T, g *gw, gone, fresh string, o outbox.Op, onPrimary func(string) bool) {
	t.Helper()
	if onPrimary(gone) {
		t.Fatal("the edge's checkpoint filed again on the primary what an admin deleted there")
	}
	if o.State != outbox.Done || !onPrimary(fresh) {
		t.Fatalf("the checkpoint's new item is not filed: %s %s", o.State, o.Error)
	}
	wantStillDeleted(t, g, gone)
	for _, want := range []string{"deleted on the primary", "operator can restore it", ruleReplayDeleted.String(), "hunter2"} {
		if !strings.Contains(string(o.Result), want) {
			t.Errorf("the gateway's answer does not say which item it did not file (%q): %s", want, o.Result)
		}
	}
}

// toolNotes is what the edge adds to the agent's next tool answer after
// the answer itself (its notes), a list_wings of desk's own.
func toolNotes(t *testing.T, s *mcp.ClientSession) string {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "mempalace_list_wings", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range res.Content[min(1, len(res.Content)):] {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

// wantToldLeftOut fails unless the agent's next tool answer tells it, in
// one line, that checkpoint o was shared without the deleted item (its
// drawer gone), and the answer after it does not tell it again.
func wantToldLeftOut(t *testing.T, s *mcp.ClientSession, gone string, o outbox.Op) {
	t.Helper()
	note := toolNotes(t, s)
	for _, want := range []string{"checkpoint " + o.Short() + " was shared without 1 of its 2 items", "an admin deleted them on the primary", gone, "this devbox's palace only", "devbox-config edge status"} {
		if !strings.Contains(note, want) {
			t.Errorf("the next tool answer's note lacks %q:\n%q", want, note)
		}
	}
	if n := strings.Count(strings.TrimSpace(note), "\n"); n != 0 || strings.Contains(note, "refused") {
		t.Errorf("the note is %d lines, or tells of a refused write:\n%s", n+1, note)
	}
	if again := toolNotes(t, s); strings.Contains(again, o.Short()) {
		t.Errorf("the checkpoint's left-out item is told again: %s", again)
	}
}

// A checkpoint's item its local palace listed as a duplicate of the very
// drawer it would file is a replay of that copy, as an add_drawer
// answered already_exists is: the gateway does not file it again when an
// admin deleted it on the primary, files the checkpoint's other items,
// and says which it did not file (before, the checkpoint went unmarked
// and the primary filed the deleted drawer again for everyone). The agent
// is told on its next tool answer, once, and at the next session start
// (before, the answer sat in the outbox alone).
func TestAnEdgesCheckpointDoesNotRefileWhatAnAdminDeleted(t *testing.T) {
	t.Parallel()
	g, s, palace, onPrimary := deskBehindTheGateway(t)
	gone, fresh, o := checkpointAfterDelete(t, g, s, palace, onPrimary)
	wantItemNotFiled(t, g, gone, fresh, o, onPrimary)
	wantToldLeftOut(t, s, gone, o)
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	if st, err := ob.Stats(context.Background()); err != nil || len(st.LeftOut) != 1 || st.LeftOut[0].ID != o.ID || !strings.Contains(string(st.LeftOut[0].Error), gone) {
		t.Errorf("edge status's checkpoints with items left out: %v %v", st.LeftOut, err)
	}
	in := edgeAt(t, g.http.URL+"/mcp", g.tokens["desk-9b21"], palace).InitializeResult().Instructions
	for _, want := range []string{"checkpoint " + o.Short() + " was shared without 1 of its 2 items", gone, "session starts"} {
		if !strings.Contains(in, want) {
			t.Errorf("the next session's instructions lack %q:\n%s", want, in)
		}
	}
	if !slices.ContainsFunc(g.auditLog(), func(e Entry) bool {
		return e.Tool == "mempalace_checkpoint" && e.Decision == VerdictAllow && e.Rule == ruleReplayDeleted
	}) {
		t.Errorf("no checkpoint audit line with rule %s: %s", ruleReplayDeleted, fmtJSON(g.auditLog()))
	}
	item := map[string]any{"wing": "shared", "room": "r", "content": "x"}
	for _, bad := range []any{[]any{1}, []any{-1}, "0", []any{0, 0}} {
		if _, rpc := g.withMeta(t, g.tokens["desk-9b21"], "checkpoint", map[string]any{"items": []any{item}}, map[string]any{origin.ReplayItemsKey: bad}); rpc == nil || rpc["code"] != float64(-32602) {
			t.Errorf("replay items %v: %v", bad, rpc)
		}
	}
}

// Against real MemPalace 3.11.0 (serve behind the gateway, a real
// mempalace-mcp as desk's local palace): 3.11.0 lists the same words
// among the checkpoint's duplicates, the edge names that item a replay,
// and the primary files the new item but not the admin's deleted drawer;
// the trash still says deleted; the agent's next tool answer says so.
func TestRealAnEdgesCheckpointDoesNotRefileWhatAnAdminDeleted(t *testing.T) {
	g, s, dir, onPrimary := realDeskBehindTheGateway(t)
	gone, fresh, o := checkpointAfterDelete(t, g, s, dir, onPrimary)
	wantItemNotFiled(t, g, gone, fresh, o, onPrimary)
	wantToldLeftOut(t, s, gone, o)
}

// A resend of the checkpoint (its op id again: the ledger answers it from
// its record) is checked again and answered alike: the item left out is
// listed both times, and neither send files it.
func TestAResentCheckpointIsAnsweredAlike(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	g.withLedger()
	desk := g.tokens["desk-9b21"]
	old := map[string]any{"wing": "shared", "room": "gone", "content": "a planted note"}
	id := filedThenDeleted(t, g, old)
	args := map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "plans", "content": "a new plan"}, old}}
	meta := map[string]any{ledger.MetaKey: strings.Repeat("c1", 32), origin.ReplayItemsKey: []any{1}}
	var answers []string
	for range 2 {
		res, rpc := g.withMeta(t, desk, "checkpoint", args, meta)
		errs, _ := res["errors"].([]any)
		if rpc != nil || len(errs) != 1 || !strings.Contains(fmtJSON(errs), "deleted on the primary") {
			t.Fatalf("a checkpoint replaying a deleted drawer: %v %v", res, rpc)
		}
		answers = append(answers, fmtJSON(errs))
	}
	if answers[0] != answers[1] {
		t.Errorf("the resend's answer differs:\n%s\n%s", answers[0], answers[1])
	}
	if g.primary.Dump().Drawers[id] != nil || g.primary.Dump().Drawers[catalogue.DrawerID("shared", "plans", "a new plan")] == nil {
		t.Fatal("the checkpoint filed the deleted drawer again, or not its new item")
	}
}

// A checkpoint with no replay mark from the device that wrote a drawer an
// admin deleted does not file it again either (the writer deleting its
// local copy and checkpointing the words: attack38 B2 through a
// checkpoint); its other items are filed, and another device's checkpoint
// of the same words files it.
func TestAWritersCheckpointDoesNotRefileWhatAnAdminDeleted(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	desk, laptop := g.tokens["desk-9b21"], g.tokens["laptop-7f3a"]
	old := map[string]any{"wing": "shared", "room": "gone", "content": "a planted note"}
	id := filedThenDeleted(t, g, old)
	args := map[string]any{"items": []any{map[string]any{"wing": "shared", "room": "plans", "content": "a new plan"}, old}}
	res, rpc, _ := g.call(desk, "checkpoint", args)
	if errs, _ := res["errors"].([]any); rpc != nil || len(errs) != 1 || !strings.Contains(fmtJSON(errs), "this device wrote it") {
		t.Fatalf("the writer's checkpoint of the deleted words: %v %v", res, rpc)
	}
	if g.primary.Dump().Drawers[id] != nil || g.primary.Dump().Drawers[catalogue.DrawerID("shared", "plans", "a new plan")] == nil {
		t.Fatal("the writer's checkpoint filed the deleted drawer again, or not its new item")
	}
	if res, rpc, _ := g.call(laptop, "checkpoint", map[string]any{"items": []any{old}}); rpc != nil || len(fmt.Sprint(res["errors"])) > len("[]") || g.primary.Dump().Drawers[id] == nil {
		t.Errorf("another device's checkpoint of the same words: %v %v, want it filed", res, rpc)
	}
}
