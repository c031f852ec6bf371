package merge

import (
	"math"
	"math/big"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v4"
)

// The YAML 1.2 core schema's plain scalars, in the order and with the
// patterns of Continue's yaml 2.x (its schema/core); anything else is a
// string. An unquoted date is a string too: 1.2 core has no timestamp.
var (
	coreNull  = regexp.MustCompile(`^(?:~|[Nn]ull|NULL)?$`)
	coreBool  = regexp.MustCompile(`^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$`)
	coreOct   = regexp.MustCompile(`^0o[0-7]+$`)
	coreInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	coreHex   = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	coreInf   = regexp.MustCompile(`^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$`)
	coreFloat = regexp.MustCompile(`^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$|^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$`)
)

// coreKey is the mapping key k as Continue's yaml (2.x, YAML 1.2 core
// schema) reads it, in a form whose Go == is JavaScript's ===, which is
// how that parser's uniqueKeys compares two scalar keys: nil, a bool, a
// string, or a float64 for every number, so 010, 10, 1.0e1 and 0xa are
// one key, -0 is 0 and NaN equals nothing. A quoted or block scalar is a
// string; an explicit core tag resolves the text by that tag's patterns
// only (!!int "1" is 1; !!float 1 matches none, so is the string "1").
// ok is false for a key nothing equals: a collection or an alias (not
// compared), or !!timestamp and !!binary, which become objects.
func coreKey(k *yaml.Node) (key any, ok bool) {
	tag := ""
	switch {
	case k.Kind != yaml.ScalarNode:
		return nil, false
	case k.Style&yaml.TaggedStyle != 0:
		tag = k.ShortTag()
	case k.Tag == "!" || k.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return k.Value, true // ! is the non-specific tag: a string
	}
	switch tag {
	case "", "!!null", "!!bool", "!!int", "!!float":
		if v, t := coreScalar(k.Value); tag == "" || t == tag {
			return v, true
		}
	case "!!timestamp", "!!binary":
		return nil, false
	}
	return k.Value, true // !!str, a failed core tag, or one the parser does not know: its text
}

// coreScalar resolves a plain scalar by the 1.2 core schema: its value
// and tag.
func coreScalar(s string) (any, string) {
	switch {
	case coreNull.MatchString(s):
		return nil, "!!null"
	case coreBool.MatchString(s):
		return s[0] == 't' || s[0] == 'T', "!!bool"
	case coreOct.MatchString(s):
		return radix(s[2:], 8), "!!int"
	case coreInt.MatchString(s):
		return radix(s, 10), "!!int"
	case coreHex.MatchString(s):
		return radix(s[2:], 16), "!!int"
	case coreInf.MatchString(s):
		switch {
		case s[len(s)-1] == 'n' || s[len(s)-1] == 'N':
			return math.NaN(), "!!float"
		case s[0] == '-':
			return math.Inf(-1), "!!float"
		}
		return math.Inf(1), "!!float"
	case coreFloat.MatchString(s):
		f, _ := strconv.ParseFloat(s, 64) // matched: only a range error, whose ±Inf or 0 is parseFloat's too
		return f, "!!float"
	}
	return s, "!!str"
}

// radix is parseInt(digits, base) (JavaScript's: the nearest float64, -0
// for "-0").
func radix(digits string, base int) float64 {
	if base == 10 {
		f, _ := strconv.ParseFloat(digits, 64) // matched [-+]?[0-9]+: only a range error, whose ±Inf is parseInt's too
		return f
	}
	n, _ := new(big.Int).SetString(digits, base) // matched the base's digits
	f, _ := new(big.Float).SetInt(n).Float64()
	return f
}
