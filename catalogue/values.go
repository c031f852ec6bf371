package catalogue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// CheckValues refuses a call of t whose arguments hold a value
// MemPalace's schema does not take, naming the first such parameter, in
// the words of a JSON-RPC -32602: an argument of another JSON type than
// ParamType's (MemPalace passes it to the tool as it is: a search's
// context of 5.6 million objects cost the primary a gigabyte, an
// add_drawer's source_file 123 is a TypeError), an integer or a number
// that is not one MemPalace reads as such (checkNumbers), an id list that
// is not an array of strings. The gateway refuses such a call before it
// is authorized, the edge before either palace or the outbox sees it.
// Null is an argument's absence, left to MemPalace (its default, or its
// own refusal); an integer or a number may come as a string, which
// MemPalace converts. Numbers may be decoded as json.Number or float64.
func CheckValues(t Tool, args map[string]any) error {
	bad := ""
	for k, v := range args {
		if !typeFits(ParamType(k), v) && (bad == "" || k < bad) {
			bad = k
		}
	}
	if bad != "" {
		return fmt.Errorf("Invalid value for parameter '%s': must be %s, not %s (the schema of %s%s)",
			bad, anA(ParamType(bad)), anA(jsonType(args[bad])), Prefix, t.Name)
	}
	return checkNumbers(args)
}

// maxUnknown is how many unknown parameters a refusal names, and
// MaxParamName the longest one it names whole: a bounded answer
// whatever was sent.
const (
	maxUnknown   = 8
	MaxParamName = 256
)

// UnknownParams refuses the arguments of args that t takes in no release
// (Accepts), in MemPalace's words for its -32602 ("Unknown parameter 'x'
// for tool mempalace_t"), sorted: at most maxUnknown of them (and how many
// more). A name over MaxParamName bytes is named alone, as long, for the
// caller to show cut (msg then ends in ": "). msg "": none. The gateway
// refuses such a call for every tool; the edge for every tool it may send
// to the primary.
func UnknownParams(t Tool, args map[string]any) (msg, long string) {
	var unknown []string
	for k := range args {
		if !t.Accepts(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return "", ""
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		if len(k) > MaxParamName {
			return fmt.Sprintf("Unknown parameter for tool %s%s: ", Prefix, t.Name), k
		}
	}
	more := ""
	if n := len(unknown); n > maxUnknown {
		unknown, more = unknown[:maxUnknown], fmt.Sprintf(" (and %d more)", n-maxUnknown)
	}
	return fmt.Sprintf("Unknown parameter '%s'%s for tool %s%s", strings.Join(unknown, "', '"), more, Prefix, t.Name), ""
}

// typeFits reports a value a parameter of JSON Schema type want takes.
func typeFits(want string, v any) bool {
	got := jsonType(v)
	if want == "integer" || want == "number" {
		return got == "number" || got == "string" || got == "null"
	}
	return got == want || got == "null"
}

// jsonType is the JSON type of a parsed value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v) // cannot happen: v is what JSON decodes to
}

// anA is a type's name with its article ("an array", "a string", "null").
func anA(typ string) string {
	switch {
	case typ == "null":
		return typ
	case strings.ContainsRune("aeiou", rune(typ[0])):
		return "an " + typ
	}
	return "a " + typ
}

// idListArgs are the arguments that list ids: each element a string.
var idListArgs = []string{"drawer_ids", "artifact_ids"}

// MaxIntArg bounds an integer argument's size: every integer up to it
// is exact as a float64, so Go (IntArg) and Python read the same number.
const MaxIntArg = 1 << 53

// checkNumbers refuses an argument typed "integer" (ParamType) that is
// not a finite number, or one in a string, of at most MaxIntArg in size
// (serve coerces it with Python's int(), of inf: HTTP 500; the gateway
// reads a page's offset and limit and a wait's timeout itself), a
// negative offset (MemPalace reads it as 0: a pager would get the first
// page for it), one typed "number" that is not finite (serve's float()
// reads "nan", "inf" and "1e999": a NaN threshold finds no duplicate; any
// finite value is one MemPalace takes), and an id list (idListArgs) that
// is not an array of strings. Each refusal says what is wrong.
func checkNumbers(args map[string]any) error {
	invalid := func(k, why string) error {
		return fmt.Errorf("Invalid value for parameter '%s': %s", k, why)
	}
	for k, v := range args {
		if v == nil {
			continue
		}
		switch ParamType(k) {
		case "integer":
			if f, not := number(v); not != "" {
				return invalid(k, "must be an integer, not "+not)
			} else if math.Abs(f) > MaxIntArg {
				return invalid(k, fmt.Sprintf("must be an integer of at most %d in size", int64(MaxIntArg)))
			} else if f < 0 && k == "offset" {
				return invalid(k, "must not be negative")
			}
		case "number":
			if _, not := number(v); not != "" {
				return invalid(k, "must be a finite number, not "+not)
			}
		}
	}
	for _, k := range idListArgs {
		v, ok := args[k]
		if !ok || v == nil {
			continue
		}
		list, isList := v.([]any)
		if !isList {
			return invalid(k, "must be an array of ids (strings)")
		}
		for i, x := range list {
			if _, isStr := x.(string); !isStr {
				return invalid(fmt.Sprintf("%s[%d]", k, i), "must be a string")
			}
		}
	}
	return nil
}

// IntArg reads an integer argument as MemPalace coerces it (int() of a
// number, or of a string's digits): false for what CheckValues refuses.
func IntArg(v any) (int, bool) {
	f, not := number(v)
	return int(f), not == "" && math.Abs(f) <= MaxIntArg
}

// number reads a number argument as MemPalace coerces it (Python's
// float() of a number, or of a string), or says, as a noun, why it is not
// a finite one: NaN (every range check passes it: its comparisons are all
// false), an infinity (Python's float() reads "inf", "Infinity" and
// "1e999" alike), a string of something else.
func number(v any) (float64, string) {
	var f float64
	var err error
	switch x := v.(type) {
	case float64:
		f = x
	case json.Number:
		f, err = strconv.ParseFloat(string(x), 64)
	case string:
		f, err = strconv.ParseFloat(x, 64)
	default:
		return 0, anA(jsonType(v))
	}
	switch {
	case math.IsNaN(f):
		return 0, "NaN (not a number)"
	case math.IsInf(f, 0):
		return 0, "infinite (Python reads \"inf\", \"Infinity\" and \"1e999\" as infinity)"
	case errors.Is(err, strconv.ErrSyntax):
		return 0, "a string that does not read as a number"
	}
	return f, ""
}
