package pyjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/strictjson"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// sanitize reads JSON lines and writes, for each, the text MemPalace's own
// _sanitize_metadata makes of it (what it counts against its 64 KiB cap).
const sanitize = `
import json, sys
from mempalace.logstream import _sanitize_metadata
for line in sys.stdin:
    sys.stdout.write(_sanitize_metadata(json.loads(line)) + "\n")
`

// A parser differential against real MemPalace 3.11.0: for hand-picked
// and random metadata (unicode, nested, floats of every magnitude and
// form, integers past 64 bits, escapes and control characters), Dumps
// writes byte for byte the text _sanitize_metadata returns, so the size
// the edge counts is the size MemPalace counts (attack100 F1).
func TestRealDumpsIsMemPalacesMetadataText(t *testing.T) {
	venv := realpalace.Venv(t)
	inputs := []string{
		`{"b":1,"a":[1.0,1e5,1E16,1e15,0.0001,0.00001,-0,-0.0,1.5e300,5e-324,123456789012345678901234567890,0.1e1,2.5E-7,1.7976931348623157e308]}`,
		`{"s":"é€😀 \u0001\u001f\u007f\n\t\"\\\/\b\f\r\u2028\u2029\ufeff","z":{"y":[],"x":{}},"t":true,"f":false,"n":null}`,
		`{"ä":1,"a":2,"Z":3,"😀":4,"\uffff":5,"":6,"\u0000":7}`,
		`{"edge_op_id":"` + strings.Repeat("0", 64) + `"}`,
	}
	r := rand.New(rand.NewPCG(100, 1))
	for range 300 {
		b, _ := json.Marshal(randomObject(r, 3))
		inputs = append(inputs, string(numbersAsWritten(r, b)))
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-c", sanitize)
	cmd.Env = append(os.Environ(), "PYTHONIOENCODING=utf-8")
	cmd.Stdin = strings.NewReader(strings.Join(inputs, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		v, err := strictjson.Decode([]byte(inputs[i]))
		if err != nil {
			t.Fatalf("%s: %v", inputs[i], err)
		}
		got, err := Dumps(v)
		if err != nil {
			t.Fatalf("%s: %v", inputs[i], err)
		}
		if want := sc.Text(); string(got) != want {
			t.Errorf("input %s\n got %s\nwant %s (MemPalace)", inputs[i], got, want)
		}
		if i == len(inputs)-1 {
			return
		}
	}
	t.Fatalf("MemPalace answered fewer lines than the %d inputs: %s", len(inputs), stderr.String())
}

// randomObject is a metadata object of random keys and values, nested at
// most depth deep.
func randomObject(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(6) {
		m[randomString(r)] = randomValue(r, depth-1)
	}
	return m
}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(8); {
	case n == 0 && depth > 0:
		return randomObject(r, depth)
	case n == 1 && depth > 0:
		var l []any
		for range r.IntN(4) {
			l = append(l, randomValue(r, depth-1))
		}
		return l
	case n == 2:
		return randomString(r)
	case n == 3:
		return r.IntN(2) == 0
	case n == 4:
		return nil
	}
	return json.Number("0") // a number, written below in one of many forms
}

// randomString mixes ASCII, what JSON escapes, control characters,
// non-ASCII of 2, 3 and 4 UTF-8 bytes, and the line separators.
func randomString(r *rand.Rand) string {
	pool := []rune{'a', 'Z', '0', ' ', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', 0, 1, 0x1f, 0x7f, 'é', '€', '中', '😀', 0x2028, 0x2029, 0xfeff, 0xffff}
	var sb strings.Builder
	for range r.IntN(12) {
		sb.WriteRune(pool[r.IntN(len(pool))])
	}
	return sb.String()
}

// numbersAsWritten replaces each 0 randomObject left with a number
// literal of a random form: small and huge integers, -0, floats from
// random bits written shortest, with an exponent, or with trailing zeros.
func numbersAsWritten(r *rand.Rand, b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != '0' || i == 0 || !bytes.ContainsRune([]byte(":[,"), rune(b[i-1])) {
			out = append(out, b[i])
			continue
		}
		out = append(out, randomNumber(r)...)
	}
	return out
}

func randomNumber(r *rand.Rand) string {
	f := math.Float64frombits(r.Uint64())
	for math.IsNaN(f) || math.IsInf(f, 0) {
		f = math.Float64frombits(r.Uint64())
	}
	switch r.IntN(7) {
	case 0:
		return strconv.Itoa(r.IntN(2000) - 1000)
	case 1:
		return "-0"
	case 2:
		return strconv.FormatUint(r.Uint64(), 10) + strconv.FormatUint(r.Uint64(), 10)
	case 3:
		return strconv.FormatFloat(f, 'e', -1, 64)
	case 4:
		return strconv.FormatFloat(float64(r.IntN(1e6))*math.Pow(10, float64(r.IntN(40)-20)), 'g', -1, 64)
	case 5:
		return strconv.FormatFloat(float64(r.IntN(1000))/8, 'f', 5, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
