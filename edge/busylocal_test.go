package edge

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
)

// answerText is a raw answer's first text block, decoded (nil: none).
func answerText(a map[string]any) map[string]any {
	res, _ := a["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return nil
	}
	block, _ := content[0].(map[string]any)
	var m map[string]any
	json.Unmarshal([]byte(asString(block["text"])), &m)
	return m
}

// A long mine (local only, never replicated) does not hold up the agent's
// other calls: a search sent while it runs gets the primary's answer at
// once (not after the call timeout: noWait), marked degraded, instead of
// waiting in the edge's line for the whole mine (found by an outside
// tester: a search during an 80 s mine was not answered within 60 s). The
// write before the mine keeps the mine out of the child-only relay, so it
// goes through the edge's ordering.
func TestASearchDuringAMineIsNotHeldUpByIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: noWait, childExitWait: 200 * time.Millisecond, stopGrace: 100 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_mine=120000,mempalace_add_drawer=300"}})
	h.handshake()
	h.ready()
	h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})

	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written before the mine"}))
	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine") // (sent with it, the search may reach the local palace first: both wait for the write)
	h.send(toolCall("search", "mempalace_search", map[string]any{"query": "fleet knows"}))
	a := h.await("search", 20*time.Second)
	if a == nil {
		t.Fatalf("a search sent during a mine was not answered while the mine runs")
	}
	got := answerText(a)
	ed, _ := got["edge"].(map[string]any)
	if hits, _ := got["results"].([]any); len(hits) == 0 || palaceOf(hits[0]) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy mining") {
		t.Errorf("search during a mine: %v, want the primary's hit, marked degraded, saying the local palace is busy mining", got)
	}
	if _, answered := h.seen["mine"]; answered {
		t.Errorf("the mine was answered already: the test did not run a search during it")
	}
}

// A KG read while this device has an unsent fact about the entity asks
// the local palace (read-your-writes); with the local palace busy with a
// mine, it does not wait for it: the primary answers at once, marked
// degraded, saying this device's unsent facts are not in it (the outside
// tester's kg_query took 78 s during a mine).
func TestAKGReadDuringAMineFallsBackToThePrimary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: noWait, childExitWait: 200 * time.Millisecond, stopGrace: 100 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_mine=120000"}})
	h.handshake()
	h.ready()
	h.onPrimary("kg_add", map[string]any{"subject": "edge", "predicate": "runs", "object": "fleet"}) // the fleet's fact
	// This device's fact stays unsent: the primary answers its kg_add
	// "database is locked" and stays up (a held send would time out and
	// open the breaker, and the reads would then wait for the local palace).
	h.srv.FailTool("mempalace_kg_add", 1000, fakepalace.FailErrorField)
	h.send(toolCall("add", "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "outbox"}))
	if a := h.await("add", 20*time.Second); a["result"] == nil {
		t.Fatalf("kg_add: %v", a)
	}

	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine")
	h.send(toolCall("q", "mempalace_kg_query", map[string]any{"entity": "edge"}))
	a := h.await("q", 20*time.Second)
	if a == nil {
		t.Fatalf("a kg_query during a mine was not answered while the mine runs")
	}
	got := answerText(a)
	ed, _ := got["edge"].(map[string]any)
	if got["count"] != 1.0 || ed["source"] != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") || !strings.Contains(asString(ed["local"]), "not on the primary yet") {
		t.Errorf("kg_query during a mine, with an unsent fact: %v, want the primary's fact, marked degraded, saying the local palace is busy and this device's fact is not on the primary yet", got)
	}
	if _, answered := h.seen["mine"]; answered {
		t.Errorf("the mine was answered already: the test did not run a kg_query during it")
	}
}

