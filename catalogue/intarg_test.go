package catalogue_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	. "github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// What IntArg reads a string or a number as, and what it refuses, saying
// why: MemPalace 3.11.0 coerces an integer argument with Python's int()
// (mcp_server/protocol.py, handle_request: `int(value)` where the JSON
// value is not a Python int), which takes " 42 ", "+5" and "1_000",
// truncates the number 3.5 to 3, and refuses the strings "3.5" and "1e3"
// (-32602 "Invalid value for parameter 'limit'").
func TestIntArgReadsAsPythonsInt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    any
		want int
		why  string
	}{
		{"42", 42, ""}, {" 42\n", 42, ""}, {"\u00a042\u3000", 42, ""}, {"+5", 5, ""}, {"-5", -5, ""}, {"1_000", 1000, ""}, {"007", 7, ""},
		{3.5, 3, ""}, {json.Number("-3.9"), -3, ""}, {json.Number("2e3"), 2000, ""},
		{json.Number("9007199254740991"), 1<<53 - 1, ""},
		{"3.5", 0, "a decimal point or an exponent"}, {"1e3", 0, "a decimal point or an exponent"},
		{"1__0", 0, "does not read"}, {"_1", 0, "does not read"}, {"1_", 0, "does not read"}, {"+-5", 0, "does not read"}, {"- 5", 0, "does not read"},
		{"\x1c5", 0, "does not read"}, {"", 0, "does not read"}, {"0x10", 0, "does not read"},
		{"٣", 0, "digits other than 0-9"}, {"nan", 0, "NaN"}, {"inf", 0, "infinite"},
		{strings.Repeat("0", 4301), 0, "more than 4300 digits"},
		{json.Number("9007199254740992"), 0, "size"}, {"9007199254740993", 0, "size"}, {strings.Repeat("9", 400), 0, "size"},
	} {
		n, ok := IntArg(c.v)
		err := CheckValues(Tool{Name: "list_drawers"}, map[string]any{"limit": c.v})
		switch {
		case c.why == "" && (!ok || n != c.want || err != nil):
			t.Errorf("%q: IntArg %d, %v (%v), want %d", c.v, n, ok, err, c.want)
		case c.why != "" && (ok || err == nil || !strings.Contains(err.Error(), c.why)):
			t.Errorf("%.40q: IntArg %d, %v (%v), want refused: %s", c.v, n, ok, err, c.why)
		}
	}
}

// TestRealIntArgIsMemPalaces is the parser differential: over strings of
// the characters int() treats apart and over JSON numbers, IntArg reads
// what the real MemPalace's Python reads (protocol.py's coercion, run as
// it is written), and refuses what it refuses; it refuses besides what
// it reads beyond MaxIntArg and a string of non-ASCII digits.
func TestRealIntArgIsMemPalaces(t *testing.T) {
	venv := realpalace.Venv(t)
	corpus := []string{`"42"`, `" 42 "`, `"+5"`, `"-0"`, `"1_000"`, `"3.5"`, `"1e3"`, `3.5`, `-0.5`, `2.0`, `1e20`, `1e400`, `-1e400`,
		`9007199254740991`, `9007199254740992`, `9007199254740993`, `"9007199254740993"`, `12345678901234567890`, `"\u00a07\u2028"`, `"\u001c7"`, `"\u0085-7"`}
	pool := []rune("0123456789__+- .eE\t\n\u00a0\u3000\u001c\u0085xa")
	rng := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		rs := make([]rune, 1+rng.IntN(7))
		for i := range rs {
			rs[i] = pool[rng.IntN(len(pool))]
		}
		b, _ := json.Marshal(string(rs))
		corpus = append(corpus, string(b))
		if f := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20))); rng.IntN(2) == 0 {
			corpus = append(corpus, fmt.Sprint(f))
		} else {
			corpus = append(corpus, fmt.Sprint(int64(f)))
		}
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-c", `
import json, sys
out = []
for value in json.loads(sys.stdin.read()):
    try:
        # mcp_server/protocol.py, handle_request, for a declared "integer"
        out.append(str(value if isinstance(value, int) else int(value)))
    except (ValueError, TypeError, OverflowError):
        out.append(None)
json.dump(out, sys.stdout)
`)
	cmd.Stdin = strings.NewReader("[" + strings.Join(corpus, ",") + "]")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want []*string
	if err := json.Unmarshal(raw, &want); err != nil || len(want) != len(corpus) {
		t.Fatalf("python answered %d of %d (%v)", len(want), len(corpus), err)
	}
	bad := 0
	for i, text := range corpus {
		d := json.NewDecoder(strings.NewReader(text))
		d.UseNumber() // as the gateway's parse and the edge's strict one read a number
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		n, ok := IntArg(v)
		expect := want[i] != nil
		if expect {
			py, _ := new(big.Int).SetString(*want[i], 10)
			s, _ := v.(string)
			expect = py.CmpAbs(big.NewInt(MaxIntArg)) <= 0 && !strings.ContainsFunc(s, nonASCIIDigit) // refused besides
		}
		if got := fmt.Sprint(n); ok != expect || ok && got != *want[i] {
			if bad++; bad <= 20 {
				t.Errorf("%s: IntArg %s, %v; MemPalace's int() %v", text, got, ok, deref(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d differ", bad, len(corpus))
	}
}

func nonASCIIDigit(r rune) bool { return r > unicode.MaxASCII && unicode.IsDigit(r) }

func deref(s *string) string {
	if s == nil {
		return "refuses it"
	}
	return *s
}
