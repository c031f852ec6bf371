package edge

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// notesOf is the text blocks a tool answer carries after its first (the
// answer itself): the edge's notes.
func notesOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content[min(1, len(res.Content)):] {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

// deadOps is the edge's outbox's dead ops.
func (h *harness) deadOps() []outbox.Op {
	h.t.Helper()
	ops, err := h.edge.outbox.List(context.Background(), 10, outbox.Dead)
	if err != nil {
		h.t.Fatal(err)
	}
	return ops
}

// A write the primary refuses for good is told to the agent that made
// it, which was answered "queued" and otherwise believes it shared: the
// operator removed the device's grant for the wing after the edge heard
// the old grants, the agent writes there, the gateway refuses it until
// it is dead. The agent's next tool answer carries one line naming the
// write and the primary's reason, once; a new session's initialize
// instructions say the outbox holds it. (The flusher's backoff is
// cleared as `edge flush` does, so the refusals come at once.)
func TestADeadWriteIsToldToTheAgent(t *testing.T) {
	t.Parallel()
	h, gw, _ := bobBehindAGateway(t, harnessOpts{}, "wing_bob", "wing_shared")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "plans", "content": "while granted"}); res.IsError {
		t.Fatalf("a granted write was refused: %s", refusalText(res))
	}
	h.drained()
	setWriteGrants(t, gw, "bob-02", "wing_bob")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "plans", "content": "on the old grants"}); res.IsError {
		t.Fatalf("a write the edge's grants allow was refused: %s", refusalText(res))
	}
	ctx := context.Background()
	h.eventually("the refused write dead", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		return len(h.deadOps()) == 1
	})
	if reason := string(h.deadOps()[0].Error); !strings.Contains(reason, "write globs do not match the target wing") {
		t.Fatalf("the dead op's reason: %s", reason)
	}

	_, res := h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "the next write"})
	note := notesOf(res)
	for _, want := range []string{"refused a write from this devbox for good: mempalace_add_drawer of wing_shared/plans", "(devbox-config gateway: bob-02 may not call mempalace_add_drawer (write globs do not match the target wing))", "devbox-config edge status"} {
		if !strings.Contains(note, want) {
			t.Errorf("the next tool answer's note lacks %q:\n%q", want, note)
		}
	}
	if n := strings.Count(strings.TrimSpace(note), "\n"); n != 0 {
		t.Errorf("the note is %d lines:\n%s", n+1, note)
	}
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "another write"}); strings.Contains(notesOf(res), "refused") {
		t.Errorf("the dead write is told again: %s", notesOf(res))
	}

	url, tok := h.edge.cfg.PrimaryURL, h.edge.cfg.Token()
	h.stop()
	<-h.done
	h2 := start(t, harnessOpts{palace: h.palace, primaryURL: url, token: tok})
	in := instructionsOf(h2)
	for _, want := range []string{"1 write", "refused for good", "mempalace_add_drawer of wing_shared/plans", "devbox-config edge status"} {
		if !strings.Contains(in, want) {
			t.Errorf("the new session's instructions lack %q:\n%s", want, in)
		}
	}
	if len(in) > wakeMaxBytes {
		t.Errorf("instructions of %d bytes", len(in))
	}
	if _, res := h2.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "in the new session"}); strings.Contains(notesOf(res), "refused") {
		t.Errorf("the dead write told at initialize is told again: %s", notesOf(res))
	}
}