// Once the local palace has been at one call for longer than the call
// timeout (a call the catalogue does not know as long: a reconnect of a
// palace on a stuck disk), the reads after it do not each wait the
// timeout again: the primary answers them at once, marked degraded,
// saying the local palace is busy, and the local palace is not asked at
// all (it would get them only after that call). Once it has answered,
// reads are merged again. The call here lasts until the test releases it;
// the call timeout is short so that the first search during it runs out
// of it (no duration is asserted: what reached the local palace is).
func TestReadsAfterTheLocalPalaceOutlastedTheTimeoutSkipIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: 500 * time.Millisecond, policy: `{"version":1,"wings":{"private":{"replicate":"local"}}}`,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_reconnect"}})
	h.handshake()
	h.ready()
	h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})
	h.onPrimary("kg_add", map[string]any{"subject": "edge", "predicate": "runs", "object": "fleet"})
	h.srv.FailTool("mempalace_kg_add", 1000, fakepalace.FailErrorField) // this device's fact stays unsent: a kg_query of it asks the local palace
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "private", "room": "r", "content": "this device knows this"}))
	h.send(toolCall("fact", "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "outbox"}))
	for _, id := range []string{"add", "fact"} {
		if a := h.await(id, 20*time.Second); a["result"] == nil {
			t.Fatalf("%s: %v", id, a)
		}
	}

	h.send(toolCall("slow", "mempalace_reconnect", map[string]any{}))
	h.atTheLocalPalace("mempalace_reconnect")
	for _, id := range []string{"first", "second"} {
		h.send(toolCall(id, "mempalace_search", map[string]any{"query": "knows this"}))
		got := answerText(h.await(id, 20*time.Second))
		ed, _ := got["edge"].(map[string]any)
		if hits, _ := got["results"].([]any); len(hits) != 1 || palaceOf(hits[0]) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") || strings.Contains(asString(ed["local"]), "mining") {
			t.Errorf("%s search during the slow call: %v, want the primary's hit alone, marked degraded, saying the local palace is busy", id, got)
		}
	}
	h.send(toolCall("q", "mempalace_kg_query", map[string]any{"entity": "edge"}))
	got := answerText(h.await("q", 20*time.Second))
	if ed, _ := got["edge"].(map[string]any); got["count"] != 1.0 || ed["source"] != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") || !strings.Contains(asString(ed["local"]), "not on the primary yet") {
		t.Errorf("kg_query during the slow call: %v, want the primary's fact, marked degraded, saying the local palace is busy and this device's fact is not on the primary yet", got)
	}
	if _, answered := h.seen["slow"]; answered {
		t.Fatalf("the slow call was answered already: the test did not read during it")
	}

	h.releaseLocalHold()
	if a := h.await("slow", 20*time.Second); a["result"] == nil {
		t.Fatalf("reconnect: %v", a)
	}
	h.send(toolCall("after", "mempalace_search", map[string]any{"query": "knows this"}))
	got = answerText(h.await("after", 20*time.Second))
	if hits, _ := got["results"].([]any); len(hits) != 2 || got["degraded"] != nil || !slices.ContainsFunc(hits, func(h any) bool { return palaceOf(h) == "local" }) {
		t.Errorf("search after the slow call: %v, want both palaces' hits, merged", got)
	}
	// The local palace's trace reaches the test beside its answers, not
	// in step with them: once a call sent after them all is in it, so are
	// the reads.
	h.send(toolCall("marker", "mempalace_get_drawer", map[string]any{"drawer_id": "drawer_marker"}))
	h.await("marker", 20*time.Second)
	h.atTheLocalPalace("mempalace_get_drawer")
	searches, queries := 0, 0
	for _, m := range h.childReceived() {
		switch m.Name {
		case "mempalace_search":
			searches++
		case "mempalace_kg_query":
			queries++
		}
	}
	// The first search may have been sent (the call had not yet been at
	// it for the call timeout); the second, sent after that, may not.
	if searches > 2 || queries != 0 {
		t.Errorf("the local palace got %d searches and %d kg_query: want at most 2 searches (the first during the slow call and the one after it) and no kg_query: the reads after the first waited for the busy local palace", searches, queries)
	}
}

// noWait is a call timeout no read during a mine may wait out: the tests
// that use it await each answer for well under it.
const noWait = time.Minute

