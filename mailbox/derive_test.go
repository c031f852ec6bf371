package mailbox

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
)

const me = "opencode@box"

// ev builds an event as the primary returns it (mempalace-surface §3.10).
// to and corr "" mean null; ackOf "" means no metadata.ack_of.
func ev(seq int64, id, from, to, corr, status, ackOf string) Event {
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	meta := map[string]any{}
	if ackOf != "" {
		meta["ack_of"] = ackOf
	}
	typ := "task.request"
	if ackOf != "" {
		typ = "event.ack"
	}
	raw, _ := json.Marshal(map[string]any{
		"id": id, "seq": seq, "origin_replica": "rep_1", "origin_seq": seq, "hlc": "", "type": typ,
		"stream": "devbox", "room": "coord", "from_agent": from, "to_agent": null(to), "correlation_id": null(corr),
		"branch": nil, "base_commit": nil, "status": null(status), "artifact_ids": []string{}, "body": "body of " + id,
		"created_at": "2026-12-01T09:00:00Z", "metadata": meta,
	})
	e, err := ParseEvent(raw)
	if err != nil {
		panic(err)
	}
	return e
}

func ids(items []Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Event.ID)
	}
	return out
}

// The reference semantics of RFC 003 §3.3, case by case.
func TestDeriveReferenceSemantics(t *testing.T) {
	const peer = "pi@laptop"
	cases := []struct {
		name   string
		agent  string
		log    []Event
		owed   []string
		whyHas string // substring of the first item's why
	}{
		{"an ask addressed to me is owed", me,
			[]Event{ev(1, "a1", peer, me, "", "open", "")},
			[]string{"a1"}, "no reply of yours joins it"},
		{"claimed then ready keep it owed", me,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "r1", me, peer, "c1", "claimed", ""), ev(3, "r2", me, peer, "c1", "ready", "")},
			[]string{"a1"}, "your latest reply is ready (seq 3), which does not clear it"},
		{"an open reply does not clear either", me,
			[]Event{ev(1, "a1", peer, me, "", "open", ""), ev(2, "k1", me, peer, "a1", "open", "a1")},
			[]string{"a1"}, "latest reply is open"},
		{"applied clears", me,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "r1", me, peer, "c1", "claimed", ""), ev(3, "r2", me, peer, "c1", "applied", "")},
			nil, ""},
		{"superseded, failed and blocked clear too", me,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "a2", peer, me, "c2", "open", ""), ev(3, "a3", peer, me, "c3", "open", ""),
				ev(4, "r1", me, peer, "c1", "superseded", ""), ev(5, "r2", me, peer, "c2", "failed", ""), ev(6, "r3", me, peer, "c3", "blocked", "")},
			nil, ""},
		{"a reply to the asker by correlation id clears (no ack_of)", me,
			[]Event{ev(1, "a1", peer, me, "thread-9", "open", ""), ev(2, "r1", me, peer, "thread-9", "applied", "")},
			nil, ""},
		{"a reply on the thread addressed to nobody answers nobody", me,
			[]Event{ev(1, "a1", peer, me, "thread-9", "open", ""), ev(2, "r1", me, "", "thread-9", "applied", "")},
			[]string{"a1"}, "no reply of yours"},
		{"an ack of another sender's ask on the same correlation id does not clear this one", me,
			[]Event{ev(1, "a1", peer, me, "deploy-x", "open", ""), ev(2, "x1", "codex@mal", me, "deploy-x", "open", ""),
				ev(3, "k1", me, "codex@mal", "deploy-x", "blocked", "x1")},
			[]string{"a1"}, "no reply of yours"},
		{"a reply to another sender on the same correlation id does not clear this one", me,
			[]Event{ev(1, "a1", peer, me, "deploy-x", "open", ""), ev(2, "r1", me, "codex@mal", "deploy-x", "applied", "")},
			[]string{"a1"}, "no reply of yours"},
		{"an ack clears the ask it names, not the same sender's earlier ask on its thread", me,
			[]Event{ev(1, "a1", peer, me, "deploy-x", "open", ""), ev(2, "a2", peer, me, "deploy-x", "open", ""),
				ev(3, "k1", me, peer, "deploy-x", "applied", "a2")},
			[]string{"a1"}, "no reply of yours joins it"},
		{"an ack that reaches the log after a later ask on its thread (written offline) clears only up to the ask it names", me,
			[]Event{ev(1, "a1", peer, me, "deploy-x", "open", ""), ev(2, "a2", peer, me, "deploy-x", "open", ""),
				ev(3, "k1", me, peer, "deploy-x", "applied", "a1")},
			[]string{"a2"}, "no reply of yours joins it"},
		{"an event_ack (metadata.ack_of) clears an ask without a correlation", me,
			[]Event{ev(1, "a1", peer, me, "", "open", ""), ev(2, "k1", me, peer, "a1", "applied", "a1")},
			nil, ""},
		{"a terminal reply on a correlation does not clear a later ask on it", me,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "r1", me, peer, "c1", "applied", ""), ev(3, "a2", peer, me, "c1", "open", "")},
			[]string{"a2"}, "your applied (seq 2) on the same thread came before it"},
		{"the later-seq rule holds however the log arrives (input order does not matter)", me,
			[]Event{ev(3, "a2", peer, me, "c1", "open", ""), ev(2, "r1", me, peer, "c1", "applied", ""), ev(1, "a1", peer, me, "c1", "open", "")},
			[]string{"a2"}, "came before it"},
		{"my own asks are not owed to me", me,
			[]Event{ev(1, "m1", me, me, "", "open", ""), ev(2, "m2", me, peer, "", "open", "")},
			nil, ""},
		{"broadcasts and to_agent NULL are never owed", me,
			[]Event{ev(1, "b1", peer, "*", "", "open", ""), ev(2, "n1", peer, "", "", "open", "")},
			nil, ""},
		{"an ask to another device of the same harness is not mine", me,
			[]Event{ev(1, "x1", peer, "opencode@other", "", "open", "")},
			nil, ""},
		{"someone else's terminal reply does not clear my ask", me,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "r1", "opencode@other", peer, "c1", "applied", "")},
			[]string{"a1"}, "no reply of yours"},
		{"a terminal reply on another thread does not clear", me,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "r1", me, peer, "c2", "applied", "")},
			[]string{"a1"}, "no reply of yours"},
		{"oldest first, each item once although listed twice", me,
			[]Event{ev(5, "a5", peer, me, "", "open", ""), ev(2, "a2", peer, me, "", "", ""), ev(5, "a5", peer, me, "", "open", ""), ev(9, "a9", "claude@ci", me, "", "open", "")},
			[]string{"a2", "a5", "a9"}, "task.request from \"pi@laptop\" is addressed to you (\"opencode@box\") at seq 2"},
		{"a terminal reply routed back to the asker is not owed by the asker (no ack ping-pong)", peer,
			[]Event{ev(1, "a1", peer, me, "", "open", ""), ev(2, "k1", me, peer, "a1", "applied", "a1"), ev(3, "r1", me, peer, "c9", "blocked", "")},
			nil, ""},
		{"a progress ack (claimed, ready, open) routed back to the asker is not owed by it: an ack answers, it asks nothing", peer,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "k1", me, peer, "c1", "claimed", "a1"),
				ev(3, "a2", peer, me, "", "open", ""), ev(4, "k2", me, peer, "a2", "ready", "a2"), ev(5, "k3", me, peer, "a2", "open", "a2"),
				ev(6, "k4", me, peer, "c9", "claimed", "someone-elses")},
			nil, ""},
		{"a progress reply (no ack_of) routed back to the asker is, by the reference rules, owed by it", peer,
			[]Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "r1", me, peer, "c1", "claimed", "")},
			[]string{"r1"}, "(status claimed) from \"opencode@box\""},
		{"two devices with one bare name: the other device's ask to 'pi' is discarded as its own", "pi",
			[]Event{ev(1, "d1", "pi", "pi", "", "open", "")},
			nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Derive(c.log, c.agent)
			if g := ids(got); !reflect.DeepEqual(g, append([]string{}, c.owed...)) {
				t.Fatalf("owed %v, want %v", g, c.owed)
			}
			if c.whyHas != "" && !strings.Contains(got[0].Why, c.whyHas) {
				t.Fatalf("why %q lacks %q", got[0].Why, c.whyHas)
			}
			for _, it := range got {
				if !strings.Contains(it.Why, `mempalace_event_ack(event_id="`+it.Event.ID+`"`) {
					t.Errorf("why of %s does not say how to clear it: %q", it.Event.ID, it.Why)
				}
			}
		})
	}
}

