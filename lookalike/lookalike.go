package lookalike

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

//go:generate go run confusables_gen.go $CONFUSABLES_TXT

// ReadsAs is the ASCII letters or digits r reads as by UTS #39's
// confusables data (confusables_table.go: Lisu ꓲ, | and I are l, Cyrillic
// а is a, m is rn; and the generator's supplement: Cyrillic п is n), false
// if the data has none. A sorted array generated
// from the data rather than the mtibben/confusables library, unmaintained
// since 2021 (Unicode 13) and building a 6,000-entry map at every
// container start: static data, binary searched, and only the characters
// that read as what names here are compared against.
func ReadsAs(r rune) (string, bool) {
	i, ok := slices.BinarySearchFunc(confusables[:], r, func(e confusable, r rune) int { return cmp.Compare(e.r, r) })
	if !ok {
		return "", false
	}
	return confusables[i].ascii, true
}

// Skeleton is what name looks like, for telling whether two names could
// be taken for each other: combining marks, spaces, punctuation but the
// @, and symbols (math, modifier, currency, other) dropped (ś is s;
// lap-top, lap_top, lap.top, lap·top, lap~top, lap+top, lap=top and
// lap^top are laptop), each character read as the Latin letters or digits
// it looks like (ReadsAs), else as its compatibility form's (fullwidth
// and mathematical letters are letters), case folded, i read as l (a
// capital I reads as either), and the letter pairs that pass for one
// letter (rn m, vv w, cl d) folded. A part of the name, either side of
// an @, made only of symbols (an emoji label) keeps them. Names in other
// scripts keep their letters: only a name that looks like another is
// taken for it.
func Skeleton(name string) string {
	var b strings.Builder
	fold(&b, norm.NFD.String(name), true)
	s := strings.ReplaceAll(strings.ToLower(b.String()), "i", "l") // a capital I reads as l, and as i in another case
	parts := strings.Split(s, "@")
	for i, p := range parts {
		if t := strings.Map(dropSymbol, p); t != "" {
			parts[i] = t // a part made only of symbols keeps them
		}
	}
	return strings.NewReplacer("rn", "m", "vv", "w", "cl", "d").Replace(strings.Join(parts, "@"))
}

// dropSymbol is strings.Map's reading of a symbol (Unicode S: Sm, Sk,
// Sc, So) inside a name: dropped, as punctuation is; any other rune kept.
func dropSymbol(r rune) rune {
	if unicode.IsSymbol(r) {
		return -1
	}
	return r
}

// fold writes to b what each character of s reads as, dropping combining
// marks, spaces and punctuation but the @ (a name's inner separators:
// - _ . · and their kin in other scripts); with compat, a character the
// data does not read is read by its compatibility decomposition (NFKD),
// folded in turn.
func fold(b *strings.Builder, s string, compat bool) {
	for _, r := range s {
		a, ok := ReadsAs(r)
		switch {
		case unicode.IsSpace(r) || unicode.Is(unicode.Mn, r):
		case ok:
			b.WriteString(a)
		case compat && r >= utf8.RuneSelf && norm.NFKD.String(string(r)) != string(r):
			fold(b, norm.NFKD.String(string(r)), false)
		case unicode.IsPunct(r) && r != '@':
		default:
			b.WriteRune(r)
		}
	}
}