// The edge knows it sent the mine (catalogue LongJob), so the FIRST read
// during it does not wait behind it for the call timeout either: a search,
// a get_drawer and a KG read of this device's unsent fact are answered by
// the primary at once, marked degraded, saying the local palace is mining
// and was not asked; a write during the mine still goes to the local
// palace and waits for it; once the mine is answered, reads ask the local
// palace again. The call timeout is a minute and each answer is awaited
// for 20 s: a read that waited for the timeout fails the test.
func TestTheFirstReadDuringAMineDoesNotWaitForIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: noWait, policy: `{"version":1,"wings":{"private":{"replicate":"local"}}}`,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_mine"}})
	h.handshake()
	h.ready()
	fleet := asString(h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})["drawer_id"])
	h.onPrimary("kg_add", map[string]any{"subject": "edge", "predicate": "runs", "object": "fleet"})
	h.srv.FailTool("mempalace_kg_add", 1000, fakepalace.FailErrorField) // this device's fact stays unsent: a kg_query of it asks the local palace
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "private", "room": "r", "content": "this device knows this"}))
	h.send(toolCall("fact", "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "outbox"}))
	for _, id := range []string{"add", "fact"} {
		if a := h.await(id, 20*time.Second); a["result"] == nil {
			t.Fatalf("%s: %v", id, a)
		}
	}

	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine")
	mining := func(what string, got map[string]any) {
		t.Helper()
		if ed, _ := got["edge"].(map[string]any); got["degraded"] != true || !strings.Contains(asString(ed["local"]), "mining") || !strings.Contains(asString(ed["local"]), "not asked") {
			t.Errorf("%s during a mine: %v, want it marked degraded, saying the local palace is mining and was not asked", what, got)
		}
	}
	h.send(toolCall("search", "mempalace_search", map[string]any{"query": "knows this"}))
	got := answerText(h.await("search", 20*time.Second))
	if hits, _ := got["results"].([]any); len(hits) != 1 || palaceOf(hits[0]) != "primary" {
		t.Errorf("the first search during a mine: %v, want the primary's hit alone", got)
	}
	mining("the first search", got)
	h.send(toolCall("get", "mempalace_get_drawer", map[string]any{"drawer_id": fleet}))
	got = answerText(h.await("get", 20*time.Second))
	if got["content"] != "the fleet knows this" || palaceOf(got) != "primary" {
		t.Errorf("get_drawer during a mine: %v, want the primary's drawer", got)
	}
	mining("get_drawer", got)
	h.send(toolCall("q", "mempalace_kg_query", map[string]any{"entity": "edge"}))
	got = answerText(h.await("q", 20*time.Second))
	if ed, _ := got["edge"].(map[string]any); got["count"] != 1.0 || ed["source"] != "primary" || !strings.Contains(asString(ed["local"]), "not on the primary yet") {
		t.Errorf("kg_query during a mine, with an unsent fact: %v, want the primary's fact, saying this device's fact is not on the primary yet", got)
	}
	mining("kg_query", got)

	// A write goes to the local palace, behind the mine.
	h.send(toolCall("write", "mempalace_add_drawer", map[string]any{"wing": "private", "room": "r", "content": "this device also knows this"}))
	h.eventually("the write at the local palace, behind the mine", func() bool { return h.relayedInFlight() == 2 })
	if _, answered := h.seen["mine"]; answered {
		t.Fatalf("the mine was answered already: the test did not read during it")
	}
	h.releaseLocalHold()
	for _, id := range []string{"mine", "write"} {
		if a := h.await(id, 20*time.Second); a["result"] == nil || answerText(a)["error"] != nil {
			t.Fatalf("%s: %v", id, a)
		}
	}
	if n := h.localState().CountContent("this device also knows this"); n != 1 {
		t.Errorf("the write during the mine is %d times in the local palace, want 1", n)
	}
	h.send(toolCall("after", "mempalace_search", map[string]any{"query": "knows this"}))
	got = answerText(h.await("after", 20*time.Second))
	if hits, _ := got["results"].([]any); len(hits) != 3 || got["degraded"] != nil || !slices.ContainsFunc(hits, func(h any) bool { return palaceOf(h) == "local" }) {
		t.Errorf("search after the mine: %v, want both palaces' hits, merged", got)
	}
	// The local palace's trace reaches the test beside its answers: once a
	// call sent after them all is in it, so are the reads.
	h.send(toolCall("marker", "mempalace_get_drawer", map[string]any{"drawer_id": "drawer_marker"}))
	h.await("marker", 20*time.Second)
	h.atTheLocalPalace("mempalace_get_drawer")
	asked := map[string]int{}
	for _, m := range h.childReceived() {
		asked[m.Name]++
	}
	if asked["mempalace_search"] != 1 || asked["mempalace_get_drawer"] != 1 || asked["mempalace_kg_query"] != 0 {
		t.Errorf("the local palace got %d searches, %d get_drawer and %d kg_query: want only the search and the get_drawer after the mine", asked["mempalace_search"], asked["mempalace_get_drawer"], asked["mempalace_kg_query"])
	}
}

// relayedInFlight is how many relayed calls the local palace has not
// answered.
func (h *harness) relayedInFlight() int {
	c := h.edge.child.live()
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// releaseLocalHold ends the hold FAKEPALACE_HOLD_ON put on the local
// palace's calls.
func (h *harness) releaseLocalHold() {
	h.t.Helper()
	if err := h.edge.child.live().cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		h.t.Fatal(err)
	}
}

// TestRealASearchDuringAMineAnswers is the search during a mine against
// real MemPalace: a mine of a few hundred small files by a real
// mempalace-mcp, sent right behind a write (so it goes through the edge's
// ordering), and a search sent right after it answered from real
// mempalace serve while the mine still runs, marked degraded, saying the
// local palace is mining and was not asked; a second search and a
// get_drawer likewise. The call timeout is two minutes: a read that
// waited for it would miss its 60 s deadline.
func TestRealASearchDuringAMineAnswers(t *testing.T) {
	r := startRealEdge(t, harnessOpts{raw: true, timeout: 2 * time.Minute, childExitWait: 200 * time.Millisecond}, "")
	h := r.harness
	h.handshake()
	h.ready()
	fleet := asString(r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "fleet", "room": "r", "content": "the fleet chose sqlite for the outbox"})["drawer_id"])
	h.send(toolCall("warm", "mempalace_search", map[string]any{"query": "sqlite outbox"})) // both palaces' first search loads their collections
	if a := h.await("warm", 120*time.Second); a["result"] == nil {
		t.Fatalf("search before the mine: %v", a)
	}
	src := t.TempDir()
	for i := range 400 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("note%03d.md", i)), []byte(fmt.Sprintf("# Note %d\n\nA small file to mine, number %d, about the weather on day %d.\n", i, i, i)), 0o600)
	}

	began := time.Now()
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "notes", "room": "r", "content": "filed just before the mine"}))
	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": src, "wing": "mined"}))
	// The mine waits for the write before it, and so would a search sent
	// now: once the write is answered, either may reach the local palace
	// first. The search goes once the mine is there.
	h.eventually("the mine at the local palace", func() bool { c := h.edge.child.live(); return c != nil && c.longJob() == "mining" })
	h.send(toolCall("search", "mempalace_search", map[string]any{"query": "sqlite outbox"}))
	a := h.await("search", 60*time.Second)
	if a == nil {
		t.Fatalf("a search sent during a mine was not answered within 60 s")
	}
	t.Logf("the search during the mine was answered after %s", time.Since(began))
	if _, done := h.seen["mine"]; done {
		t.Fatalf("the mine of 400 files was over before the search was answered: nothing shown (answer %v)", answerText(a))
	}
	got := answerText(a)
	ed, _ := got["edge"].(map[string]any)
	if hits, _ := got["results"].([]any); len(hits) == 0 || palaceOf(hits[0]) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy mining") || !strings.Contains(asString(ed["local"]), "not asked") {
		t.Errorf("search during a real mine: %v, want the primary's hit, marked degraded, saying the local palace is busy mining and was not asked", got)
	}
	asked := time.Now()
	h.send(toolCall("again", "mempalace_search", map[string]any{"query": "sqlite outbox"}))
	got = answerText(h.await("again", 60*time.Second))
	t.Logf("the second search during the mine was answered after %s", time.Since(asked))
	if _, done := h.seen["mine"]; done {
		t.Fatalf("the mine was over before the second search was answered: nothing shown (answer %v)", got)
	}
	if ed, _ := got["edge"].(map[string]any); got["degraded"] != true || !strings.Contains(asString(ed["local"]), "not asked") {
		t.Errorf("the second search during a real mine: %v, want the primary's answer, marked degraded, saying the busy local palace was not asked", got)
	}
	// A get_drawer of a drawer only the primary holds likewise.
	asked = time.Now()
	h.send(toolCall("get", "mempalace_get_drawer", map[string]any{"drawer_id": fleet}))
	got = answerText(h.await("get", 60*time.Second))
	t.Logf("the get_drawer during the mine was answered after %s", time.Since(asked))
	if _, done := h.seen["mine"]; done {
		t.Fatalf("the mine was over before the get_drawer was answered: nothing shown (answer %v)", got)
	}
	if ed, _ := got["edge"].(map[string]any); got["content"] != "the fleet chose sqlite for the outbox" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "not asked") {
		t.Errorf("get_drawer during a real mine: %v, want the primary's drawer, marked degraded, saying the busy local palace was not asked", got)
	}
	if m := answerText(h.await("mine", 10*time.Minute)); m["error"] != nil {
		t.Errorf("the mine: %v", m)
	}
	t.Logf("the mine took %s", time.Since(began))
}

