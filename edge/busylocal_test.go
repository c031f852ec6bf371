package edge

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
// other calls: a search sent while it runs gets the primary's answer once
// the local palace has had the call timeout, marked degraded, instead of
// waiting in the edge's line for the whole mine (found by an outside
// tester: a search during an 80 s mine was not answered within 60 s). The
// write before the mine keeps the mine out of the child-only relay, so it
// goes through the edge's ordering.
func TestASearchDuringAMineIsNotHeldUpByIt(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: 500 * time.Millisecond, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_mine=120000,mempalace_add_drawer=300"}})
	h.handshake()
	h.ready()
	h.onPrimary("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the fleet knows this"})

	h.send(toolCall("add", "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written before the mine"}))
	h.send(toolCall("mine", "mempalace_mine", map[string]any{"source": t.TempDir()}))
	h.send(toolCall("search", "mempalace_search", map[string]any{"query": "fleet knows"}))
	a := h.await("search", 20*time.Second)
	if a == nil {
		t.Fatalf("a search sent during a mine was not answered while the mine runs")
	}
	got := answerText(a)
	ed, _ := got["edge"].(map[string]any)
	if hits, _ := got["results"].([]any); len(hits) == 0 || palaceOf(hits[0]) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") {
		t.Errorf("search during a mine: %v, want the primary's hit, marked degraded, saying the local palace is busy", got)
	}
	if _, answered := h.seen["mine"]; answered {
		t.Errorf("the mine was answered already: the test did not run a search during it")
	}
}

// A KG read while this device has an unsent fact about the entity asks
// the local palace (read-your-writes); with the local palace busy with a
// mine, it does not wait past the call timeout: the primary answers,
// marked degraded, saying this device's unsent facts are not in it (the
// outside tester's kg_query took 78 s during a mine).
func TestAKGReadDuringAMineFallsBackToThePrimary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: 500 * time.Millisecond, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_LATENCY_MS=mempalace_mine=120000"}})
	h.handshake()
	h.ready()
	h.onPrimary("kg_add", map[string]any{"subject": "edge", "predicate": "runs", "object": "fleet"}) // the fleet's fact
	release := make(chan struct{})
	h.primary.SetHold("mempalace_kg_add", release) // this device's fact stays unsent
	defer close(release)
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

// TestRealASearchDuringAMineAnswers is the search during a mine against
// real MemPalace: a mine of a few hundred small files by a real
// mempalace-mcp, sent right behind a write (so it goes through the edge's
// ordering), and a search sent right after it answered from real
// mempalace serve while the mine still runs, marked degraded.
func TestRealASearchDuringAMineAnswers(t *testing.T) {
	r := startRealEdge(t, harnessOpts{raw: true, timeout: 2 * time.Second, childExitWait: 200 * time.Millisecond}, "")
	h := r.harness
	h.handshake()
	h.ready()
	r.srv.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "fleet", "room": "r", "content": "the fleet chose sqlite for the outbox"})
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
	if hits, _ := got["results"].([]any); len(hits) == 0 || palaceOf(hits[0]) != "primary" || got["degraded"] != true || !strings.Contains(asString(ed["local"]), "busy") {
		t.Errorf("search during a real mine: %v, want the primary's hit, marked degraded, saying the local palace is busy", got)
	}
	if m := answerText(h.await("mine", 10*time.Minute)); m["error"] != nil {
		t.Errorf("the mine: %v", m)
	}
	t.Logf("the mine took %s", time.Since(began))
}
