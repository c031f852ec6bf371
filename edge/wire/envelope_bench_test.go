package wire

import (
	"strings"
	"testing"
)

// The guard checks every agent message's envelope before the SDK sees it
// (the edge's hot path): a typical tools/call, and one carrying 100 KB of
// content.
func BenchmarkCheckEnvelope(b *testing.B) {
	for _, c := range []struct{ name, msg string }{
		{"call", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"how does the outbox replay a checkpoint","wing":"wing_code","limit":5}}}`},
		{"100KB", `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w","room":"r","content":"` + strings.Repeat("lorem ipsum ", 100<<10/12) + `"}}}`},
	} {
		msg := []byte(c.msg)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, why := checkEnvelope(msg); why != "" {
					b.Fatal(why)
				}
			}
		})
	}
}
