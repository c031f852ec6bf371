package edge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/fakepalace"
)

// mismatchDetail is the edge's in-memory record of an embedder mismatch.
func (e *Edge) mismatchDetail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mismatch
}

// recordedMismatch is the edge's record of an embedder mismatch, in memory
// and in the outbox (what edge status and doctor show).
func (h *harness) recordedMismatch() (string, string) {
	h.t.Helper()
	stored, err := h.edge.outbox.Meta(context.Background(), "embedder_mismatch")
	if err != nil {
		h.t.Fatal(err)
	}
	return h.edge.mismatchDetail(), stored
}

// searchMerged is a search that merged both palaces, or the test fails.
func (h *harness) searchMerged(query string) []any {
	h.t.Helper()
	r, _ := h.call("search", map[string]any{"query": query, "limit": 10})
	ed, _ := r["edge"].(map[string]any)
	if r["embedder_mismatch"] != nil || ed["merged"] != true {
		h.t.Fatalf("search %q not merged: %v", query, r)
	}
	return r["results"].([]any)
}

// A drawer this device updated while the update cannot reach the primary
// has another text on each side, so two distances under one model: that
// says nothing about the embedders. The search merges (the agent finds its
// own unsent update), and nothing is recorded for edge status or doctor.
func TestEmbedderCanaryIgnoresAPendingUpdate(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "alpha bravo charlie delta"})
	id := r["drawer_id"].(string)
	h.eventually("replication", func() bool { return h.primary.Dump().CountContent("alpha bravo charlie delta") == 1 })
	h.srv.FailTool("mempalace_update_drawer", 1000, fakepalace.FailErrorField)
	h.call("update_drawer", map[string]any{"drawer_id": id, "content": "alpha bravo zulu yankee"})
	found := false
	for _, x := range h.searchMerged("alpha bravo") {
		found = found || x.(map[string]any)["text"] == "alpha bravo zulu yankee"
	}
	if !found {
		t.Fatal("the agent's own unsent update is not in its search")
	}
	if mem, stored := h.recordedMismatch(); mem != "" || stored != "" {
		t.Fatalf("a pending update recorded as an embedder mismatch: %q, outbox %q", mem, stored)
	}
}

// A drawer of several chunks is several hits under one drawer_id, each at
// its own distance: each chunk is compared with the same chunk on the
// other side, never with another chunk of the drawer.
func TestEmbedderCanaryComparesChunks(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{})
	long := strings.Repeat("alpha bravo charlie ", 40) + strings.Repeat("zulu yankee alpha ", 40)
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": long})
	h.drained() // landed, as the edge knows it: until then its hit stands alone, nothing compared
	h.searchMerged("alpha bravo yankee")
	if mem, stored := h.recordedMismatch(); mem != "" || stored != "" {
		t.Fatalf("two chunks of one drawer recorded as an embedder mismatch: %q, outbox %q", mem, stored)
	}
}

// A recorded mismatch lasts only while the evidence does: the next search
// whose drawers of one text on both sides agree clears it, a record an
// earlier run left included, so edge status and doctor stop advising a
// model change.
func TestEmbedderMismatchClearsWhenDistancesAgree(t *testing.T) {
	t.Parallel()
	palace := filepath.Join(t.TempDir(), "palace")
	if err := os.MkdirAll(filepath.Join(palace, "edge"), 0o700); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.SetMeta(context.Background(), "embedder_mismatch", "drawer d1: local distance 0.1000, primary 0.7000"); err != nil {
		t.Fatal(err)
	}
	ob.Close()
	h := start(t, harnessOpts{palace: palace})
	if mem, stored := h.recordedMismatch(); mem == "" || stored == "" {
		t.Fatalf("the earlier run's mismatch not known: %q, outbox %q", mem, stored)
	}
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "the same drawer on both sides"})
	h.drained() // landed, as the edge knows it: until then its hit stands alone, nothing compared
	h.searchMerged("same drawer")
	if mem, stored := h.recordedMismatch(); mem != "" || stored != "" {
		t.Fatalf("distances agree again, the mismatch still recorded: %q, outbox %q", mem, stored)
	}
	if !strings.Contains(h.logs.String(), "embedder mismatch cleared") {
		t.Fatal("the clearing not logged")
	}
}