// Several writes dead at once are each named (up to three, then a count),
// as writes from this devbox (another session on the palace may have made
// them), with the way to list them all: an outside tester saw "refused 3
// of your writes, the first your ..." hide a diary entry and a fact.
func TestADeadNoteNamesTheWrites(t *testing.T) {
	t.Parallel()
	refused := "JSON-RPC error -32003: devbox-config gateway: bob-02 may not call it (write globs do not match the target wing)"
	ops := []outbox.DeadOp{
		{ID: "1", Tool: "mempalace_add_drawer", Wing: "wing_shared", Room: "plans", Reason: refused},
		{ID: "2", Tool: "mempalace_diary_write", Wing: "wing_shared", Reason: refused},
		{ID: "3", Tool: "mempalace_kg_add", Reason: refused},
		{ID: "4", Tool: "mempalace_update_drawer", Object: "drawer_x", Reason: refused},
	}
	one := deadNote(ops[:1])
	for _, want := range []string{"a write from this devbox", "mempalace_add_drawer of wing_shared/plans", "write globs do not match the target wing", "devbox-config edge status"} {
		if !strings.Contains(one, want) {
			t.Errorf("one dead write's note lacks %q:\n%s", want, one)
		}
	}
	many := deadNote(ops)
	for _, want := range []string{"4 writes from this devbox", "mempalace_add_drawer of wing_shared/plans", "mempalace_diary_write of wing_shared", "mempalace_kg_add", "and 1 more", "write globs do not match the target wing"} {
		if !strings.Contains(many, want) {
			t.Errorf("four dead writes' note lacks %q:\n%s", want, many)
		}
	}
	for _, s := range []string{one, many} {
		if strings.Contains(s, "your") || strings.Contains(s, "\n") {
			t.Errorf("the note says whose, or is more than one line:\n%s", s)
		}
	}
}

// A dead op took effect in this devbox's palace only: for a write, the
// record is there alone; for a delete, what it deleted stays on the
// primary. The note must not say a delete is "kept in this devbox's
// palace only" (outside tester, attack8 10).
func TestADeadDeleteIsNotSaidToBeKeptHere(t *testing.T) {
	ops := []outbox.DeadOp{{ID: "1", Tool: "mempalace_delete_by_source", Reason: "refused"}}
	for _, s := range []string{deadNote(ops), deadSummary(ops)} {
		if strings.Contains(s, "kept in this devbox's palace") || !strings.Contains(s, "not on the primary") {
			t.Errorf("the note for a dead delete: %q", s)
		}
	}
}

// A dead op is told at the first deadToldMax session starts after it died
// (counted in the outbox, across edges on the palace), not at every one
// for as long as it stays dead: an outside tester saw the same refusal
// announced at every session start. `edge status` still lists it.
func TestADeadWriteIsToldAtAFewSessionStarts(t *testing.T) {
	t.Parallel()
	h, gw, _ := bobBehindAGateway(t, harnessOpts{}, "wing_bob", "wing_shared")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "plans", "content": "while granted"}); res.IsError {
		t.Fatalf("a granted write was refused: %s", refusalText(res))
	}
	h.drained()
	setWriteGrants(t, gw, "bob-02", "wing_bob")
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_shared", "room": "plans", "content": "on the old grants"}); res.IsError {
		t.Fatalf("a write the edge's grants allow was refused: %s", refusalText(res))
	}
	ctx := context.Background()
	h.eventually("the refused write dead", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		return len(h.deadOps()) == 1
	})
	url, tok := h.edge.cfg.PrimaryURL, h.edge.cfg.Token()
	h.stop()
	<-h.done
	for i := 1; i <= deadToldMax+1; i++ {
		h2 := start(t, harnessOpts{palace: h.palace, primaryURL: url, token: tok})
		in := instructionsOf(h2)
		if told := strings.Contains(in, "refused for good"); told != (i <= deadToldMax) {
			t.Errorf("session start %d: told %v, want it told at the first %d:\n%s", i, told, deadToldMax, in)
		}
		if i == 1 && !strings.Contains(in, "session starts") {
			t.Errorf("the instructions do not say they are not repeated at every session start:\n%s", in)
		}
		h2.stop()
		<-h2.done
	}
}

