package merge

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkParseFocusedHuge is the parse alone of the 50 MB one-line
// config of render's BenchmarkRenderHugeMinified.
func BenchmarkParseFocusedHuge(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"$schema":"https://opencode.ai/config.json","agent":{`)
	for i := 0; buf.Len() < 50<<20; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `/*a%d*/"a%d":{"model":"p/m","prompt":"be brief","tools":{"x":true,"y":false},"n":[1,2,3]}`, i, i)
	}
	buf.WriteString("}}\n")
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ParseDocFocused(data, "mcp", "$schema"); err != nil {
			b.Fatal(err)
		}
	}
}