// A get_drawer during a long mine is answered by the primary at once,
// marked degraded, saying the local palace is busy mining: the outside
// tester's get_drawer of a drawer only the primary holds waited for the
// whole mine (53 s). The mine lasts until the test releases it.
func TestAGetDrawerDuringAMineAsksThePrimary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: noWait, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_mine"}})
	h.handshake()
	h.ready()
	id := asString(h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})["drawer_id"])

	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine")
	for _, call := range []string{"first", "second"} {
		h.send(toolCall(call, "mempalace_get_drawer", map[string]any{"drawer_id": id}))
		a := h.await(call, 20*time.Second)
		if a == nil {
			t.Fatalf("the %s get_drawer during a mine was not answered while the mine runs", call)
		}
		got := answerText(a)
		ed, _ := got["edge"].(map[string]any)
		if got["content"] != "the fleet knows this" || palaceOf(got) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") {
			t.Errorf("%s get_drawer during a mine: %v, want the primary's drawer, marked degraded, saying the local palace is busy", call, got)
		}
	}
	h.send(toolCall("bulk", "mempalace_get_drawers", map[string]any{"drawer_ids": []string{id}}))
	got := answerText(h.await("bulk", 20*time.Second))
	res, _ := got["results"].([]any)
	if ed, _ := got["edge"].(map[string]any); len(res) != 1 || palaceOf(res[0]) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") {
		t.Errorf("get_drawers during a mine: %v, want the primary's drawer, marked degraded, saying the local palace is busy", got)
	}
	if _, answered := h.seen["mine"]; answered {
		t.Fatalf("the mine was answered already: the test did not read during it")
	}
	h.releaseLocalHold()
	if a := h.await("mine", 20*time.Second); a["result"] == nil {
		t.Fatalf("mine: %v", a)
	}
}

