package jsondepth

import (
	"strings"
	"testing"
)

// depthByByte is the go-sdk's checkMaxDepth as written there (a loop over
// every byte): the oracle for Deeper's jumps.
func depthByByte(b []byte, max int) bool {
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
			if depth++; depth > max {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

func FuzzDeeper(f *testing.F) {
	const max = 1000 // the edge's bound, the go-sdk's
	for _, s := range []string{
		strings.Repeat("[", 1001), strings.Repeat("[", 1000),
		`{"a":"\"[[[[","b":"\\\\"}` + strings.Repeat("{", 1001),
		`"` + strings.Repeat(`\"[`, 1001) + `"`,
		strings.Repeat(`["\\",`, 1001),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// stretch the input past max so the jump path runs
		in := append(append([]byte{}, b...), []byte(strings.Repeat(string(b)+"[", 1+max/(len(b)+1)))...)
		for _, x := range [][]byte{b, in} {
			if got, want := Deeper(x, max), depthByByte(x, max); got != want {
				t.Fatalf("Deeper(%q) = %v, the go-sdk's check says %v", x, got, want)
			}
		}
	})
}

// Wide JSON with more brackets than the bound, so Deeper reads it
// through, is valid; the same nesting one level past the bound is not.
func TestValidBoundsNestingNotWidth(t *testing.T) {
	wide := "[" + strings.Repeat(`{"text":"[{"},`, 2*Max) + "{}]"
	if !Valid([]byte(wide)) {
		t.Error("wide JSON refused")
	}
	for _, n := range []int{Max, Max + 1} {
		deep := strings.Repeat("[", n) + strings.Repeat("]", n)
		if got := Valid([]byte(deep)); got != (n <= Max) {
			t.Errorf("nested %d deep: Valid %v", n, got)
		}
	}
}