// §7.7: two devices sharing the bare name "pi" cannot reach each other;
// the mailbox and the outgoing-write check both say so.
func TestBareNameOnTwoDevicesWarns(t *testing.T) {
	// device B writes an ask meant for device A; both call themselves "pi"
	ask := map[string]any{"type": "task.request", "stream": "devbox", "room": "coord", "from_agent": "pi", "to_agent": "pi", "status": "open"}
	if w := CheckFromAgent(record("mempalace_event_append"), "mempalace_event_append", ask); !strings.Contains(w, `from_agent "pi" is bare`) {
		t.Fatalf("append from bare pi: warning %q", w)
	}
	r := build([]Event{ev(1, "d1", "pi", "pi", "", "open", "")}, "pi", "", 0)
	if r.Count != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `agent identity "pi" is bare`) {
		t.Fatalf("device A's mailbox: %+v", r)
	}
	// with device identities the same ask is delivered and nobody is warned
	ask["from_agent"], ask["to_agent"] = "pi@desk", "pi@laptop"
	if w := CheckFromAgent(record("mempalace_event_append"), "mempalace_event_append", ask); w != "" {
		t.Fatalf("stamped append warned: %q", w)
	}
	r = build([]Event{ev(1, "d1", "pi@desk", "pi@laptop", "", "open", "")}, "pi@laptop", "", 0)
	if r.Count != 1 || r.Warnings != nil {
		t.Fatalf("stamped mailbox: %+v", r)
	}
}

