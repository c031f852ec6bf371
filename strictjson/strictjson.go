package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth bounds nesting: far beyond any tool's arguments, well below
// where a recursive parser (Python's) gives up.
const MaxDepth = 64

// MaxValues bounds how many JSON values (objects, arrays, strings,
// numbers, literals: each element and each member's value counts) one
// document may hold: far beyond any call's (a checkpoint of a thousand
// items is some ten thousand), and a bound on what a parse builds. Each
// value costs a parse a Go value (an empty object some hundred bytes), so
// 16 MiB of "{}," is 5.6 million of them, half a gigabyte (attack69 F7);
// at MaxValues the parse stops there, refused, having built a few
// megabytes.
const MaxValues = 20000

// Violation is one thing in the JSON that parsers read differently: at
// Path ("$", "$.params.arguments.metadata", "$.items[2]"), Reason.
type Violation struct {
	Path, Reason string
}

// Error is valid JSON that strictjson refuses to interpret: every
// violation in it, in the order of the document (a subtree nested too
// deep counts once, unread), as opposed to a syntax error.
type Error struct {
	Violations []Violation
}

// Error names the first violation: "path: reason".
func (e *Error) Error() string {
	v := e.Violations[0]
	if v.Path == "" {
		return v.Reason
	}
	return v.Path + ": " + v.Reason
}

// Within reports whether every violation lies at or under path (the
// gateway: a request whose params alone are refused has an id to answer).
func (e *Error) Within(path string) bool {
	for _, v := range e.Violations {
		if v.Path != path && !strings.HasPrefix(v.Path, path+".") && !strings.HasPrefix(v.Path, path+"[") {
			return false
		}
	}
	return true
}

// Decode parses one JSON value, numbers as json.Number (re-encoding
// writes the literal that was sent). A syntax error is returned as it
// is, with no value; valid JSON with violations gives its value as read
// (a duplicate's last, a subtree too deep nil) and an *Error.
func Decode(b []byte) (any, error) { return decode(b, false, "$", 0) }

// ArgumentsDepth is the depth of a tools/call's arguments in the
// JSON-RPC request the gateway parses: the request object 0, its params
// 1, params.arguments 2. MaxDepth counts from the request.
const ArgumentsDepth = 2

// ArgumentsPath is where a tools/call's arguments sit in that request.
const ArgumentsPath = "$.params.arguments"

// DecodeArguments is Decode of a tools/call's arguments alone (the edge's)
// read as the gateway's parse of the whole request reads them: nesting
// counted from the request (ArgumentsDepth), paths from ArgumentsPath,
// so both refuse exactly the same bytes. Numbers are float64, as
// encoding/json decodes them into an any.
func DecodeArguments(b []byte) (any, error) { return decode(b, true, ArgumentsPath, ArgumentsDepth) }

// DecodeEnvelope is Decode of a JSON-RPC request with its top-level
// "params" passed over: read, but not built, checked or counted against
// MaxValues, and absent from the value. A parse that stopped in the
// params (MaxValues) has read the envelope partly or not at all; read
// this way, its id answers the refusal of the params.
func DecodeEnvelope(b []byte) (any, error) { return decode(b, false, "$", 0, "params") }

func decode(b []byte, floats bool, at string, depth int, passOver ...string) (any, error) {
	r := &reader{raw: b, dec: json.NewDecoder(bytes.NewReader(b)), floats: floats, passOver: passOver}
	r.dec.UseNumber()
	v, err := r.value(at, depth)
	if err != nil {
		return nil, err
	}
	if _, err := r.dec.Token(); err != io.EOF {
		r.violate("", "data after the JSON value")
	}
	if len(r.violations) > 0 {
		return v, &Error{Violations: r.violations}
	}
	return v, nil
}

// reader is one Decode's state.
type reader struct {
	raw        []byte
	dec        *json.Decoder
	floats     bool
	violations []Violation
	values     int // read so far (MaxValues)
	// passOver: the top-level object's members read past (DecodeEnvelope).
	passOver []string
}

func (r *reader) violate(at, reason string) {
	r.violations = append(r.violations, Violation{Path: at, Reason: reason})
}

// token is the next token; a string's raw bytes are checked for what
// the decoder would replace by U+FFFD.
func (r *reader) token(at string) (json.Token, error) {
	start := r.dec.InputOffset()
	tok, err := r.dec.Token()
	if err != nil {
		return nil, err
	}
	if s, ok := tok.(string); ok && strings.ContainsRune(s, utf8.RuneError) {
		raw := r.raw[start:r.dec.InputOffset()]
		switch {
		case !utf8.Valid(raw):
			r.violate(at, "not valid UTF-8")
		case loneSurrogate(raw):
			r.violate(at, `an escape of a lone surrogate (\ud800-\udfff not in a pair: Go reads it as U+FFFD, Python keeps it)`)
		}
	}
	return tok, nil
}

