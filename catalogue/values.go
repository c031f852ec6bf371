package catalogue

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/joakimp/devbox-config/lookalike"
)

// CheckValues refuses a call of t whose arguments hold a value
// MemPalace's schema does not take, naming the first such parameter, in
// the words of a JSON-RPC -32602: an argument of another JSON type than
// ParamType's (MemPalace passes it to the tool as it is: a search's
// context of 5.6 million objects cost the primary a gigabyte, an
// add_drawer's source_file 123 is a TypeError), an integer or a number
// that is not one MemPalace reads as such (checkNumbers), an id list that
// is not an array of strings, a checkpoint's item that is not an object, a
// metadata object holding a key of the gateway's provenance stamp
// (stampKey). The gateway refuses such a call before it is authorized, the edge
// before either palace or the outbox sees it. Null is an argument's
// absence, left to MemPalace (its default, or its own refusal), but
// where nullRefused; an integer or a number may come as a string, which
// MemPalace converts. Numbers may be decoded as json.Number or float64.
func CheckValues(t Tool, args map[string]any) error {
	bad := ""
	for k, v := range args {
		if k != WaitForPrevious && (!typeFits(ParamType(k), v) || v == nil && nullRefused[k]) && (bad == "" || k < bad) {
			bad = k
		}
	}
	if bad != "" {
		return fmt.Errorf("Invalid value for parameter '%s': must be %s, not %s (the schema of %s%s)",
			bad, anA(ParamType(bad)), anA(jsonType(args[bad])), Prefix, t.Name)
	}
	if err := stampKey(args); err != nil {
		return err
	}
	return checkNumbers(args)
}

// stampKey refuses a metadata object (event_append's, artifact_put's,
// patch_submit's) that holds a look-alike of the gateway's provenance
// stamp: an "origin" whose value is an object, or a "trusted" whose value
// is a boolean, as the stamp's are, under a key that reads as either
// (lookalike.Skeleton: any case, a Cyrillic о, a trailing space), at its
// top or one object down. The gateway stamps every record with a
// top-level "origin" saying who wrote it, verified, and whether the
// reader trusts them; a writer's copy of its shape beside it would be a
// second, unverified one that disagrees (attack82 F2, attack85 F5). A
// plain value ("origin": "ci", a webhook's source) is the writer's own
// word and passes (review27 O1: refusing it broke ordinary metadata, and
// an older edge's queued writes). MemPalace itself reads neither key.
func stampKey(args map[string]any) error {
	meta, _ := args["metadata"].(map[string]any)
	if len(meta) == 0 {
		return nil // most calls: nothing to build (every write of the edge and the gateway runs this)
	}
	at := map[string]any{}
	for k, v := range meta {
		at[k] = v
		if inner, ok := v.(map[string]any); ok {
			for ik, iv := range inner {
				at[k+"."+ik] = iv
			}
		}
	}
	for _, path := range slices.Sorted(maps.Keys(at)) {
		key := path[strings.LastIndex(path, ".")+1:]
		if like := stampLike(key, at[path]); like != "" {
			return fmt.Errorf("Invalid value for parameter 'metadata': it holds %+q, shaped as the gateway's provenance stamp's %q (each record's own \"origin\" says who wrote it, as the gateway verified, and whether the reader trusts them); a writer may not put another beside it (fix: drop the key, rename it, e.g. %q, or give it a plain string)", path, like, "claimed_"+like)
		}
	}
	return nil
}

// stampLike is the stamp's key that key, holding v, looks like ("":
// none): an origin-like key holding an object, a trusted-like key holding
// a boolean.
func stampLike(key string, v any) string {
	sk := lookalike.Skeleton(key)
	switch _, obj := v.(map[string]any); {
	case obj && sk == lookalike.Skeleton("origin"):
		return "origin"
	case sk == lookalike.Skeleton("trusted"):
		if _, isBool := v.(bool); isBool {
			return "trusted"
		}
	}
	return ""
}

