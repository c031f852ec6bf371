package edge

import (
	"context"
	"testing"

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
