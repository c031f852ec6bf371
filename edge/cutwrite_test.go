package edge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// cutAtTheLocalPalace calls tool through h's edge, kills its local palace
// server (SIGKILL) while it holds the call (FAKEPALACE_HOLD_ON=tool,
// FAKEPALACE_TRACE=1), waits for the restarted server to hold the call
// sent again, releases it, and returns the edge's answer.
func (h *harness) cutAtTheLocalPalace(tool string, args map[string]any) map[string]any {
	h.t.Helper()
	answered := make(chan map[string]any, 1)
	go func() {
		m, _ := h.call(tool, args)
		answered <- m
	}()
	h.atTheLocalPalace("mempalace_" + tool)
	cut := h.edge.child.live()
	if err := cut.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
	waitFor(h.t, 10*time.Second, "the restarted local palace at the write sent again", func() bool {
		c := h.edge.child.live()
		return c != nil && c != cut && h.relayedInFlight() > 0
	})
	h.releaseLocalHold()
	select {
	case m := <-answered:
		return m
	case <-time.After(30 * time.Second):
		h.t.Fatal("the write cut by the local palace server's death was never answered")
		return nil
	}
}

// The local palace server killed while at an add_drawer (a slow embedder,
// attack52 F2): the agent is told the write is queued for the primary
// and that the local palace may not have it but gets it again once it is
// back; the restarted server gets it before any other call, once, and
// then holds it. Before, it was queued for the primary only and the local
// palace never had it ("does not have it").
func TestWriteCutByTheLocalServersDeathReachesItsRestart(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_add_drawer"}})
	const content = "filed while the local palace server was killed"
	m := h.cutAtTheLocalPalace("add_drawer", map[string]any{"wing": "work", "room": "notes", "content": content})
	msg, _ := m["message"].(string)
	if m["success"] != true || m["queued"] != true || !strings.Contains(msg, "may not have it") || !strings.Contains(msg, "again once it is back") {
		t.Errorf("the cut write's answer: %v, want success, queued, the local palace may not have it and gets it again once back", m)
	}
	h.eventually("the cut write's note dropped by the restarted local palace's answer", func() bool {
		cs, err := h.edge.outbox.Cut(context.Background())
		return err == nil && len(cs) == 0
	})
	id := DrawerIDFor("work", "notes", content)
	if d := h.localState().Drawers[id]; d == nil || d.Content != content {
		t.Fatalf("the restarted local palace lacks the cut write: %v", d)
	}
	sent := 0
	for _, r := range h.childReceived() {
		if r.Name == "mempalace_add_drawer" {
			sent++
		}
	}
	if sent != 2 {
		t.Errorf("the local palaces got the add_drawer %d times, want 2: the cut call and its one resend", sent)
	}
	h.eventually("the write on the primary", func() bool {
		d := h.onPrimary("get_drawer", map[string]any{"drawer_id": id})
		return d["content"] == content
	})
}

// A diary_write cut the same way is not sent to the local palace again: a
// second entry could not be told from the first (MemPalace stamps its id
// with the time). The agent is told whether the local palace has it cannot
// be known, not that it does not.
func TestDiaryWriteCutByTheLocalServersDeathIsNotSentAgain(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{childEnv: []string{"FAKEPALACE_TRACE=1", "FAKEPALACE_HOLD_ON=mempalace_diary_write"}})
	answered := make(chan map[string]any, 1)
	go func() {
		m, _ := h.call("diary_write", map[string]any{"agent_name": "opencode", "entry": "cut mid-write"})
		answered <- m
	}()
	h.atTheLocalPalace("mempalace_diary_write")
	if err := h.edge.child.live().cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m := <-answered
	if msg, _ := m["message"].(string); m["queued"] != true || !strings.Contains(msg, "cannot be known") || strings.Contains(msg, "does not have it") {
		t.Errorf("the cut diary_write's answer: %v, want queued, whether the local palace has it cannot be known", m)
	}
	if cs, err := h.edge.outbox.Cut(context.Background()); err != nil || len(cs) != 0 {
		t.Errorf("a cut diary_write is noted to be sent to the local palace again: %v %v", cs, err)
	}
}

