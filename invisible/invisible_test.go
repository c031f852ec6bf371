package invisible

import "testing"

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
