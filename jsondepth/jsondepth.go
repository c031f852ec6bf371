package jsondepth

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// Max bounds the nesting of JSON from a peer (encoding/json's own limit).
const Max = 10000

// Valid reports whether b is valid JSON nested at most Max deep.
func Valid(b []byte) bool { return !Deeper(b, Max) && gjson.ValidBytes(b) }

// ValidString is Valid for a string.
func ValidString(s string) bool { return Valid([]byte(s)) }

// Deeper reports whether b nests objects and arrays more than max deep:
// '{' and '[' against '}' and ']', outside strings (b is not validated:
// its reader refuses what is not JSON). JSON with no more brackets than
// max (a 14 KB page of drawers has about 120) is only counted; deeper
// input is read from one structural byte to the next (and through a
// string to its closing quote), so string content costs a memchr, not a
// loop over every byte.
func Deeper(b []byte, max int) bool {
	if len(b) <= max || bytes.Count(b, []byte{'['})+bytes.Count(b, []byte{'{'}) <= max {
		return false // deeper needs more than max opening brackets
	}
	depth := 0
	for {
		i := bytes.IndexAny(b, "\"{}[]")
		if i < 0 {
			return false
		}
		c := b[i]
		b = b[i+1:]
		switch c {
		case '"':
			for { // to the quote that closes the string
				j := bytes.IndexByte(b, '"')
				if j < 0 {
					return false
				}
				k := j
				for k > 0 && b[k-1] == '\\' {
					k--
				}
				b = b[j+1:]
				if (j-k)%2 == 0 { // not escaped
					break
				}
			}
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		default:
			depth--
		}
	}
}
