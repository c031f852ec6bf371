package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// The edge -> gateway -> upstream path, with the gateway's answer to every
// write type lost once: each record is on the upstream exactly once, and a
// write without a look-up of its own (artifact_put) reached the upstream
// once: the ledger answered its resend. The same run without the ledger
// puts a second artifact on the upstream (the control).
// withLedger gives the test gateway a fresh op-id ledger, closed with the
// test.
func (g *gw) withLedger() {
	g.t.Helper()
	l, err := ledger.Open(filepath.Join(g.t.TempDir(), ledger.FileName), time.Hour)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { l.Close() })
	g.srv.Ledger = OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}
}

// postOp sends a tools/call with an op id in _meta as token's device, and
// returns the HTTP status and the decoded answer.
func (g *gw) postOp(token, tool string, args map[string]any, opID string) (int, map[string]any) {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": tool, "arguments": args, "_meta": map[string]any{ledger.MetaKey: opID}}})
	return g.post(token, string(b))
}

func TestEdgeThroughGatewayExactlyOnce(t *testing.T) {
	for _, withLedger := range []bool{true, false} {
		t.Run(map[bool]string{true: "ledger", false: "no ledger (control)"}[withLedger], func(t *testing.T) {
			g := newGW(t, []Device{{ID: "dev1", Label: "lab", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@lab"}, Coordinator: true, Admin: true}})
			if withLedger {
				g.withLedger()
			}
			writes := []string{"mempalace_add_drawer", "mempalace_diary_write", "mempalace_kg_add", "mempalace_kg_invalidate", "mempalace_kg_supersede",
				"mempalace_event_append", "mempalace_event_ack", "mempalace_artifact_put", "mempalace_patch_submit"}
			front := realpalace.NewProxy(t, g.http.URL)
			front.Drop(writes...)

			// A target for the ack, and facts to close, already upstream.
			up := g.primary
			upCall(t, up, "mempalace_event_append", map[string]any{"type": "ask", "stream": "s", "room": "r", "from_agent": "oc@lab", "to_agent": "pi@lab", "body": "the ask"})
			upCall(t, up, "mempalace_kg_add", map[string]any{"subject": "ada", "predicate": "works_at", "object": "acme"})
			upCall(t, up, "mempalace_kg_add", map[string]any{"subject": "bob", "predicate": "works_at", "object": "acme"})
			var target string
			for _, e := range up.Dump().Events {
				target = e.ID
			}

			st, p, f := edgeOutbox(t, front.URL, g.tokens["dev1"])
			ctx := context.Background()
			enqueue := func(tool string, args map[string]any) {
				b, _ := json.Marshal(args)
				if _, err := st.Enqueue(ctx, outbox.Write{Name: tool, Payload: b}); err != nil {
					t.Fatal(err)
				}
			}
			enqueue("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "one drawer"})
			enqueue("mempalace_diary_write", map[string]any{"agent_name": "pi", "entry": "one diary entry"})
			enqueue("mempalace_kg_add", map[string]any{"subject": "ada", "predicate": "worked_at", "object": "initech", "valid_from": "2020-01-01", "valid_to": "2021-01-01"})
			enqueue("mempalace_kg_invalidate", map[string]any{"subject": "ada", "predicate": "works_at", "object": "acme", "ended": "2026-01-01"})
			enqueue("mempalace_kg_supersede", map[string]any{"subject": "bob", "predicate": "works_at", "old_object": "acme", "new_object": "globex", "at": "2026-01-01"})
			enqueue("mempalace_event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "pi@lab", "body": "one event"})
			enqueue("mempalace_event_ack", map[string]any{"event_id": target, "from_agent": "pi@lab", "status": "applied", "body": "one ack"})
			enqueue("mempalace_artifact_put", map[string]any{"kind": "note", "content": "one artifact", "created_by": "pi@lab"})
			enqueue("mempalace_patch_submit", map[string]any{"content": "diff --git a b\n", "from_agent": "pi@lab", "stream": "s", "body": "one patch"})

			if s := drain(t, st, p, f, 30*time.Second); s.ByState[outbox.Dead] > 0 {
				t.Fatalf("dead ops: %+v", s.Dead)
			}
			if lost := front.Lost(); len(lost) != len(writes) {
				t.Fatalf("answers lost: %v, want one of each of %v", lost, writes)
			}

			d := up.Dump()
			count := func(match func(string) bool) int {
				n := 0
				for _, dr := range d.Drawers {
					if match(dr.Content) {
						n++
					}
				}
				return n
			}
			events := func(body string) int {
				n := 0
				for _, e := range d.Events {
					if e.Body == body {
						n++
					}
				}
				return n
			}
			facts := func(s, o string, closed bool) int {
				n := 0
				for _, tr := range d.Triples {
					if tr.Subject == s && tr.Object == o && (tr.ValidTo != nil && *tr.ValidTo != "") == closed {
						n++
					}
				}
				return n
			}
			artifacts := func(content string) int {
				n := 0
				for _, a := range d.Artifacts {
					if strings.Contains(a.Content, content) {
						n++
					}
				}
				return n
			}
			want := map[string]int{
				"drawer":          count(func(c string) bool { return c == "one drawer" }),
				"diary":           count(func(c string) bool { return c == "one diary entry" }),
				"closed fact":     facts("ada", "initech", true),
				"invalidated":     facts("ada", "acme", true),
				"still open":      facts("ada", "acme", false) + facts("bob", "acme", false),
				"superseded by":   facts("bob", "globex", false),
				"event":           events("one event"),
				"ack":             events("one ack"),
				"patch event":     events("one patch"),
				"patch artifact":  artifacts("diff --git a b"),
				"artifact":        artifacts("one artifact"),
				"artifact upcall": up.Calls("mempalace_artifact_put"),
			}
			// Without the ledger nothing can look an artifact up: its op
			// waits in doubt for an operator instead of a second copy.
			if inDoubt, _ := st.List(ctx, 10, outbox.InDoubt); withLedger != (len(inDoubt) == 0) {
				t.Errorf("ops in doubt: %d (ledger %v)", len(inDoubt), withLedger)
			}
			for what, n := range want {
				expect := 1
				if what == "still open" {
					expect = 0
				}

				if n != expect {
					t.Errorf("%s: %d on the upstream, want %d", what, n, expect)
				}
			}
		})
	}
}

func upCall(t testing.TB, pl *fakepalace.Palace, tool string, args map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	if _, err := pl.Handle(b); err != nil {
		t.Fatal(err)
	}
}

// A narrow device's checkpoint resent under its op id gets the recorded
// answer: the gateway narrows a resend differently (the item the first send
// filed is now a duplicate in a readable wing), and the ledger must know
// the write by what the device sent, not by what the gateway forwarded
// (found by an attacker pass: the resend was refused as a reused op id and
// the edge's op went dead).
func TestNarrowedCheckpointResendIsAReplay(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{{ID: "alice", Label: "laptop", Read: []string{"alice_*"}, Write: []string{"alice_*"}, Agents: []string{"opencode@laptop"}}})
	g.withLedger()
	opID := strings.Repeat("ab", 32)
	send := func() map[string]any {
		_, m := g.postOp(g.tokens["alice"], "mempalace_checkpoint", map[string]any{"items": []any{map[string]any{"wing": "alice_w", "room": "cp", "content": "a zebra quartz note"}}}, opID)
		return m
	}
	first, second := send(), send()
	if first["error"] != nil || second["error"] != nil {
		t.Fatalf("first %v, resend %v: want the recorded answer both times", first["error"], second["error"])
	}
	// Only the resend says it was answered from the record (a join counts
	// it as landed earlier), marked after the filter, which knows
	// MemPalace's envelope only.
	replayed := func(m map[string]any) any {
		meta, _ := m["result"].(map[string]any)["_meta"].(map[string]any)
		return meta[ledger.ReplayedKey]
	}
	if replayed(first) != nil || replayed(second) != true {
		t.Errorf("result._meta[%q]: first %v, resend %v; want only the resend marked", ledger.ReplayedKey, replayed(first), replayed(second))
	}
	if n := g.primary.Calls("mempalace_checkpoint"); n != 1 {
		t.Errorf("the upstream saw the checkpoint %d times, want 1", n)
	}
	if n := g.primary.Dump().CountContent("a zebra quartz note"); n != 1 {
		t.Errorf("%d copies of the item", n)
	}
}

// A device cannot make another's artifact visible to itself by naming it
// in an event of its own (found by an attacker pass).
func TestOwnReferenceDoesNotOpenAnArtifact(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "alice", Label: "a", Read: []string{"alice_*"}, Write: []string{"alice_*"}, Agents: []string{"alice@a"}},
		{ID: "bob", Label: "b", Read: []string{"bob_*"}, Write: []string{"bob_*"}, Agents: []string{"bob@b"}},
	})
	put, errObj, _ := g.call(g.tokens["bob"], "artifact_put", map[string]any{"kind": "note", "content": "BOB PRIVATE ARTIFACT", "created_by": "bob@b"})
	if errObj != nil {
		t.Fatal(errObj)
	}
	id := put["artifact"].(map[string]any)["id"].(string)
	if _, e, _ := g.call(g.tokens["alice"], "artifact_get", map[string]any{"artifact_id": id}); e == nil {
		t.Fatal("alice reads bob's artifact outright")
	}
	// Refused since attack93 F3 (artRefLaundering); were it written,
	// her own reference would still not count.
	if _, e, _ := g.call(g.tokens["alice"], "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "alice@a", "to_agent": "alice@a", "body": "mine", "artifact_ids": []any{id}}); e == nil {
		t.Error("alice names bob's artifact in her own event")
	}
	res, e, _ := g.call(g.tokens["alice"], "artifact_get", map[string]any{"artifact_id": id})
	if e == nil || strings.Contains(fmt.Sprint(res), "BOB PRIVATE") {
		t.Errorf("after naming it in her own event alice reads bob's artifact: %v %v", res, e)
	}
	// An event bob sends her with it does open it.
	g.call(g.tokens["bob"], "event_append", map[string]any{"type": "note", "stream": "s", "room": "r", "from_agent": "bob@b", "to_agent": "alice@a", "body": "for you", "artifact_ids": []any{id}})
	if res, e, _ := g.call(g.tokens["alice"], "artifact_get", map[string]any{"artifact_id": id}); e != nil || !strings.Contains(fmt.Sprint(res), "BOB PRIVATE") {
		t.Errorf("bob's event to alice does not open it: %v %v", res, e)
	}
}

// edgeOutbox is device dev1's edge side: an outbox, the primary
// supervisor pointed at url with tok, and a flusher between them, all
// closed when the test ends.
func edgeOutbox(t *testing.T, url, tok string) (*outbox.Store, *edge.Primary, *outbox.Flusher) {
	t.Helper()
	st, err := outbox.Open(filepath.Join(t.TempDir(), outbox.FileName), "dev1", "lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	p := edge.NewPrimary(url, func() string { return tok }, log, edge.PrimaryOptions{Timeout: 3 * time.Second, Probe: 10 * time.Millisecond, OnUp: func() { st.Resume(context.Background()) }})
	t.Cleanup(p.Close)
	return st, p, &outbox.Flusher{S: st, P: edge.FlushTarget(p), Log: log, BaseDelay: time.Millisecond}
}

// drain drains the outbox as the edge's flusher would, until nothing is
// queued or in flight or d has passed, and returns its stats.
func drain(t *testing.T, st *outbox.Store, p *edge.Primary, f *outbox.Flusher, d time.Duration) outbox.Stats {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(d)
	for {
		if !p.Up() {
			time.Sleep(50 * time.Millisecond)
		} else {
			st.Resume(ctx)
			f.Drain(ctx)
		}
		s, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.ByState[outbox.Queued]+s.ByState[outbox.Inflight] == 0 || time.Now().After(deadline) {
			return s
		}
	}
}

// Outside tester attack76 F7: a send that names the device its op was
// queued as (an edge's retry on a renamed devbox, or on a copy) is
// answered from that device's record of the same write, and a later send
// of it by that device from this one's: filed once, either order, and the
// audit lines say so; so is one retried by two copies naming the same
// device (attack81 F2). A name that is not a device id is refused; one of
// no device is as if it were not there.
func TestAnOpQueuedAsAnotherDeviceIsAnsweredFromItsRecord(t *testing.T) {
	t.Parallel()
	g := newGW(t, []Device{
		{ID: "alice", Label: "laptop", Read: []string{"shared"}, Write: []string{"shared"}},
		{ID: "bob", Label: "desk", Read: []string{"shared"}, Write: []string{"shared"}},
		{ID: "carol", Label: "desk copy", Read: []string{"shared"}, Write: []string{"shared"}}})
	g.withLedger()
	for i, order := range [][2]string{{"alice", "bob"}, {"bob", "alice"}} {
		opID := strings.Repeat(fmt.Sprintf("c%d", i), 32)
		args := map[string]any{"wing": "shared", "room": "r", "content": "filed once by whichever machine " + order[0]}
		calls := g.primary.Calls("mempalace_add_drawer")
		// order[0] sends first; bob always names alice (bob is the renamed original).
		for _, dev := range order {
			meta := map[string]any{}
			if dev == "bob" {
				meta[ledger.QueuedAsKey] = "alice"
			}
			if m := g.sendOp(dev, "mempalace_add_drawer", args, opID, meta); m["error"] != nil {
				t.Fatalf("%s's send: %v", dev, m["error"])
			}
		}
		if n := g.primary.Calls("mempalace_add_drawer") - calls; n != 1 {
			t.Errorf("%s first: the upstream saw the op %d times, want 1", order[0], n)
		}
		var es []Entry
		for _, e := range g.auditLog() {
			if e.Decision == VerdictAllow {
				es = append(es, e)
			}
		}
		first, second := es[len(es)-2], es[len(es)-1]
		bobs := map[bool]Entry{true: first, false: second}[order[0] == "bob"]
		if first.RecordOf != "" || second.Device != order[1] || second.RecordOf != order[0] || bobs.QueuedAs != "alice" {
			t.Errorf("%s first: audit lines %+v\n%+v", order[0], first, second)
		}
	}
	// attack81 F2: alice's devbox copied twice, both copies renamed (bob,
	// carol), both retry alice's op naming alice: filed once.
	calls, twice := g.primary.Calls("mempalace_add_drawer"), strings.Repeat("c2", 32)
	for _, dev := range []string{"bob", "carol"} {
		m := g.sendOp(dev, "mempalace_add_drawer", map[string]any{"wing": "shared", "room": "r", "content": "retried by two copies"}, twice, map[string]any{ledger.QueuedAsKey: "alice"})
		if m["error"] != nil || marked(encodeJSON(m), ledger.ReplayedKey) != (dev == "carol") {
			t.Errorf("%s's retry: %v", dev, m)
		}
	}
	if n := g.primary.Calls("mempalace_add_drawer") - calls; n != 1 {
		t.Errorf("two copies retrying one op: the upstream saw it %d times, want 1", n)
	}
	if m := g.sendOp("bob", "mempalace_add_drawer", map[string]any{"wing": "shared", "content": "x"}, strings.Repeat("cd", 32), map[string]any{ledger.QueuedAsKey: "not a device"}); rpcError(m)["code"] != float64(-32602) {
		t.Errorf("a queued-as that is no device id: %v", m)
	}
}

// sendOp sends a tools/call with an op id and the other _meta members of
// meta as dev, and returns the decoded answer.
func (g *gw) sendOp(dev, tool string, args map[string]any, opID string, meta map[string]any) map[string]any {
	g.t.Helper()
	meta[ledger.MetaKey] = opID
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args, "_meta": meta}})
	_, m := g.post(g.tokens[dev], string(b))
	return m
}

