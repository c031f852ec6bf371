package invisible

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// The characters an outside tester (attack31 p4, p22) had shown raw or
// accepted in an agent name are invisible; letters, marks, symbols and
// spaces that show are not.
func TestIs(t *testing.T) {
	for _, r := range []rune{0, '\x1b', 0x7f, 0x9b, 0x200b, 0x202e, 0xfeff, 0xe0041, 0x034f, 0x115f, 0x1160, 0x17b4, 0x17b5,
		0x180b, 0x180c, 0x180d, 0x180e, 0x3164, 0xfe00, 0xfe0f, 0xffa0, 0xe0100, 0xe01ef, 0x2800, 0x00ad, 0x2061} {
		if !Is(r) {
			t.Errorf("%U shows as nothing or acts, but Is says it shows", r)
		}
	}
	for _, r := range []rune{'a', ' ', 'é', 0x0301, '한', 'ㅎ', '日', 0x2801, '😀', 0x00a0, 0x3000, '\\'} {
		if Is(r) {
			t.Errorf("%U (%c) shows, but Is says it does not", r, r)
		}
	}
}

// EscapeJSON writes each invisible character of a JSON text as its \u
// escape (an astral one as a surrogate pair), so a viewer shows its code,
// and the text decodes to the same value; a text with none comes back as
// it is.
func TestEscapeJSONShowsWhatAViewerWouldHide(t *testing.T) {
	for _, s := range []string{"/\u202e\"}\n{\"device\":\"laptop", "a\u200bb\ufeffc", "tag \U000E0041 end", "plain é 漢字 🙂"} {
		b, _ := json.Marshal(map[string]string{"path": s})
		got := EscapeJSON(b)
		for _, r := range string(got) {
			if r >= utf8.RuneSelf && Is(r) {
				t.Errorf("EscapeJSON(%q) = %s: still holds %U", b, got, r)
			}
		}
		var back map[string]string
		if err := json.Unmarshal(got, &back); err != nil || back["path"] != s {
			t.Errorf("EscapeJSON(%q) = %s decodes to %q, %v", b, got, back["path"], err)
		}
	}
	plain := []byte(`{"path":"plain é"}`)
	if got := EscapeJSON(plain); &got[0] != &plain[0] {
		t.Errorf("a text with nothing to escape was copied")
	}
	if got := string(EscapeJSON([]byte("\"\u202e\U000E0041\""))); got != `"\u202e\udb40\udc41"` {
		t.Errorf("U+202E U+E0041 escaped as %s", got)
	}
}