func (r *reader) value(at string, depth int) (any, error) {
	if r.values++; r.values > MaxValues {
		// The rest is not read: an error of its own, not one violation among others.
		return nil, &Error{Violations: []Violation{{Path: at, Reason: fmt.Sprintf("more than %d values in one document", MaxValues)}}}
	}
	tok, err := r.token(at)
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(t), 64) // the error is ErrRange, with f ±Inf
		if math.IsInf(f, 0) {
			r.violate(at, "a number beyond a 64-bit float (Python reads it as infinity, and answers it as Infinity, which is not JSON)")
		}
		if r.floats {
			return f, nil
		}
		return t, nil
	case json.Delim:
		if depth >= MaxDepth {
			r.violate(at, fmt.Sprintf("nested deeper than %d", MaxDepth))
			return nil, r.skip()
		}
		if t == '[' {
			return r.array(at, depth)
		}
		return r.object(at, depth)
	}
	return tok, nil
}

func (r *reader) array(at string, depth int) (any, error) {
	list := []any{}
	for r.dec.More() {
		v, err := r.value(fmt.Sprintf("%s[%d]", at, len(list)), depth+1)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	_, err := r.dec.Token() // ']'
	return list, err
}

func (r *reader) object(at string, depth int) (any, error) {
	obj := map[string]any{}
	folded := map[string]string{}
	for r.dec.More() {
		kt, err := r.token(at)
		if err != nil {
			return nil, err
		}
		k, _ := kt.(string)
		if prev, dup := folded[foldKey(k)]; dup {
			if prev == k {
				r.violate(at, fmt.Sprintf("key %q appears twice", k))
			} else {
				r.violate(at, fmt.Sprintf("keys %q and %q differ only in case", prev, k))
			}
		}
		folded[foldKey(k)] = k
		if depth == 0 && slices.Contains(r.passOver, k) {
			if err := r.passValue(); err != nil {
				return nil, err
			}
			continue
		}
		v, err := r.value(at+"."+k, depth+1)
		if err != nil {
			return nil, err
		}
		obj[k] = v
	}
	_, err := r.dec.Token() // '}'
	return obj, err
}

// passValue reads past one value, building nothing of it.
func (r *reader) passValue() error {
	tok, err := r.dec.Token()
	if d, ok := tok.(json.Delim); ok && err == nil && (d == '[' || d == '{') {
		return r.skip()
	}
	return err
}

// skip reads past the rest of an array or object whose opening
// delimiter was read, without recursion.
func (r *reader) skip() error {
	for open := 1; open > 0; {
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '[' || d == '{' {
				open++
			} else {
				open--
			}
		}
	}
	return nil
}

// loneSurrogate reports a \u escape of a surrogate not in a high-low
// pair in raw, the bytes of one JSON string (and the separators before it).
func loneSurrogate(raw []byte) bool {
	for {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 || i+1 >= len(raw) {
			return false
		}
		if raw = raw[i:]; raw[1] != 'u' {
			raw = raw[2:] // \" \\ \n …: never a surrogate
			continue
		}
		r := hex4(raw[2:])
		raw = raw[6:]
		switch {
		case r >= 0xDC00 && r < 0xE000:
			return true // a low one first
		case r >= 0xD800 && r < 0xDC00:
			if len(raw) < 6 || raw[0] != '\\' || raw[1] != 'u' {
				return true
			}
			if low := hex4(raw[2:]); low < 0xDC00 || low >= 0xE000 {
				return true
			}
			raw = raw[6:]
		}
	}
}

// hex4 reads the four hex digits of a \u escape (the decoder has checked
// them: the string parsed).
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n)
}

// foldKey maps a key to one representative of its case-folding class:
// two keys get the same foldKey exactly when strings.EqualFold holds. A
// rune's is its class's lower-case ASCII letter if it has one, else its
// least member, so a key of lower-case ASCII is its own (not copied).
func foldKey(k string) string {
	ascii := true
	for i := 0; i < len(k) && ascii; i++ {
		ascii = k[i] < utf8.RuneSelf && (k[i] < 'A' || k[i] > 'Z')
	}
	if ascii {
		return k
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f >= 'a' && f <= 'z' {
				return f
			}
			least = min(least, f)
		}
		return least
	}, k)
}

// Float is a decoded JSON number as a float64, whether it was decoded as
// one or kept as a json.Number (its literal, as Decode keeps it); false
// for anything else.
func Float(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