// Outside tester attack80 F1: a device that names another as the one its
// op was queued as, with that device's op id, files nothing under it. A
// different write under the op id (sent before the victim's, or after)
// is the caller's own new write, answered as with no name: the victim's
// write is then neither refused nor answered from the caller's record,
// and the caller learns nothing of the victim's (its tool, its answer).
// It failed before: the victim's write refused "op id already used for a
// different write", and the caller's other tool refused naming the
// victim's.
func TestAQueuedAsClaimOnlyDedupes(t *testing.T) {
	t.Parallel()
	for _, claim := range []bool{true, false} {
		t.Run(map[bool]string{true: "claim", false: "no claim (control)"}[claim], func(t *testing.T) {
			g := newGW(t, []Device{
				{ID: "mallory", Label: "m", Read: []string{"shared"}, Write: []string{"shared"}, Agents: []string{"a@m"}},
				{ID: "bob", Label: "desk", Read: []string{"shared"}, Write: []string{"shared"}}})
			g.withLedger()
			meta := func() map[string]any {
				if claim {
					return map[string]any{ledger.QueuedAsKey: "bob"}
				}
				return map[string]any{}
			}
			drawer := func(text string) map[string]any {
				return map[string]any{"wing": "shared", "room": "r", "content": text}
			}
			block, snoop, snoop2 := strings.Repeat("b1", 32), strings.Repeat("5e", 32), strings.Repeat("5f", 32)
			// Block: mallory sends other text first under bob's pending op id.
			if m := g.sendOp("mallory", "mempalace_add_drawer", drawer("mallory's text"), block, meta()); m["error"] != nil {
				t.Fatalf("mallory's send: %v", m)
			}
			if m := g.sendOp("bob", "mempalace_add_drawer", drawer("bob's text"), block, map[string]any{}); m["error"] != nil || marked(encodeJSON(m), ledger.ReplayedKey) {
				t.Errorf("bob's own write after mallory's: %v", m)
			}
			// Snoop: bob's write is made; mallory sends other arguments, then another tool, under its op id.
			for _, op := range []string{snoop, snoop2} {
				if m := g.sendOp("bob", "mempalace_add_drawer", drawer("bob's secret "+op[:2]), op, map[string]any{}); m["error"] != nil {
					t.Fatalf("bob's send: %v", m)
				}
			}
			if m := g.sendOp("mallory", "mempalace_add_drawer", drawer("a guess"), snoop, meta()); m["error"] != nil || marked(encodeJSON(m), ledger.ReplayedKey) {
				t.Errorf("mallory's other arguments under bob's op id: %v", m)
			}
			if m := g.sendOp("mallory", "mempalace_diary_write", map[string]any{"agent_name": "a", "wing": "shared", "entry": "e"}, snoop2, meta()); m["error"] != nil || marked(encodeJSON(m), ledger.ReplayedKey) {
				t.Errorf("mallory's other tool: %v", m)
			}
			if n, d := g.primary.Calls("mempalace_add_drawer"), g.primary.Calls("mempalace_diary_write"); n != 5 || d != 1 {
				t.Errorf("the upstream saw %d drawers and %d diary entries, want 5 and 1 (each device's own)", n, d)
			}
			for _, e := range g.auditLog() {
				if e.Tool == "" || e.Decision != VerdictAllow {
					continue
				}
				if want := map[bool]string{true: "bob"}[claim && e.Device == "mallory"]; e.QueuedAs != want || e.RecordOf != "" {
					t.Errorf("audit line of %s %s: queued_as %q record_of %q, want queued_as %q", e.Device, e.Tool, e.QueuedAs, e.RecordOf, want)
				}
			}
		})
	}
}
