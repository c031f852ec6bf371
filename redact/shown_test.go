package redact

import "testing"

// A parse error's word holding the token loses the token, never the
// punctuation the parser put after it: a word holding a token of 4 to 7
// characters (or that is a shorter one) goes whole, a run of 8 characters
// of it in a row goes where it stands (attack117 F2: "invalid literal:
// [redacted] nothing written", its ';' eaten).
func TestPiecesKeepsThePunctuationAroundTheToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ tok, text, want string }{
		{"s3cr3tX", "invalid literal: s3cr3tX; nothing written", "invalid literal: [redacted]; nothing written"},
		{"ab", "invalid literal: ab; nothing written", "invalid literal: [redacted]; nothing written"},
		{"aB3x", "at [1, xxab3xzz]", "at [1, [redacted]]"},
		{"SECRETtok0123456789abcdef", "invalid literal: tok01234567; nothing written", "invalid literal: [redacted]; nothing written"},
		{"SECRETtok0123456789abcdef", "invalid literal: xxCRETtok01xx; nothing", "invalid literal: xx[redacted]xx; nothing"},
		{"ab;c", "literal: xab;c; x", "literal: [redacted]; x"},
		// Not the token: kept as it is.
		{"ab", "literal: abc; the", "literal: abc; the"},
		{"SECRETtok0123456789abcdef", "invalid literal: tru; nothing written", "invalid literal: tru; nothing written"},
	} {
		if got := Pieces(c.text, c.tok); got != c.want {
			t.Errorf("Pieces(%q, %q) = %q, want %q", c.text, c.tok, got, c.want)
		}
	}
}
