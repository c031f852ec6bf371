package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Each way two parsers read the same bytes differently is refused, named
// by where it is; the reading goes on past it, so every violation is
// listed.
func TestDecodeRefusesWhatParsersReadDifferently(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":{"wing":"x","wing":"y"}}`, `$.a: key "wing" appears twice`},
		{`{"a":{"k":1,"K":2}}`, `$.a: keys "k" and "K" differ only in case`},
		{`{"a":[1,1e400]}`, `$.a[1]: a number beyond a 64-bit float`},
		{"{\"a\":\"x\xffy\"}", `$.a: not valid UTF-8`},
		{"{\"a\":\"\xc0\xaf\"}", `$.a: not valid UTF-8`},
		{"{\"k\xff\":1}", `$: not valid UTF-8`},
		{`{"a":"lone \ud800 high"}`, `$.a: an escape of a lone surrogate`},
		{`{"a":"lone \udc00 low"}`, `$.a: an escape of a lone surrogate`},
		{`{"a":"\ud800\u0041"}`, `$.a: an escape of a lone surrogate`},
		{`{"a":"end \ud800"}`, `$.a: an escape of a lone surrogate`},
		{`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, `nested deeper than 64`},
		{`{} {}`, `data after the JSON value`},
	} {
		_, err := Decode([]byte(c.in))
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v, want an *Error with %q", c.in, err, c.want)
		}
	}
}

// What every parser reads alike passes, a pair of surrogates, an escaped
// backslash before "ud800" and a real U+FFFD among it.
func TestDecodeTakesWhatParsersReadAlike(t *testing.T) {
	for _, in := range []string{
		`{"a":"pair \ud83d\ude00","b":"\\ud800 is text","c":"\ufffd","d":"�","e":1e300,"f":[{"k":1,"l":2}]}`,
		`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
	} {
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%q): %v", in, err)
		}
	}
}

// Within tells a request whose params alone are refused (the gateway can
// answer its id) from one whose envelope is.
func TestWithinListsEveryViolation(t *testing.T) {
	_, err := Decode([]byte(`{"params":{"a":1,"a":2},"id":1,"id":2}`))
	var se *Error
	if !errors.As(err, &se) || len(se.Violations) != 2 || se.Within("$.params") {
		t.Fatalf("got %v (%+v), want two violations, one outside $.params", err, se)
	}
	_, err = Decode([]byte(`{"id":1,"params":{"arguments":{"a":1,"a":2},"x":"\ud800"}}`))
	if !errors.As(err, &se) || !se.Within("$.params") || se.Within("$.params.arguments") {
		t.Fatalf("got %v (%+v), want both under $.params, one outside its arguments", err, se)
	}
}

// DecodeArguments gives numbers as encoding/json does into an any.
func TestDecodeArguments(t *testing.T) {
	v, err := DecodeArguments([]byte(`{"limit":5}`))
	if err != nil || v.(map[string]any)["limit"] != 5.0 {
		t.Fatalf("got %#v, %v", v, err)
	}
}

// foldKey agrees with strings.EqualFold, the ASCII fast path included.
func TestFoldKeyIsEqualFold(t *testing.T) {
	keys := []string{"k", "K", "\u212a", "s", "S", "\u017f", "wing", "WING", "Wing", "w\u0130ng", "wing_a", "\u00df", "\u1e9e", "a1_", "A1_", "\u03a3", "\u03c3", "\u03c2"}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
				t.Errorf("%q %q: foldKey equal %v, EqualFold %v", a, b, got, want)
			}
		}
	}
}

// A document of MaxValues values passes; one more is refused where the
// parse stopped, for the gateway's whole request and the edge's
// arguments alike (attack69 F7: 16 MiB of {} was 5.6 million Go maps).
func TestDecodeStopsAtMaxValues(t *testing.T) {
	list := func(n int) []byte { // {"a":[0,0,...]}: n values in all
		return []byte(`{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n-2), ",") + `]}`)
	}
	for name, decode := range map[string]func([]byte) (any, error){"Decode": Decode, "DecodeArguments": DecodeArguments} {
		if _, err := decode(list(MaxValues)); err != nil {
			t.Errorf("%s of %d values: %v", name, MaxValues, err)
		}
		v, err := decode(list(MaxValues + 1))
		var se *Error
		if !errors.As(err, &se) || v != nil || !strings.Contains(err.Error(), "more than 20000 values in one document") || !strings.Contains(err.Error(), "[19998]") {
			t.Errorf("%s of %d values: %v, %v", name, MaxValues+1, v != nil, err)
		}
	}
}

// DecodeEnvelope reads a request with its params passed over, whatever
// they hold (more than MaxValues values here), and what is around them
// strictly: the id after them is read, a key twice around them refused.
func TestDecodeEnvelopePassesOverTheParams(t *testing.T) {
	params := `{"a":[` + strings.Repeat("[{}],", MaxValues) + `0]}`
	v, err := DecodeEnvelope([]byte(`{"method":"m","params":` + params + `,"id":7}`))
	m, _ := v.(map[string]any)
	if err != nil || m["id"] != json.Number("7") || m["method"] != "m" || len(m) != 2 {
		t.Errorf("the envelope: %v, %v", v, err)
	}
	if _, err := DecodeEnvelope([]byte(`{"params":` + params + `,"id":7,"id":8}`)); err == nil || !strings.Contains(err.Error(), `key "id" appears twice`) {
		t.Errorf("a key twice beside the params: %v", err)
	}
}
