package edge

import (
	"fmt"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// An edge's first search against a primary whose connects hang (a
// gateway stopped with SIGSTOP, its queue full) ends within the call
// timeout, as docs/devbox.md promises ("Every call is bounded by
// MEMPALACE_EDGE_TIMEOUT"), when the local palace answers within it. Before, the search joined the connect the
// session start had begun, asked the local palace only once the primary
// had failed, and so took the timeout plus the local palace's time: plus
// about 2 s with a cold MemPalace (attack97 F2). The tools are ready
// before the connect ends (a devbox's edge knows them from its last
// run); the bound is above the second the session start waits for the
// primary.
func TestAFreshEdgesFirstSearchOnAHungPrimaryKeepsItsBound(t *testing.T) {
	t.Parallel()
	const bound, local = 1200 * time.Millisecond, time.Second
	h := start(t, harnessOpts{beforeServe: func(e *Edge) { e.cfg.PrimaryToolsWait = 50 * time.Millisecond }, primaryURL: "http://" + testbed.FullBacklog(t) + "/mcp", timeout: bound, stopGrace: 100 * time.Millisecond,
		childEnv: []string{fmt.Sprintf("FAKEPALACE_LATENCY_MS=mempalace_search=%d", local.Milliseconds())}})
	began := time.Now()
	m, _ := h.call("search", map[string]any{"query": "flux"})
	if took := time.Since(began); took > bound+local/2 {
		t.Errorf("the first search took %v, bound %v: %v", took, bound, m)
	}
	if edge, _ := m["edge"].(map[string]any); edge["degraded"] != true || edge["local"] != "ok" {
		t.Errorf("not answered from the local palace, degraded: %v", m)
	}
}

// A read sent while the edge's first connect is out, and held until the
// tools are listed, takes that connect's failure: it does not connect
// again for a call timeout of its own (attack97 F2: the timeout plus 2 s,
// the wait for the tool list, 12.0 s at the default 10 s).
func TestAReadWaitingOnTheFirstConnectTakesItsFailure(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Second
	h := start(t, harnessOpts{beforeServe: func(e *Edge) { e.cfg.PrimaryToolsWait = bound * 9 / 10 }, primaryURL: "http://" + testbed.FullBacklog(t) + "/mcp", timeout: bound, stopGrace: 100 * time.Millisecond})
	began := time.Now()
	m, _ := h.call("search", map[string]any{"query": "flux"})
	if took := time.Since(began); took > bound+bound/5 {
		t.Errorf("the first search took %v, bound %v: %v", took, bound, m)
	}
	if edge, _ := m["edge"].(map[string]any); edge["degraded"] != true || edge["local"] != "ok" {
		t.Errorf("not answered from the local palace, degraded: %v", m)
	}
}
