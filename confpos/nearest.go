package confpos

import "strings"

// maxEdits is how far a name may be from a known one to be taken for a
// misspelling of it.
const maxEdits = 2

// Nearest is the candidate at most two edits from name, case aside (the
// closest; "" when none is, or when name is so short that anything is).
func Nearest(name string, candidates []string) string {
	best, bestD := "", maxEdits+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD && d < len(name) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours (ULR for URL
// is one edit). Hand-written: twenty lines do not justify a dependency.
func editDistance(a, b string) int {
	if d := len(a) - len(b); d > maxEdits || -d > maxEdits {
		return maxEdits + 1 // cannot be near: skip the table
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
