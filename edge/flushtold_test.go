package edge

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway"
)

// A write settled with a note for the agent (a kg_supersede the gateway
// held: another value current on the primary) by another process's
// flusher (`devbox-config edge flush`, run while this edge's primary was
// away) is told on the agent's next tool answer, as one its own flusher
// settled is, a get_drawer the edge would relay untouched too, and only
// once (attack107 F4: it waited for a look-up a second after the last).
func TestAWriteAnotherFlushSettledIsToldOnTheNextAnswer(t *testing.T) {
	t.Parallel()
	_, srv := startPrimary(t)
	gw, tokens, _ := testGatewayServer(t, srv.URL(),
		gateway.Device{ID: "bob-02", Label: "edge-test", Read: []string{"*"}, Write: []string{"wing_bob"}, KG: "write", Agents: []string{"opencode@edge-test"}})
	url, down := downProxy(t, gw)
	h := start(t, harnessOpts{primaryURL: url, token: tokens["bob-02"]})
	h.eventually("the gateway's device header", func() bool { _, ok := h.edge.device(); return ok })
	if _, res := h.call("kg_add", map[string]any{"subject": "svc_f", "predicate": "owner", "object": "alice", "valid_from": "2026-01-01"}); res.IsError {
		t.Fatalf("kg_add refused: %s", refusalText(res))
	}
	got, _ := h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "a drawer to read"})
	id, _ := got["drawer_id"].(string)
	h.drained()
	postTool(t, srv.URL(), testToken, "kg_supersede", map[string]any{"subject": "svc_f", "predicate": "owner", "old_object": "alice", "new_object": "eve", "at": "2026-06-01"})
	down.Store(true)
	if _, res := h.call("kg_supersede", map[string]any{"subject": "svc_f", "predicate": "owner", "old_object": "alice", "new_object": "frank", "at": "2026-07-01"}); res.IsError {
		t.Fatalf("kg_supersede refused: %s", refusalText(res))
	}
	// `edge flush`: its own store and flusher on the outbox, the gateway
	// reached directly, once this edge's flusher, the primary away, let
	// the lease go.
	s, err := outbox.Open(filepath.Join(h.palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := NewPrimary(gw, func() string { return tokens["bob-02"] }, slog.New(slog.DiscardHandler), PrimaryOptions{Timeout: 5 * time.Second})
	defer p.Close()
	flush := func() {
		t.Helper()
		h.eventually("edge flush settled the queue", func() bool {
			_, err := (&outbox.Flusher{S: s, P: FlushTarget(p), Log: slog.New(slog.DiscardHandler), MaxRefusals: 1}).Drain(context.Background())
			n, perr := s.ToSend(context.Background())
			return err == nil && perr == nil && n == 0
		})
	}
	flush()
	// A get_drawer of a local drawer, which the edge relays untouched
	// when no note waits.
	_, res := h.call("get_drawer", map[string]any{"drawer_id": id})
	if note := notesOf(res); !strings.Contains(note, "filed nothing on the primary: mempalace_kg_supersede of svc_f") {
		t.Errorf("the next tool answer after edge flush held the supersede carries:\n%s", note)
	}
	if _, res := h.call("add_drawer", map[string]any{"wing": "wing_bob", "room": "r", "content": "a later write"}); notesOf(res) != "" {
		t.Errorf("a later answer tells it again:\n%s", notesOf(res))
	}
	// A write edge flush makes dead (an end of a fact the primary holds
	// none of, refused) likewise.
	if _, err := s.Enqueue(context.Background(), outbox.Write{Name: "mempalace_kg_invalidate", Payload: []byte(`{"subject":"svc_solo","predicate":"uses","object":"cache_9","ended":"2026-12-06"}`)}); err != nil {
		t.Fatal(err)
	}
	flush()
	if _, res := h.call("get_drawer", map[string]any{"drawer_id": id}); !strings.Contains(notesOf(res), "refused a write from this devbox for good: mempalace_kg_invalidate of svc_solo") {
		t.Errorf("the next tool answer after edge flush made a write dead carries:\n%s", notesOf(res))
	}
}
