package edge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkLocalRead is a get_drawer answered by the local palace through
// the edge (edge mode, primary up).
func BenchmarkLocalRead(b *testing.B) {
	h := start(b, harnessOpts{})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "bench"})
	id := r["drawer_id"]
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_get_drawer", Arguments: map[string]any{"drawer_id": id}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMergedSearch: a search answered by both palaces and merged
// (the primary has 20 ms of latency, as over a network).
func BenchmarkMergedSearch(b *testing.B) {
	h := start(b, harnessOpts{})
	for i := 0; i < 50; i++ {
		h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": fmt.Sprintf("benchmark drawer %d about outbox latency", i)})
	}
	h.eventually("replication", func() bool { return len(h.primary.Dump().Drawers) == 50 })
	h.primary.SetLatency("mempalace_search", 20*time.Millisecond)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.s.CallTool(ctx, &mcp.CallToolParams{Name: "mempalace_search", Arguments: map[string]any{"query": "outbox latency"}}); err != nil {
			b.Fatal(err)
		}
	}
}