func TestCheckFromAgent(t *testing.T) {
	cases := []struct {
		tool string
		args map[string]any
		want string // substring; "" means no warning
	}{
		{"mempalace_event_append", map[string]any{"type": "x"}, "from_agent is missing"},
		{"mempalace_event_ack", map[string]any{"event_id": "e", "from_agent": "  "}, "from_agent is blank"},
		{"mempalace_patch_submit", map[string]any{"from_agent": "opencode"}, `"opencode" is bare`},
		{"mempalace_event_ack", map[string]any{"from_agent": "opencode@"}, "is bare"},
		{"mempalace_event_append", map[string]any{"from_agent": 7.0}, "not a string"},
		{"mempalace_event_append", map[string]any{"from_agent": "opencode@box"}, ""},
		{"mempalace_event_list", map[string]any{"from_agent": "pi"}, ""}, // a read names nobody as writer
		{"mempalace_add_drawer", map[string]any{}, ""},
	}
	for _, c := range cases {
		before := len(c.args)
		got := CheckFromAgent(record(c.tool), c.tool, c.args)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s %v: %q, want %q", c.tool, c.args, got, c.want)
		}
		if len(c.args) != before {
			t.Errorf("%s: args changed", c.tool)
		}
	}
}

// Offline, a reply still in the outbox counts as sent; a claim does not.
func TestPendingRepliesCountAsSent(t *testing.T) {
	const peer = "pi@laptop"
	seen := []Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "a2", peer, me, "", "open", ""), ev(3, "a3", peer, me, "c3", "open", "")}
	pending := []map[string]any{
		{"type": "task.result", "stream": "devbox", "room": "coord", "from_agent": me, "to_agent": peer, "correlation_id": "c1", "status": "applied"},
		{"event_id": "a2", "from_agent": me, "status": "blocked", "body": "needs a token"},
		{"type": "task.progress", "stream": "devbox", "room": "coord", "from_agent": me, "to_agent": peer, "correlation_id": "c3", "status": "claimed"},
		{"content": "not an event"},
	}
	got := build(WithPending(seen, pending), me, "devbox", 0)
	if g := ids(got.Owed); !reflect.DeepEqual(g, []string{"a3"}) {
		t.Fatalf("owed %v, want [a3]", g)
	}
	if !strings.Contains(got.Owed[0].Why, "claimed (still in the outbox)") {
		t.Fatalf("why: %q", got.Owed[0].Why)
	}
	// without the outbox all three are owed
	if got := build(seen, me, "", 0); got.Count != 3 {
		t.Fatalf("without pending: %d owed", got.Count)
	}
}