// A by-id write the gateway refused as "the target is not visible to this
// device" (MemPalace has no such drawer, or it is in a wing the device may
// not read: the gateway does not tell them apart) is told with both
// possibilities, the drawer deleted on the primary first: an outside
// tester's offline edit of a drawer an admin deleted meanwhile read only
// "not visible".
func TestADeadNoteSaysTheDrawerMayBeDeleted(t *testing.T) {
	t.Parallel()
	ops := []outbox.DeadOp{{ID: "1", Tool: "mempalace_update_drawer", Object: "drawer_x", Reason: "JSON-RPC error -31003: devbox-config gateway: nar-03 may not call mempalace_update_drawer (the target is not visible to this device)"}}
	for _, s := range []string{deadNote(ops), deadSummary(ops)} {
		if !strings.Contains(s, "deleted on the primary") || !strings.Contains(s, "may not read)") {
			t.Errorf("the note for a write to a drawer the primary does not show: %q", s)
		}
	}
}

// Outside tester attack44 F3: the edge's writes were queued while the
// gateway named its token tmp-0042 (an earlier run heard it, and kept
// it), and the gateway now names the token bob-02 (tmp-0042 was removed
// and .env given bob-02's token). The flusher holds them, never sent as
// bob-02, whatever MEMPALACE_ORIGIN_DEVICE says: the agent is told with
// the fix (retry sends it as bob-02, drop gives it up), and so is the
// next session. Before, they were sent as bob-02.
func TestWritesQueuedAsAnotherDeviceAreHeldAndTold(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "bob-02", "bob")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ob.SetMeta(ctx, outbox.MetaDeviceSeen, deviceinfo.Info{ID: "tmp-0042", Label: "tmpbox"}.HeaderValue()); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Wing: "wing_shared", Payload: []byte(`{"wing":"wing_shared","room":"plans","content":"queued as tmp-0042"}`)}); err != nil {
		t.Fatal(err)
	}
	ob.Close()
	h, _, primary := bobBehindAGateway(t, harnessOpts{palace: palace, device: "bob-02"}, "*")
	h.eventually("the write held", func() bool { return len(h.deadOps()) == 1 })
	if f := outbox.FailureOf(h.deadOps()[0].Error); f.Kind != outbox.OtherDevice || f.Device != "bob-02" {
		t.Fatalf("the held op's failure: %+v", f)
	}
	if got := postTool(t, primary, testToken, "search", map[string]any{"query": "queued as tmp-0042"}); strings.Contains(fmt.Sprint(got["results"]), "queued as tmp-0042") {
		t.Fatalf("the write reached the primary as bob-02: %v", got)
	}
	// Held before or after this session's start: its instructions or its
	// next tool answer tell it.
	_, res := h.call("search", map[string]any{"query": "anything"})
	told := instructionsOf(h) + notesOf(res)
	for _, want := range []string{"1 write it will not send: mempalace_add_drawer of wing_shared/plans", "queued as device tmp-0042; the gateway names this token bob-02", "`devbox-config edge outbox retry ID` sends one as the device the gateway names the token", "`drop ID` gives it up", "gone for good and never sent it, `retry --force ID` sends it from here"} {
		if !strings.Contains(told, want) {
			t.Errorf("the agent is not told %q:\n%q", want, told)
		}
	}
	url, tok := h.edge.cfg.PrimaryURL, h.edge.cfg.Token()
	h.stop()
	<-h.done
	h2 := start(t, harnessOpts{palace: h.palace, primaryURL: url, token: tok, device: "bob-02"})
	if in := instructionsOf(h2); !strings.Contains(in, "Writes held (devbox-config edge): this devbox's outbox holds 1 write it will not send") || !strings.Contains(in, "names this token bob-02") {
		t.Errorf("the new session's instructions:\n%s", in)
	}
}

// A dead coordination write (an event: the primary's log only, never the
// local palace) took effect nowhere, and later events on its stream do
// not wait behind it: the note and the session start say so, not "in this
// devbox's palace only ... wait behind them" (attack52 F3). A mix names
// each kind's fate.
func TestADeadEventIsNotSaidToHaveTakenEffectHere(t *testing.T) {
	t.Parallel()
	ev := []outbox.DeadOp{{ID: "1", Tool: "mempalace_event_append", Reason: "-32602 Unknown parameter 'kind'"}, {ID: "2", Tool: "mempalace_event_append", Reason: "refused"}}
	for _, s := range []string{deadNote(ev[:1]), deadNote(ev), deadSummary(ev), otherDeviceLine(ev)} {
		if strings.Contains(s, "palace only") || strings.Contains(s, "wait behind") || !strings.Contains(s, "took effect nowhere") {
			t.Errorf("the note for dead events: %q", s)
		}
	}
	mixed := append(ev, outbox.DeadOp{ID: "3", Tool: "mempalace_add_drawer", Wing: "w", Room: "r", Reason: "refused"})
	if s := deadSummary(mixed); !strings.Contains(s, "palace writes among them took effect in this devbox's palace only") || !strings.Contains(s, "coordination writes (mempalace_event_append) took effect nowhere") {
		t.Errorf("the session start's line for dead events and a drawer: %q", s)
	}
}

