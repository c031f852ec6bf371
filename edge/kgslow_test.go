package edge

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// With the primary down, a KG read about this device's unsent fact gets
// the local palace's answer even when the local palace is slower than the
// call timeout (and busy with nothing else): there is no other answer to
// fall back on, so the read is not given up after the timeout, asked
// again behind itself and answered "busy".
func TestASlowKGReadWithThePrimaryDownGetsItsAnswer(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{timeout: 300 * time.Millisecond, childEnv: []string{"FAKEPALACE_LATENCY_MS=mempalace_kg_query=700"}})
	<-h.edge.toolsReady // the first tool list read, not waited for from a primary stopped under it
	h.srv.Stop()
	h.eventually("the edge sees the primary down", func() bool {
		h.call("kg_stats", nil)
		return !h.edge.remote.Up()
	})
	h.call("kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "outbox"})
	r, _ := h.call("kg_query", map[string]any{"entity": "edge"})
	ed, _ := r["edge"].(map[string]any)
	if r["count"] != 1.0 || ed["source"] != "local" || !strings.Contains(asString(ed["why"]), "not on the primary yet") {
		t.Fatalf("a slow kg_query with the primary down and this device's fact unsent: %v, want its fact, from the local palace", r)
	}
}

// With the primary down while the local palace is at a slow call (one
// the catalogue does not know as long, unlike a mine: a reconnect of a
// palace on a stuck disk), a KG read about this device's unsent fact asks
// the local palace once: it answers that the local palace is busy once it
// has had the call timeout, not after asking it again behind the slow
// call and waiting a second timeout.
func TestAKGReadDuringASlowCallWithThePrimaryDownAsksTheLocalPalaceOnce(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{raw: true, timeout: 300 * time.Millisecond, childExitWait: 200 * time.Millisecond,
		childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_reconnect"}})
	h.handshake()
	h.ready()
	h.srv.Stop()
	n := 0
	h.eventually("the edge sees the primary down", func() bool {
		n++
		id := fmt.Sprint("stats", n)
		h.send(toolCall(id, "mempalace_kg_stats", nil))
		h.await(id, 20*time.Second)
		return !h.edge.remote.Up()
	})
	h.send(toolCall("add", "mempalace_kg_add", map[string]any{"subject": "edge", "predicate": "uses", "object": "outbox"}))
	if a := h.await("add", 20*time.Second); a["result"] == nil {
		t.Fatalf("kg_add: %v", a)
	}
	h.send(toolCall("slow", "mempalace_reconnect", map[string]any{}))
	h.atTheLocalPalace("mempalace_reconnect")
	h.send(toolCall("query", "mempalace_kg_query", map[string]any{"entity": "edge"}))
	got := answerText(h.await("query", 20*time.Second))
	if ed, _ := got["edge"].(map[string]any); !strings.Contains(asString(got["error"]), "busy") || ed["local"] != "busy" {
		t.Errorf("kg_query during a slow call with the primary down: %v, want an error saying the local palace is busy", got)
	}
	h.releaseLocalHold()
	if a := h.await("slow", 20*time.Second); a["result"] == nil {
		t.Fatalf("reconnect: %v", a)
	}
	asked := func() (n int) {
		for _, m := range h.childReceived() {
			if m.Name == "mempalace_kg_query" {
				n++
			}
		}
		return n
	}
	h.eventually("the kg_query at the local palace", func() bool { return asked() > 0 })
	if n := asked(); n != 1 {
		t.Errorf("the local palace was asked the kg_query %d times, want once", n)
	}
}