// With the primary down during a long mine, reads are answered at once
// (not after the call timeout: noWait), with an error saying the local
// palace is busy mining and the primary unreachable (the outside tester's
// search got no answer in 40 s: the edge waited for the local palace, the
// only side left, for the whole mine).
func TestReadsDuringAMineWithThePrimaryDownAnswer(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: noWait, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_mine"}})
	h.handshake()
	h.ready()
	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine")
	h.srv.Stop()
	for _, c := range []struct {
		id, tool string
		args     map[string]any
	}{
		{"first", "mempalace_search", map[string]any{"query": "anything"}}, {"second", "mempalace_search", map[string]any{"query": "anything"}},
		{"get", "mempalace_get_drawer", map[string]any{"drawer_id": "drawer_w_r_0123456789abcdef01234567"}}, {"kg", "mempalace_kg_query", map[string]any{"entity": "edge"}},
	} {
		h.send(toolCall(c.id, c.tool, c.args))
		a := h.await(c.id, 20*time.Second)
		if a == nil {
			t.Fatalf("%s (%s) during a mine with the primary down was not answered while the mine runs", c.id, c.tool)
		}
		got := answerText(a)
		ed, _ := got["edge"].(map[string]any)
		if !strings.Contains(asString(got["error"]), "busy mining") || ed["local"] != "busy" || ed["primary"] == nil || ed["primary"] == "ok" {
			t.Errorf("%s (%s) during a mine with the primary down: %v, want an error saying the local palace is busy mining and the primary could not answer", c.id, c.tool, got)
		}
	}
	if _, answered := h.seen["mine"]; answered {
		t.Fatalf("the mine was answered already: the test did not read during it")
	}
	h.releaseLocalHold()
	if a := h.await("mine", 20*time.Second); a["result"] == nil {
		t.Fatalf("mine: %v", a)
	}
}

