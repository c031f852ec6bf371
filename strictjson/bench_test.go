package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchArgs are a get_drawer's arguments and an add_drawer's of 1 KB.
var benchArgs = map[string][]byte{
	"get_drawer": []byte(`{"drawer_id":"drawer_notes_r_edd03d15a09131f357192437"}`),
	"add_drawer": []byte(`{"wing":"notes","room":"r","content":"` + strings.Repeat("a word ", 146) + `","added_by":"opencode/edge-test/desk"}`),
}

// BenchmarkDecodeArguments is the edge's one parse of a call's arguments;
// BenchmarkUnmarshal, the encoding/json parse it replaced.
func BenchmarkDecodeArguments(b *testing.B) {
	for name, in := range benchArgs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeArguments(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for name, in := range benchArgs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v map[string]any
				if err := json.Unmarshal(in, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
