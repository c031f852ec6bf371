package wire

import (
	"strings"
	"testing"
)

// depthByByte is the SDK's checkMaxDepth as written there (a loop over
// every byte): the oracle for tooDeep's jumps.
func depthByByte(b []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

func FuzzTooDeep(f *testing.F) {
	for _, s := range []string{
		strings.Repeat("[", 1001), strings.Repeat("[", 1000),
		`{"a":"\"[[[[","b":"\\\\"}` + strings.Repeat("{", 1001),
		`"` + strings.Repeat(`\"[`, 1001) + `"`,
		strings.Repeat(`["\\",`, 1001),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// stretch the input past maxDepth so the jump path runs
		in := append(append([]byte{}, b...), []byte(strings.Repeat(string(b)+"[", 1+maxDepth/(len(b)+1)))...)
		for _, x := range [][]byte{b, in} {
			if got, want := tooDeep(x), depthByByte(x); got != want {
				t.Fatalf("tooDeep(%q) = %v, the SDK's check says %v", x, got, want)
			}
		}
	})
}