// Two parallel update_drawers of one drawer: X→A is cut by the local
// palace server's death, the server restarts and takes X→B before the
// edge notes the cut (its outbox slow: the restarted server read what it
// gets first already). X→A is not sent to it then: the local palace keeps
// B, as the primary does (X→A is queued where its intent was, before
// X→B), and the agent is told whether it has A cannot be known. Before,
// the edge sent X→A after B and the local palace held A.
func TestACutUpdateIsNotSentAfterTheRestartedServersLaterWrite(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	m, _ := h.call("add_drawer", map[string]any{"wing": "work", "room": "notes", "content": "the outbox is sqlite"})
	id, _ := m["drawer_id"].(string)
	a := newCall(&mcp.CallToolParams{Name: "mempalace_update_drawer", Arguments: map[string]any{"drawer_id": id, "content": "A"}})
	since := h.edge.firstRun() // X→A in the outbox as an intent and sent to this server
	in := h.edge.intend(context.Background(), a, "work")
	cut := h.edge.child.live()
	if err := cut.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the restarted local palace", func() bool {
		c := h.edge.child.live()
		return c != nil && c != cut && h.edge.firstRun() != since
	})
	if m, _ := h.call("update_drawer", map[string]any{"drawer_id": id, "content": "B"}); m["success"] != true {
		t.Fatalf("update_drawer X→B: %v", m)
	}
	res, err := h.edge.writeWithoutLocal(context.Background(), a, "work", fmt.Errorf("%w: %w", ErrLocalDown, errChildExited), since, in)
	if err != nil {
		t.Fatal(err)
	}
	m = resultJSON(res)
	if msg, _ := m["message"].(string); m["queued"] != true || !strings.Contains(msg, "cannot be known") || !strings.Contains(msg, "later write") {
		t.Errorf("the cut update's answer: %v, want queued, whether the local palace has it cannot be known", m)
	}
	if d := h.localState().Drawers[id]; d == nil || d.Content != "B" {
		t.Errorf("the local palace's drawer after the cut X→A and X→B: %+v, want B", d)
	}
	if cs, err := h.edge.outbox.Cut(context.Background()); err != nil || len(cs) != 0 {
		t.Errorf("the cut update is noted to be sent to the local palace again: %v %v", cs, err)
	}
	h.drained()
	if d := h.onPrimary("get_drawer", map[string]any{"drawer_id": id}); d["content"] != "B" {
		t.Errorf("the primary's drawer after X→A and X→B: %v, want B, as the local palace's (X→A queued before X→B)", d)
	}
}

// TestRealWriteCutByTheLocalServersDeathReachesItsRestart is the cut
// write against a real mempalace-mcp (attack52 F2): killed (SIGKILL)
// while its embedder holds the add_drawer, the write is answered queued,
// the local palace maybe without it; the restarted mempalace-mcp gets it
// first and holds it once. Before, the local palace never had it.
func TestRealWriteCutByTheLocalServersDeathReachesItsRestart(t *testing.T) {
	t.Parallel()
	const content = "m52 rw item 0, filed while mempalace-mcp was killed"
	local := realpalace.New(t)
	gate, asked := heldEmbedder(t, local.Embedder.URL, content)
	local.Embedder = &realpalace.Embedder{URL: gate} // Env's: the gate, in front of the palace's own
	srv := realpalace.New(t).Serve(t, testToken)
	h := start(t, harnessOpts{realLocal: local, primaryURL: realpalace.NewProxy(t, srv.URL).URL, timeout: 30 * time.Second})
	answered := make(chan map[string]any, 1)
	go func() {
		m, _ := h.call("add_drawer", map[string]any{"wing": "m52", "room": "m52", "content": content})
		answered <- m
	}()
	select {
	case <-asked:
	case <-time.After(60 * time.Second):
		t.Fatalf("the add_drawer never reached the embedder\nlog:\n%s", h.logs)
	}
	if err := h.edge.child.live().cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m := <-answered
	if msg, _ := m["message"].(string); m["queued"] != true || !strings.Contains(msg, "may not have it") {
		t.Errorf("the cut write's answer: %v, want queued, the local palace may not have it", m)
	}
	waitFor(t, 90*time.Second, "the restarted mempalace-mcp's answer to the cut write", func() bool {
		cs, err := h.edge.outbox.Cut(context.Background())
		return err == nil && len(cs) == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h.edge.localServer.Call(ctx, &mcp.CallToolParams{Name: "mempalace_list_drawers", Arguments: map[string]any{"wing": "m52", "limit": 100}})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := resultJSON(res)["drawers"].([]any)
	if len(ds) != 1 {
		t.Errorf("the restarted local palace holds %d drawers in the wing, want the cut write once: %s", len(ds), mustJSON(resultJSON(res)))
	}
}

// heldEmbedder is an embedder in front of the one at to that holds the
// first request embedding marker until its client is gone (a local
// palace server killed at a slow embed); asked is closed when it came.
func heldEmbedder(t *testing.T, to, marker string) (string, <-chan struct{}) {
	t.Helper()
	target, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	asked := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // a short read is forwarded short: the embedder refuses it
		held := false
		if bytes.Contains(body, []byte(marker)) {
			once.Do(func() { held = true; close(asked) })
		}
		if held {
			<-r.Context().Done() // its client killed
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, asked
}