// The session-start line says how many writes the outbox holds dead, those
// already told at deadToldMax session starts too: with 2 dead, one of them
// told 3 times, it said "holds 1 write" (outside tester attack63 F5).
func TestTheSessionStartLineCountsEveryDeadWrite(t *testing.T) {
	t.Parallel()
	h, _, _ := bobBehindAGateway(t, harnessOpts{}, "wing_bob")
	// Two writes queued while the grants allowed them (the edge now
	// refuses them up front, as it knows the grants: queued directly, not
	// raced against its learning of them), which the gateway refuses.
	ctx := context.Background()
	for _, c := range []string{"first refused", "second refused"} {
		if _, err := h.edge.outbox.Enqueue(ctx, outbox.Write{Name: "mempalace_add_drawer", Wing: "wing_shared", Payload: []byte(`{"wing":"wing_shared","room":"plans","content":"` + c + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("both writes dead", func() bool {
		h.edge.outbox.ClearBackoff(ctx)
		h.edge.outbox.Kick()
		return len(h.deadOps()) == 2
	})
	if err := h.edge.outbox.SetMeta(ctx, metaDeadTold, fmt.Sprintf(`{%q:%d}`, h.deadOps()[0].ID, deadToldMax)); err != nil {
		t.Fatal(err)
	}
	if in := h.edge.deadInstructions(ctx); !strings.Contains(in, "holds 2 writes the primary refused for good") {
		t.Errorf("the session-start line with 2 dead, one told %d times:\n%s", deadToldMax, in)
	}
}

// The session-start line and a tool answer's note give the reason of each
// kind of dead op once, not the first op's alone: an outside tester's
// changed-on-primary edit, listed after another kind, was told without
// its way to settle it (attack66 N4).
func TestADeadNoteGivesEachKindsReason(t *testing.T) {
	t.Parallel()
	ops := []outbox.DeadOp{
		{ID: "1aaaaaaaaaaaaaaa", Tool: "mempalace_add_drawer", Wing: "wing_shared", Room: "plans", Kind: outbox.Refused, Reason: "JSON-RPC error -32003: devbox-config gateway: bob-02 may not call it (write globs do not match the target wing)"},
		{ID: "2aaaaaaaaaaaaaaa", Tool: "mempalace_update_drawer", Object: "drawer_x", Kind: outbox.ChangedOnPrimary, Reason: "JSON-RPC error -32033: devbox-config gateway: drawer drawer_x changed on the primary since this edit was made (last written by device desk-9b21 at 2026-11-30T12:00:00Z): its text there is not the one"},
		{ID: "3aaaaaaaaaaaaaaa", Tool: "mempalace_kg_add", Kind: outbox.Refused, Reason: "JSON-RPC error -32003: devbox-config gateway: another refusal"},
	}
	for _, s := range []string{deadNote(ops), deadSummary(ops)} {
		for _, want := range []string{"write globs do not match", "changed on the primary since this edit (desk-9b21, 2026-11-30T12:00:00Z): `edge outbox retry 2aaaaaaaaaaa` overwrites it, `drop` keeps it"} {
			if !strings.Contains(s, want) {
				t.Errorf("the note lacks %q:\n%s", want, s)
			}
		}
		if strings.Contains(s, "another refusal") {
			t.Errorf("the note gives a kind's reason twice:\n%s", s)
		}
	}
}