// A reply still in the outbox whose to_agent, stream or correlation id
// (or an ack's event_id) has blanks at either end counts as sent, as it
// will once MemPalace files it stripped: the agent is not told to answer
// again offline what it answered already.
func TestPendingPaddedReplyCountsAsSent(t *testing.T) {
	const peer = "pi@laptop"
	seen := []Event{ev(1, "a1", peer, me, "c1", "open", ""), ev(2, "a2", peer, me, "", "open", "")}
	pending := []map[string]any{
		{"type": " task.result", "stream": "devbox\t", "room": "coord", "from_agent": me, "to_agent": " " + peer, "correlation_id": "c1 ", "status": "applied"},
		{"event_id": " a2\u3000", "from_agent": me, "status": "blocked"},
	}
	if got := build(WithPending(seen, pending), me, "devbox", 0); got.Count != 0 {
		t.Fatalf("owed %v, want none: the padded replies are filed stripped", ids(got.Owed))
	}
}

func TestItemJSONIsThePrimarysObjectPlusWhy(t *testing.T) {
	raw := `{"id":"evt_1","seq":4,"z_unknown_field":{"kept":[1,2.50]},"to_agent":"opencode@box","from_agent":"pi@laptop","metadata":{}}`
	e, err := ParseEvent(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Item{Event: e, Why: `owed "because"`})
	if err != nil {
		t.Fatal(err)
	}
	want := raw[:len(raw)-1] + `,"why":"owed \"because\""}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestParseArgs(t *testing.T) {
	agent, stream, limit, err := ParseArgs(map[string]any{}, me)
	if err != nil || agent != me || stream != "" || limit != DefaultLimit {
		t.Fatalf("defaults: %q %q %d %v", agent, stream, limit, err)
	}
	agent, stream, limit, err = ParseArgs(map[string]any{"agent": "pi@laptop", "stream": "devbox", "limit": 3.0}, me)
	if err != nil || agent != "pi@laptop" || stream != "devbox" || limit != 3 {
		t.Fatalf("given: %q %q %d %v", agent, stream, limit, err)
	}
	for _, bad := range []map[string]any{{"limit": 0.0}, {"limit": 501.0}, {"limit": 2.5}, {"limit": "5"}, {"agent": 1.0}, {"agent": "*"}} {
		if _, _, _, err := ParseArgs(bad, me); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, _, _, err := ParseArgs(map[string]any{}, ""); err == nil || !strings.Contains(err.Error(), "no agent identity") {
		t.Errorf("no identity: %v", err)
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(InputSchema), &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("InputSchema: %v %v", schema, err)
	}
}

// record is a tool's catalogue record, as the edge passes it.
func record(name string) catalogue.Tool {
	t, _ := catalogue.Lookup(name)
	return t
}

// A view of owed asks kept between reads drops what the agent's own reply
// clears, by the derivation's join: a terminal event_ack of the ask, or a
// terminal event_append to its sender sharing its correlation id; not a
// claim, not a reply to another sender on the same correlation id, and
// not another agent's reply.
func TestClearedByAReply(t *testing.T) {
	corr := "thread-1"
	owed := []Event{{ID: "evt_a", FromAgent: "pi@laptop"}, {ID: "evt_b", Stream: "s", FromAgent: "pi@laptop", CorrelationID: &corr},
		{ID: "evt_c", Stream: "other", FromAgent: "pi@laptop", CorrelationID: &corr}}
	for _, c := range []struct {
		name  string
		reply map[string]any
		want  []string
	}{
		{"ack applied", map[string]any{"event_id": "evt_a", "from_agent": "opencode@desk", "status": "applied"}, []string{"evt_a"}},
		{"ack claimed", map[string]any{"event_id": "evt_a", "from_agent": "opencode@desk", "status": "claimed"}, nil},
		{"another agent's ack", map[string]any{"event_id": "evt_a", "from_agent": "pi@desk", "status": "applied"}, nil},
		{"reply on the thread", map[string]any{"type": "task.result", "stream": "s", "from_agent": "opencode@desk", "to_agent": "pi@laptop", "correlation_id": "thread-1", "status": "blocked"}, []string{"evt_b"}},
		{"reply on the thread in the other stream", map[string]any{"type": "task.result", "stream": "other", "from_agent": "opencode@desk", "to_agent": "pi@laptop", "correlation_id": "thread-1", "status": "blocked"}, []string{"evt_c"}},
		{"reply to another sender on the thread", map[string]any{"type": "task.result", "stream": "s", "from_agent": "opencode@desk", "to_agent": "codex@mal", "correlation_id": "thread-1", "status": "blocked"}, nil},
		{"reply naming the ask", map[string]any{"type": "task.result", "stream": "s", "from_agent": "opencode@desk", "status": "failed", "metadata": map[string]any{"ack_of": "evt_b"}}, []string{"evt_b"}},
		{"ack of the ask on the thread in one stream", map[string]any{"event_id": "evt_c", "from_agent": "opencode@desk", "status": "blocked"}, []string{"evt_c"}},
		{"not a reply", map[string]any{"from_agent": "opencode@desk"}, nil},
	} {
		if got := Cleared("opencode@desk", owed, c.reply); !slices.Equal(got, c.want) {
			t.Errorf("%s: cleared %v, want %v", c.name, got, c.want)
		}
	}
}

// Under a limit the asks from trusted senders are kept first: a device
// that marks (does not withhold) what it does not trust, owing 600 asks
// from an untrusted sender written before two from a trusted one, lists
// both trusted asks at the default limit and at the tool's largest, in
// the log's order, "more" counting the untrusted rest. Before, the oldest
// limit items were kept, all untrusted, and no limit the tool takes
// listed the trusted asks (the session start told them, with "call
// mempalace_mailbox for all of them").
func TestAFloodOfUntrustedAsksHidesNoTrustedAskBehindTheLimit(t *testing.T) {
	withOrigin := func(e Event, device string, trusted bool) Event {
		return stamped(t, e, fmt.Sprintf(`{"device":%q,"trusted":%t}`, device, trusted))
	}
	var log []Event
	log = append(log, withOrigin(ev(1, "mal-0", "codex@mal", me, "", "open", ""), "mal", false))
	log = append(log, withOrigin(ev(2, "ops-a", "pi@ops", me, "", "open", ""), "ops", true))
	for i := range 600 {
		log = append(log, withOrigin(ev(int64(3+i), fmt.Sprint("mal-", i+1), "codex@mal", me, "", "open", ""), "mal", false))
	}
	log = append(log, withOrigin(ev(700, "ops-b", "pi@ops", me, "", "open", ""), "ops", true))
	for _, limit := range []int{DefaultLimit, PageCap, 2, 1} {
		r, err := Owed(context.Background(), &fakeSource{log: log}, me, "", limit)
		if err != nil {
			t.Fatal(err)
		}
		got := ids(r.Owed)
		want := []string{"mal-0", "ops-a"}
		for i := 1; len(want) < limit-1; i++ {
			want = append(want, fmt.Sprint("mal-", i))
		}
		want = append(want, "ops-b")
		switch limit {
		case 2:
			want = []string{"ops-a", "ops-b"}
		case 1:
			want = []string{"ops-a"}
		}
		if !slices.Equal(got, want) || r.More != 603-len(want) {
			t.Errorf("limit %d: owed %v (more %d), want %v (more %d)", limit, got, r.More, want, 603-len(want))
		}
	}
}

// stamped is e with the gateway's origin object o.
func stamped(t *testing.T, e Event, o string) Event {
	t.Helper()
	raw, err := sjson.SetRawBytes(e.Raw, "origin", []byte(o))
	if err != nil {
		t.Fatal(err)
	}
	e.Raw = raw
	return e
}

// An ack clears the ask it names and no other on its thread: not an ask
// written around the gateway (origin unknown) with a trusted device's
// agent name and that device's ask's correlation id (refusing it leaves
// the trusted ask owed, and the other way round; before, the agent name
// alone was compared and the refusal cleared the trusted ask, attack45
// F2), nor the same sender's earlier ask (attack55 F2).
func TestAnAckClearsOnlyTheAskItNames(t *testing.T) {
	const desk, unknown, none = `{"device":"desk-2","trusted":true}`, `{"device":"unknown","trusted":false}`, ""
	const joinedDesk = `{"device":"desk-2","via":"ops-1","trusted":true}`
	ask := func(seq int64, id, o string) Event {
		e := ev(seq, id, "pi@desk", me, "c-desk-3", "open", "")
		if o == none {
			return e
		}
		return stamped(t, e, o)
	}
	ack := func(seq int64, of string) Event { return ev(seq, "k"+of, me, "pi@desk", "c-desk-3", "blocked", of) }
	for _, c := range []struct {
		name string
		log  []Event
		owed []string
	}{
		{"refusing the forged ask leaves the genuine one", []Event{ask(1, "genuine", desk), ask(2, "forged", unknown), ack(3, "forged")}, []string{"genuine"}},
		{"answering the genuine ask leaves the forged one", []Event{ask(1, "forged", unknown), ask(2, "genuine", desk), ack(3, "genuine")}, []string{"forged"}},
		{"an ask with no origin is another sender than a stamped one", []Event{ask(1, "old", none), ask(2, "genuine", desk), ack(3, "genuine")}, []string{"old"}},
		{"a join's ask (via an admin) is another sender than the device's own", []Event{ask(1, "replayed", joinedDesk), ask(2, "genuine", desk), ack(3, "genuine")}, []string{"replayed"}},
		{"the same device's earlier ask is not answered", []Event{ask(1, "first", desk), ask(2, "second", desk), ack(3, "second")}, []string{"first"}},
		{"without a gateway (no origins) neither", []Event{ask(1, "first", none), ask(2, "second", none), ack(3, "second")}, []string{"first"}},
	} {
		if got := ids(Derive(c.log, me)); !slices.Equal(got, append([]string{}, c.owed...)) {
			t.Errorf("%s: owed %v, want %v", c.name, got, c.owed)
		}
	}
}

// An answer clears an ask only when its origin vouches that the asked
// agent's device wrote it: a stamped answer (the gateway lets only the
// device holding an agent write as it), or one with no origin (no
// gateway; the agent's own write still in the outbox). An ack or a
// metadata.ack_of reply written around the gateway (origin unknown) in
// the asked agent's name never clears a stamped ask, and clears an
// unstamped one only for a reader that trusts unknown origins; the ask
// stays owed, its why saying it was answered by an untrusted sender.
// Before, the forged answer cleared the trusted ask (outside tester,
// attack46 N6).
func TestAnAnswerOfUnknownOriginClearsNoStampedAsk(t *testing.T) {
	const ops, unknown, openUnknown = `{"device":"ops-1","trusted":true}`, `{"device":"unknown","trusted":false}`, `{"device":"unknown","trusted":true}`
	const desk = `{"device":"desk-2","trusted":true}`
	ask := func(o string) Event { return stamped(t, ev(1, "ask", "pi@ops", me, "c-ops-1", "open", ""), o) }
	ack := func(o string) Event { return stamped(t, ev(2, "ack", me, "pi@ops", "c-ops-1", "applied", "ask"), o) }
	reply := func(o string) Event { // an event_append reply naming the ask in metadata.ack_of
		e := ev(2, "reply", me, "pi@ops", "", "applied", "ask")
		e.Type = "task.result"
		return stamped(t, e, o)
	}
	for _, c := range []struct {
		name      string
		log       []Event
		untrusted bool // owed, answered by an untrusted sender
	}{
		{"a forged ack of a trusted ask", []Event{ask(ops), ack(unknown)}, true},
		{"a forged ack_of reply of a trusted ask", []Event{ask(ops), reply(unknown)}, true},
		{"a forged reply on the ask's thread", []Event{ask(ops), stamped(t, ev(2, "corr", me, "pi@ops", "c-ops-1", "applied", ""), unknown)}, true},
		{"a forged ack, read by a device that trusts unknown origins", []Event{ask(ops), ack(openUnknown)}, true},
		{"a forged ack of an unstamped ask, read by a device with a trusted set", []Event{ask(unknown), ack(unknown)}, true},
		{"an unknown ack of an unstamped ask, read by a device that trusts unknown origins", []Event{ask(openUnknown), ack(openUnknown)}, false},
		{"the asked device's own ack", []Event{ask(ops), ack(desk)}, false},
		{"the asked device's ack of an unstamped ask", []Event{ask(unknown), ack(desk)}, false},
		{"no gateway", []Event{ev(1, "ask", "pi@ops", me, "c-ops-1", "open", ""), ev(2, "ack", me, "pi@ops", "c-ops-1", "applied", "ask")}, false},
	} {
		owed := Derive(c.log, me)
		switch {
		case !c.untrusted && len(owed) != 0:
			t.Errorf("%s: still owed: %v", c.name, owed)
		case c.untrusted && len(owed) != 1:
			t.Errorf("%s: owed %v, want the ask", c.name, ids(owed))
		case c.untrusted && !strings.Contains(owed[0].Why, "answered by an untrusted sender"):
			t.Errorf("%s: why does not say it was answered by an untrusted sender: %s", c.name, owed[0].Why)
		}
	}
	// The agent's own ack, still in the outbox, clears it.
	pending := WithPending([]Event{ask(ops), ack(unknown)}, []map[string]any{{"event_id": "ask", "from_agent": me, "status": "applied"}})
	if owed := Derive(pending, me); len(owed) != 0 {
		t.Errorf("the agent's own ack in the outbox does not clear it: %v", ids(owed))
	}
}

// An answer settles only the ask it answers, and the mailbox of every
// stream agrees with the mailbox of one: pi@wide asks w-2 on stream mb55
// and on mb55b (and w-3 on both); the agent acks mb55b's w-2 (the ack
// copies w-2) and replies on mb55b's w-3. Both mb55 asks stay owed in
// the whole mailbox as in --stream mb55. Before, the whole mailbox
// dropped them (the ack and the reply joined them by correlation id)
// while --stream mb55, which does not read mb55b, listed them (outside
// tester, attack55 F2).
func TestAnAnswerSettlesOnlyTheAskItAnswers(t *testing.T) {
	const peer = "pi@wide"
	on := func(e Event, stream string) Event { return onStream(t, e, stream) }
	log := []Event{
		on(ev(1, "a1", peer, me, "w-2", "open", ""), "mb55"), on(ev(2, "a2", peer, me, "w-2", "open", ""), "mb55b"),
		on(ev(3, "a3", peer, me, "w-3", "open", ""), "mb55"), on(ev(4, "a4", peer, me, "w-3", "open", ""), "mb55b"),
		on(ev(5, "k2", me, peer, "w-2", "blocked", "a2"), "mb55b"), on(ev(6, "r4", me, peer, "w-3", "applied", ""), "mb55b"),
	}
	for stream, want := range map[string][]string{"": {"a1", "a3"}, "mb55": {"a1", "a3"}, "mb55b": nil} {
		r, err := Owed(context.Background(), &fakeSource{log: log}, me, stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(r.Owed); !slices.Equal(got, append([]string{}, want...)) {
			t.Errorf("stream %q: owed %v, want %v", stream, got, want)
		}
		if len(r.Owed) > 0 && !strings.Contains(r.Owed[0].Why, `or correlation_id="w-2" on stream "mb55" addressed to "pi@wide"`) {
			t.Errorf("the why does not name the stream a reply must be on: %s", r.Owed[0].Why)
		}
	}
}

// An ack (metadata.ack_of) written on another stream than the ask's
// settles the ask it names in the mailbox of the ask's stream as in the
// whole mailbox: pi@wide asks on mb57x, the agent answers on mb57 naming
// the ask. Before, --stream mb57x read only mb57x's events, missed the
// answer and listed the ask owed ("no reply of yours joins it yet") while
// the whole mailbox did not (outside tester, attack57 A1). So does one
// still in the outbox, read offline from the whole mailbox's view.
func TestAnAckOnAnotherStreamSettlesTheAskInItsStreamsMailbox(t *testing.T) {
	const peer = "pi@wide"
	on := func(e Event, stream string) Event { return onStream(t, e, stream) }
	ask, other := on(ev(1, "b1", peer, me, "c2", "open", ""), "mb57x"), on(ev(2, "b2", peer, me, "c3", "open", ""), "mb57x")
	src := &fakeSource{log: []Event{ask, other, on(ev(3, "r1", me, peer, "c9", "applied", "b1"), "mb57")}}
	for _, stream := range []string{"", "mb57x"} {
		r, err := Owed(context.Background(), src, me, stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(r.Owed); !slices.Equal(got, []string{"b2"}) {
			t.Errorf("stream %q: owed %v, want only b2 (b1 was answered on mb57)", stream, got)
		}
	}
	if r, _ := Owed(context.Background(), src, me, "mb57", 0); r.Count != 0 {
		t.Errorf("stream mb57, where no ask is: owed %v", ids(r.Owed))
	}
	src.log = src.log[:2]
	m := &Mailbox{Src: src}
	if _, err := m.Owed(context.Background(), me, "", 0, nil); err != nil {
		t.Fatal(err)
	}
	src.down.Store(true)
	pending := []map[string]any{{"type": "reply", "stream": "mb57", "from_agent": me, "to_agent": peer, "correlation_id": "c9", "status": "applied", "metadata": map[string]any{"ack_of": "b1"}}}
	r, err := m.Owed(context.Background(), me, "mb57x", 0, pending)
	if err != nil || !r.Degraded || !slices.Equal(ids(r.Owed), []string{"b2"}) {
		t.Errorf("offline, --stream mb57x from the whole mailbox's view, the answer in the outbox: owed %v, degraded %v, err %v; want b2 only, degraded", ids(r.Owed), r.Degraded, err)
	}
}

// onStream is e written on stream.
func onStream(t *testing.T, e Event, stream string) Event {
	t.Helper()
	raw, err := sjson.SetBytes(e.Raw, "stream", stream)
	if err != nil {
		t.Fatal(err)
	}
	e.Raw, e.Stream = raw, stream
	return e
}

// A mailbox read for one stream says so, and how many are owed on the
// others: a hook with a misspelled stream ("devbx") is not told an empty
// mailbox. Before, the text was the one of a truly empty mailbox and the
// tool's JSON said count 0 with no hint (outside tester, attack93 F7).
func TestAStreamsMailboxSaysTheStreamAndTheOthers(t *testing.T) {
	const peer = "pi@wide"
	on := func(e Event, stream string) Event { return onStream(t, e, stream) }
	src := &fakeSource{log: []Event{on(ev(1, "d1", peer, me, "", "open", ""), "devbox"), on(ev(2, "d2", peer, me, "", "open", ""), "devbox"), on(ev(3, "o1", peer, me, "", "open", ""), "ops")}}
	for stream, want := range map[string]struct {
		text  string
		other int
	}{
		"devbx":  {`Nothing is owed by "` + me + `" on stream "devbx" (3 owed on other streams).`, 3},
		"ops":    {`1 item is owed by "` + me + `" on stream "ops" (2 owed on other streams):`, 2},
		"devbox": {`2 items are owed by "` + me + `" on stream "devbox" (oldest first; 1 owed on other streams):`, 1},
		"":       {`3 items are owed by "` + me + `" (oldest first):`, 0},
	} {
		r, err := Owed(context.Background(), src, me, stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.SplitN(r.Text(), "\n", 2)[0]; got != want.text {
			t.Errorf("stream %q: the text starts %q, want %q", stream, got, want.text)
		}
		b, _ := json.Marshal(r)
		if r.OtherStreams != want.other || stream != "" && !strings.Contains(string(b), fmt.Sprintf(`"other_streams":%d`, want.other)) {
			t.Errorf("stream %q: other_streams %d, want %d: %s", stream, r.OtherStreams, want.other, b)
		}
	}
}