// An agent that cancels a long mine (MemPalace goes on mining: it does
// nothing with a cancellation) does not make the edge forget that the
// local palace is busy: the reads after it are answered by the primary at
// once, without asking the local palace, until it answers again.
func TestACancelledMineKeepsTheLocalPalaceBusy(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: noWait, childExitWait: 200 * time.Millisecond, policy: `{"version":1,"wings":{"private":{"replicate":"local"}}}`,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_mine"}})
	h.handshake()
	h.ready()
	h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})
	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "private", "room": "r", "content": "this device knows this"}))
	if a := h.await("add", 20*time.Second); a["result"] == nil {
		t.Fatalf("add: %v", a)
	}
	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.atTheLocalPalace("mempalace_mine")
	h.send(toolCall("first", "mempalace_search", map[string]any{"query": "knows this"}))
	if got := answerText(h.await("first", 20*time.Second)); got["degraded"] != true {
		t.Fatalf("search during the mine: %v, want the primary's answer, degraded", got)
	}
	h.send(cancelled("mine"))
	for _, id := range []string{"second", "third"} {
		h.send(toolCall(id, "mempalace_search", map[string]any{"query": "knows this"}))
		got := answerText(h.await(id, 20*time.Second))
		if ed, _ := got["edge"].(map[string]any); got["degraded"] != true || !strings.Contains(asString(ed["local"]), "not asked") {
			t.Errorf("%s search after the mine was cancelled (still mining): %v, want the primary's answer, degraded, the busy local palace not asked", id, got)
		}
	}
	h.releaseLocalHold()
	n := 0
	h.eventually("a merged search once the cancelled mine is over", func() bool {
		n++
		id := fmt.Sprint("after", n)
		h.send(toolCall(id, "mempalace_search", map[string]any{"query": "knows this"}))
		hits, _ := answerText(h.await(id, 20*time.Second))["results"].([]any)
		return len(hits) == 2
	})
}

// get_drawers asks the primary, in one get_drawers, for the ids the local
// palace does not have: the answer holds every drawer in the order asked,
// the primary's marked as its (the outside tester's bulk
// read said "Drawer not found" of a drawer get_drawer found on the
// primary).
func TestGetDrawersAsksThePrimaryForWhatTheLocalPalaceLacks(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{policy: `{"version":1,"wings":{"private":{"replicate":"local"}}}`})
	fleet := asString(h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})["drawer_id"])
	own, _ := h.call("add_drawer", map[string]any{"wing": "private", "room": "r", "content": "this device knows this"})
	nowhere := "drawer_w_r_0123456789abcdef01234567"
	got, _ := h.call("get_drawers", map[string]any{"drawer_ids": []string{fleet, asString(own["drawer_id"]), nowhere}})
	res, _ := got["results"].([]any)
	if len(res) != 3 || got["count"] != 3.0 || got["errors"] != 1.0 {
		t.Fatalf("get_drawers: %v, want 3 results, 1 error", got)
	}
	// (A drawer the local palace answers carries no origin, as a get_drawer's.)
	want := []struct{ content, palace string }{{"the fleet knows this", "primary"}, {"this device knows this", ""}, {"", ""}}
	for i, w := range want {
		r, _ := res[i].(map[string]any)
		if asString(r["content"]) != w.content || palaceOf(r) != w.palace {
			t.Errorf("get_drawers result %d: %v, want content %q from the %s palace", i, r, w.content, w.palace)
		}
	}
	if r, _ := res[2].(map[string]any); !strings.Contains(asString(r["error"]), "not found") || r["drawer_id"] != nowhere {
		t.Errorf("get_drawers of a drawer neither palace has: %v, want not found", res[2])
	}
	// The primary was asked once, for the two ids the local palace lacks;
	// a get_drawers the local palace answers whole does not ask it.
	h.call("get_drawers", map[string]any{"drawer_ids": []string{asString(own["drawer_id"])}})
	if n := h.primary.Calls("mempalace_get_drawers"); n != 1 {
		t.Errorf("the primary got %d get_drawers, want 1 (for the ids the local palace lacks, in the first call)", n)
	}
}