// WaitForPrevious is the argument MemPalace takes for every tool, of any
// value, though no schema lists it, and drops before the tool runs
// (mcp_server/protocol.py, handle_request: left out of its unknown
// parameters, popped before dispatch; MemPalace PR #322, issue #816).
// Gemini CLI adds it, a boolean, to every tool's schema it shows the
// model, and sends it. UnknownParams and CheckValues let it through for
// every tool, so the gateway and the edge take it as MemPalace does.
const WaitForPrevious = "wait_for_previous"

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
		if !t.Accepts(k) && k != WaitForPrevious {
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

// nullRefused are the arguments whose null is refused, not taken as their
// absence: checkpoint's items (MemPalace has no default for it: None is
// its error result) and diary (which MemPalace would take as none; the
// gateway has always refused it, and the edge refuses it with it, so that
// no such checkpoint is queued to die at the gateway).
var nullRefused = map[string]bool{"items": true, "diary": true}

// listOf are the array arguments whose elements have one JSON type: the
// id lists' strings, checkpoint's items' objects.
var listOf = map[string]string{"drawer_ids": "string", "artifact_ids": "string", "items": "object"}

// MaxIntArg bounds an integer argument's size: every integer up to it
// is exact as a float64, and none beyond it rounds to it (2^53+1, which
// Python reads exactly, rounds to 2^53), so Go (IntArg) and Python read
// the same number.
const MaxIntArg = 1<<53 - 1

// checkNumbers refuses an argument typed "integer" (ParamType) that is
// not one MemPalace reads as an integer (integer), or one of more than
// MaxIntArg in size (the gateway reads a page's offset and limit and a
// wait's timeout itself), a negative offset (MemPalace reads it as 0: a
// pager would get the first page for it), one typed "number" that is not
// finite (serve's float() reads "nan", "inf" and "1e999": a NaN threshold
// finds no duplicate; any finite value is one MemPalace takes), and a
// list's element of another type than listOf's. Each refusal says what is
// wrong.
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
			if f, not := integer(v); not != "" {
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
	for k, want := range listOf { // a call's tool takes one of them at most
		list, _ := args[k].([]any) // CheckValues refused another type
		for i, x := range list {
			if jsonType(x) != want {
				return invalid(fmt.Sprintf("%s[%d]", k, i), "must be "+anA(want))
			}
		}
	}
	return nil
}

// IntArg reads an integer argument as MemPalace coerces it (integer):
// false for what CheckValues refuses.
func IntArg(v any) (int, bool) {
	f, not := integer(v)
	return int(f), not == "" && math.Abs(f) <= MaxIntArg
}

// integer reads an integer argument as MemPalace 3.11.0 coerces it
// (mcp_server/protocol.py, handle_request: int(value) of what JSON did not
// decode to a Python int): a number's integer part (int() of a float
// truncates: 3.5 is 3), a string as int() reads one (intString); or says,
// as a noun, why it is not one (NaN and infinities: int() raises).
func integer(v any) (float64, string) {
	if s, ok := v.(string); ok {
		return intString(s)
	}
	f, not := number(v)
	return math.Trunc(f), not
}

// maxIntDigits is Python's int() limit on a string's digits
// (sys.int_max_str_digits, 4300 by default): more is a ValueError.
const maxIntDigits = 4300

// intString reads s as Python's int(s), base 10: whitespace at either end
// (Go's unicode.IsSpace is int()'s: ASCII's six and Unicode's, not
// U+001C..U+001F), one sign, then digits, single underscores between
// them, at most maxIntDigits. int() reads non-ASCII decimal digits too,
// by its Python's Unicode tables (3.11's are 14.0, Go's newer): those
// are refused, saying so. TestRealIntArgIsMemPalaces holds it to the
// real Python.
func intString(s string) (float64, string) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	body := strings.TrimLeft(t, "+-")
	sign := t[:len(t)-len(body)]
	ok := len(sign) <= 1 && body != "" && body[0] != '_' && body[len(body)-1] != '_' &&
		!strings.Contains(body, "__") && strings.Trim(body, "0123456789_") == ""
	digits := strings.ReplaceAll(body, "_", "")
	switch _, not := number(t); {
	case ok && len(digits) > maxIntDigits:
		return 0, fmt.Sprintf("a string of more than %d digits (Python's int() reads no more)", maxIntDigits)
	case ok:
		f, _ := strconv.ParseFloat(sign+digits, 64) // beyond MaxIntArg (+Inf at most): refused by size
		return f, ""
	case strings.ContainsFunc(t, func(r rune) bool { return r > unicode.MaxASCII && unicode.IsDigit(r) }):
		return 0, "a string of digits other than 0-9 (send 0-9)"
	case not != "":
		return 0, not
	}
	return 0, "a string with a decimal point or an exponent (MemPalace reads a string with Python's int(), which takes digits only: send the integer)"
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
