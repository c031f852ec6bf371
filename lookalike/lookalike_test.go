package lookalike

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The skeleton folds what reads as the same name on a coordination log's
// "from ..." line: a combining mark (composed or not), punctuation but the
// @ wherever it stands (. - _ ·), and letter pairs that pass for one
// letter (rn m, vv w, cl d). An outside tester (attack31 p14) had
// "pi@ops.", "pi@ops-", "pi@ops\u0301" and "codex@rnal" accepted on
// devices labelled otherwise, and (attack46 N2) "pi@lap-top" beside
// "pi@laptop": "pi@o.ps" is "pi@ops" too, as a dot inside a name is as
// easily missed as one at its end.
func TestSkeletonFoldsMarksPunctuationAndLetterPairs(t *testing.T) {
	for _, c := range [][2]string{
		{"pi@ops.", "pi@ops"}, {"pi@ops-", "pi@ops"}, {"_pi@-ops", "pi@ops"}, {"pi.@ops", "pi@ops"},
		{"pi@ops\u0301", "pi@ops"}, {"pi@op\u015b", "pi@ops"}, {"codex@rnal", "codex@mal"},
		{"pi@vvork", "pi@work"}, {"claude@clesk", "claude@desk"}, {"pi@0ps", "pi@ops"},
		// A capital I reads as l (and, in another case, as i): the
		// closure folds i, I and l, the digit 1 and the palochkas with them.
		{"codex@Iaptop", "codex@laptop"}, {"codex@1aptop", "codex@Iaptop"}, {"pi@ivan", "pi@Ivan"},
		{"pi@\u04c0aptop", "pi@laptop"}, {"pi@\u04cfaptop", "pi@Iaptop"},
		{"pi@o.ps", "pi@ops"}, {"pi@lap-top", "pi@laptop"}, {"pi@lap_top", "pi@laptop"}, {"pi@lap top", "pi@laptop"},
		{"pi@lap\u00b7top", "pi@laptop"}, {"pi@lap\u2010top", "pi@laptop"}, {"pi@lap\uff3ftop", "pi@laptop"}, {"claude-code@x", "claudecode@x"},
		// Symbols inside a name as punctuation is (attack47 N2): math
		// (Sm), modifier (Sk), currency (Sc) and other (So) symbols, and
		// each kind of punctuation (Pc, Pd, Po, Ps, Pe).
		{"pi@lap~top", "pi@laptop"}, {"pi@lap+top", "pi@laptop"}, {"lap=top", "laptop"}, {"lap^top", "laptop"},
		{"lap<top", "laptop"}, {"lap`top", "laptop"}, {"lap$top", "laptop"}, {"lap\u00a9top", "laptop"}, {"lap\U0001F680top", "laptop"},
		{"lap\u2040top", "laptop"}, {"lap\u2013top", "laptop"}, {"lap!top", "laptop"}, {"lap(top)", "laptop"}, {"lap[top]", "laptop"},
	} {
		if a, b := Skeleton(c[0]), Skeleton(c[1]); a != b {
			t.Errorf("Skeleton(%+q) = %q, Skeleton(%+q) = %q: they look alike", c[0], a, c[1], b)
		}
	}
	for _, c := range [][2]string{{"pi@ops", "pi@op"}, {"pi@ops", "pi@pos"}, {"codex@mal", "codex@ma"}, {"pi@ops", "pi@кэрол"}, {"\U0001F680", "\U0001F6F8"}, {"pi@\U0001F680", "pi@\U0001F6F8"}} {
		if Skeleton(c[0]) == Skeleton(c[1]) {
			t.Errorf("%+q and %+q do not look alike, skeleton %q", c[0], c[1], Skeleton(c[0]))
		}
	}
}

// Every character Unicode's confusables data (UTS #39) reads as one ASCII
// letter or digit (testdata/confusables-letters.txt, the data's lines
// confusables_gen.go kept) folds to it in a name, wherever it stands; the
// table skeleton looks them up in stays sorted for its binary search.
func TestSkeletonFoldsEveryConfusableOfALetter(t *testing.T) {
	for i := 1; i < len(confusables); i++ {
		if confusables[i-1].r >= confusables[i].r {
			t.Fatalf("confusables[%d] U+%04X is not after U+%04X", i, confusables[i].r, confusables[i-1].r)
		}
	}
	data, err := os.ReadFile("testdata/confusables-letters.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		var from, to rune
		if _, err := fmt.Sscanf(line, "%x ;\t%x", &from, &to); err != nil {
			continue // the header's comments, the last line's end
		}
		n++
		for _, f := range []string{"pi@x%cx", "%cx@pi", "pi@%c"} {
			if got, want := Skeleton(fmt.Sprintf(f, from)), Skeleton(fmt.Sprintf(f, to)); got != want {
				t.Errorf("U+%04X reads as %c: skeleton of %+q is %q, not %q", from, to, fmt.Sprintf(f, from), got, want)
			}
		}
	}
	if n < 1500 {
		t.Errorf("only %d lines swept", n)
	}
}

// skeleton runs for every label and agent name at each config load.
func BenchmarkSkeleton(b *testing.B) {
	for b.Loop() {
		for _, n := range []string{"claude@laptop-7f3a", "pi@ꓲaptop·", "codex@δέλτα", "reviewer"} {
			Skeleton(n)
		}
	}
}
